"""Who made or ran what: datasets made and changed, experiments started and cancelled.

Each dataset and each experiment has a chain of audit records of its own (kind
``admin_action``, keyed ``dataset-…`` / ``experiment-…`` where a run's request id would be),
linked into the tenant's chain at every record, like a run that pauses — so editing or deleting
one is caught by ``verify_audit``, and retention deletes them with the runs of their time.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction

from traces.services import AuditKind, RunChain, anchor_run, insert_records

NO_SPAN = "0" * 16


def audit_key(kind: str, subject_id: uuid.UUID | str) -> str:
    """The chain's key (32 characters, as a request id): ``dataset-`` or ``experiment-`` and
    the start of the subject's id."""
    prefix = f"{kind}-"
    return prefix + uuid.UUID(str(subject_id)).hex[: 32 - len(prefix)]


def record_action(
    tenant: str, kind: str, subject_id: uuid.UUID | str, actor: str, action: str, **details: Any
) -> None:
    """Append ``{"action", "actor", kind: id, **details}`` to the subject's chain and link it
    into the tenant's chain, in the caller's transaction (rolled back with the change)."""
    key = audit_key(kind, subject_id)
    chain = RunChain(key, tenant)
    payload = {"action": action, "actor": actor, kind: str(subject_id), **details}
    with transaction.atomic():
        insert_records([chain.link(NO_SPAN, AuditKind.ADMIN_ACTION, payload)])
        anchor_run(key, tenant, chain.head)
