"""What-if: a proposed policy change previewed over a tenant's last runs, before it is saved.

Each run is replayed twice (``harness.replay.run``), under today's policy and under today's
policy with the proposed change, both in memory; the calls whose verdict differs are listed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.errors import ReplayUnavailable
from harness.models import Run, RunStatus, Tenant
from harness.replay.run import Verdict, replay_run
from policy import services as policy

MAX_WHAT_IF_RUNS = 200


@dataclass(frozen=True)
class WhatIfChange:
    run_id: str
    request_id: str
    step: int
    call_id: str
    tool: str
    before: Verdict
    after: Verdict

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "request_id": self.request_id,
            "step": self.step,
            "call_id": self.call_id,
            "tool": self.tool,
            "before": self.before.to_dict(),
            "after": self.after.to_dict(),
        }


def what_if(tenant: Tenant, changes: list[dict[str, Any]], limit: int) -> dict[str, Any]:
    """The calls of the tenant's last ``limit`` runs whose verdict the proposed ``changes``
    would change: each run replayed under today's policy, then under today's policy with the
    changes (in memory only). Raises ``InvalidRule``/``RuleNotFound`` for a malformed
    change. Writes nothing."""
    current = policy.policy_snapshot(tenant.slug)
    proposed = policy.policy_snapshot(tenant.slug, changes)
    runs = list(
        Run.objects.filter(tenant=tenant)
        .exclude(status__in=[RunStatus.QUEUED, RunStatus.RUNNING])
        .select_related("tenant")
        .order_by("-created_at")[: min(limit, MAX_WHAT_IF_RUNS)]
    )
    changed: list[WhatIfChange] = []
    skipped: list[dict[str, str]] = []
    for run in runs:
        try:
            now, then = replay_run(run, current), replay_run(run, proposed)
        except ReplayUnavailable as exc:
            skipped.append({"run_id": str(run.id), "reason": exc.message})
            continue
        for before, after in zip(now.calls, then.calls, strict=True):
            if not before.after.same_as(after.after):
                changed.append(
                    WhatIfChange(
                        str(run.id),
                        run.request_id,
                        before.step,
                        before.call_id,
                        before.tool,
                        before.after,
                        after.after,
                    )
                )
    return {
        "policy_version": current.version,
        "proposed": [edit.describe() for edit in proposed.edits],
        "runs_examined": len(runs) - len(skipped),
        "skipped": skipped,
        "changes": [change.to_dict() for change in changed],
    }
