"""What an API key may call: the key scopes, one per kind of endpoint.

A key scope limits the *client* (the business service holding the key); the end user it acts
for (``X-Harness-User``) is still checked against the tenant's policy (``policy:admin``,
``dataset:write``, ``experiment:run``, ``approval:decide``, tool scopes). Both must hold: a key
without ``policy:admin`` cannot edit policy even for a tenant admin, and a key with it cannot
make a member an admin.
"""

from __future__ import annotations

RUNS_CREATE = "runs:create"
RUNS_READ = "runs:read"  # runs, their events, traces, receipts, approvals listed, replay
RUNS_CANCEL = "runs:cancel"
APPROVALS_DECIDE = "approvals:decide"
REPORTS_READ = "reports:read"
POLICY_READ = "policy:read"  # the policy, rules, changes, budget, what-if previews
POLICY_ADMIN = "policy:admin"  # policy edits
DATASETS = "datasets"
EXPERIMENTS = "experiments"

KEY_SCOPES: tuple[str, ...] = (
    RUNS_CREATE,
    RUNS_READ,
    RUNS_CANCEL,
    APPROVALS_DECIDE,
    REPORTS_READ,
    POLICY_READ,
    POLICY_ADMIN,
    DATASETS,
    EXPERIMENTS,
)
