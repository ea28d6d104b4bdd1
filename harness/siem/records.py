"""The SIEM record: one JSON object per event, shaped like OCSF (docs/siem.md).

Every record has ``class_uid``/``class_name`` (the OCSF class), ``activity``, ``time`` (ISO 8601,
UTC) and ``time_ms``, ``actor``, ``resource``, ``outcome`` (``success``, ``failure`` or
``unknown``), ``data`` (what was stored, masked as stored), ``chain`` (for hash-chained rows:
what their hash covers and the hash, so the SIEM copy can be checked against the chain) and
``metadata`` (the stream, the row's id — the order a sink receives — and the schema version).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from harness.siem.models import SecurityEvent
from traces.span_records import ApprovalDecision

SCHEMA_VERSION = "harness.siem/1"

# OCSF 1.x classes this schema borrows the numbers and names of.
API_ACTIVITY = (6003, "API Activity")
AUTHORIZE = (3003, "Authorize Session")
ENTITY_MANAGEMENT = (3004, "Entity Management")
AUTHENTICATION = (3002, "Authentication")
ACCOUNT_CHANGE = (3001, "Account Change")

_AUDIT_CLASSES = {"policy_decision": AUTHORIZE}


def _time(value: datetime) -> dict[str, Any]:
    return {"time": value.isoformat(), "time_ms": int(value.timestamp() * 1000)}


def _record(
    cls: tuple[int, str],
    activity: str,
    when: datetime,
    *,
    stream: str,
    position: int,
    actor: dict[str, Any],
    resource: dict[str, Any],
    outcome: str,
    data: Any,
    chain: dict[str, Any] | None,
) -> dict[str, Any]:
    return {
        "class_uid": cls[0],
        "class_name": cls[1],
        "activity": activity,
        **_time(when),
        "actor": actor,
        "resource": resource,
        "outcome": outcome,
        "data": data,
        "chain": chain,
        "metadata": {"schema": SCHEMA_VERSION, "product": "harness", "stream": stream,
                     "id": position},
    }  # fmt: skip


def audit_record(row: Any) -> dict[str, Any]:
    """A ``traces`` audit record: what the model saw and answered, what a tool did, each
    policy decision. ``chain`` holds exactly what its hash covers."""
    payload = row.payload
    kind = row.kind
    outcome = "unknown"
    if kind == "policy_decision" and isinstance(payload, dict):
        outcome = "failure" if payload.get("refused") else "success"
    elif kind == "tool_io" and isinstance(payload, dict):
        outcome = "failure" if payload.get("error") else "success"
    return _record(
        _AUDIT_CLASSES.get(kind, API_ACTIVITY),
        kind,
        row.created_at,
        stream="audit",
        position=row.id,
        actor={"tenant": row.tenant, "user": _user_of(payload)},
        resource={"type": "run", "uid": row.request_id, "span_id": row.span_id,
                  "name": _tool_of(payload)},
        outcome=outcome,
        data=payload,
        chain={
            "tenant": row.tenant,
            "request_id": row.request_id,
            "sequence": row.sequence,
            "span_id": row.span_id,
            "kind": kind,
            "created_at": row.created_at.isoformat(),
            "prev_hash": row.prev_hash,
            "hash": row.hash,
        },
    )  # fmt: skip


def approval_record(span: Any) -> dict[str, Any]:
    """An approval span: a held call decided (approved, denied, expired) or held."""
    attributes = span.attributes or {}
    decision = ApprovalDecision.from_attributes(attributes)
    status = str(decision.decision or span.name.split(" ", 1)[0])
    outcome = {"approved": "success", "denied": "failure", "expired": "failure"}.get(
        status, "unknown"
    )
    return _record(
        AUTHORIZE,
        f"approval_{status}",
        span.started_at,
        stream="approval",
        position=span.id,
        actor={"tenant": span.tenant, "user": decision.decided_by},
        resource={"type": "run", "uid": span.request_id, "span_id": span.span_id,
                  "name": decision.tool},
        outcome=outcome,
        data={"name": span.name, "status": span.status, "attributes": attributes},
        chain=None,
    )  # fmt: skip


def policy_change_record(change: Any) -> dict[str, Any]:
    """An audited edit of a tenant's policy (who, what before and after, the version)."""
    return _record(
        ENTITY_MANAGEMENT,
        f"policy_{change.action}",
        change.created_at,
        stream="policy_change",
        position=change.id,
        actor={"tenant": change.tenant, "user": change.actor},
        resource={"type": "policy", "uid": change.tenant, "version": change.version},
        outcome="success",
        data={"rule": change.rule, "before": change.before, "after": change.after},
        chain=None,
    )


def security_event_record(event: SecurityEvent) -> dict[str, Any]:
    """An API key event or a console sign-in (``harness.siem.events``); chained."""
    cls = AUTHENTICATION if event.category == "console_login" else ACCOUNT_CHANGE
    return _record(
        cls,
        f"{event.category}_{event.activity}",
        event.created_at,
        stream="security",
        position=event.id,
        actor={"tenant": event.tenant, "user": event.actor, "ip": event.source_ip},
        resource={"type": event.category, "uid": str(event.detail.get("uid", ""))},
        outcome=event.outcome,
        data=event.detail,
        chain={"created_at": event.created_at.isoformat(), "prev_hash": event.prev_hash,
               "hash": event.hash},
    )  # fmt: skip


def _user_of(payload: Any) -> str:
    if isinstance(payload, dict):
        return str(payload.get("user") or payload.get("user_id") or "")
    return ""


def _tool_of(payload: Any) -> str:
    if isinstance(payload, dict):
        return str(payload.get("tool") or payload.get("name") or "")
    return ""
