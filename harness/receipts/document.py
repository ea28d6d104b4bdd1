"""What a run receipt says, built from the run's own audit chain, approvals and row.

Every decision in a receipt is read from the run's chained audit records (``policy_decision``,
``tool_io``, ``model_request``), so a receipt cannot say what the chain does not. Values are
the masked ones the trace stores, and arguments, results, input and answer appear only as
SHA-256 digests of their stored (masked) form: a receipt holds no personal data in clear.

``fields`` maps the JSON pointer of every value in ``receipt`` to a digest of (pointer,
value), signed with the rest: a verifier whose signature check fails can name the field that
was changed.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

import rfc8785
from django.utils import timezone

from harness.errors import ReceiptUnavailable
from harness.models import Run
from harness.receipts.signing import sign
from policy import services as policy
from traces.queries import get_run_link, list_audit_records
from traces.services import AuditKind, canonical_json

FORMAT = "harness-receipt/1"


def issue_receipt(run: Run) -> dict[str, Any]:
    """The signed receipt of an ended run. Raises ``ReceiptUnavailable`` (409) for a run still
    going or one with no audit record."""
    if not run.is_terminal:
        raise ReceiptUnavailable(str(run.id), f"the run is {run.status}; it has not ended")
    records = list_audit_records(run.request_id)
    if not records:
        raise ReceiptUnavailable(str(run.id), "the run has no audit record")
    receipt = {
        "format": FORMAT,
        "issued_at": _time(timezone.now()),
        "run": _run(run),
        "input_sha256": _sha256_text(run.input),
        "answer_sha256": _sha256_text(run.answer),
        "model_routes": _model_routes(records),
        "tool_calls": _tool_calls(records),
        "approvals": _approvals(run),
        "chain": _chain(run, records),
    }
    return sign({"receipt": receipt, "fields": field_digests(receipt)})


def field_digests(receipt: dict[str, Any]) -> dict[str, str]:
    """``{pointer: sha256(JCS([pointer, value]))[:32]}`` for every leaf of ``receipt`` (an
    empty object or list is a leaf), pointers rooted at ``/receipt``."""
    return {
        pointer: hashlib.sha256(rfc8785.dumps([pointer, value])).hexdigest()[:32]
        for pointer, value in _leaves(receipt, "/receipt")
    }


def _leaves(value: Any, pointer: str) -> list[tuple[str, Any]]:
    if isinstance(value, dict) and value:
        return [
            leaf
            for key, item in value.items()
            for leaf in _leaves(item, f"{pointer}/{key.replace('~', '~0').replace('/', '~1')}")
        ]
    if isinstance(value, list) and value:
        return [leaf for i, item in enumerate(value) for leaf in _leaves(item, f"{pointer}/{i}")]
    return [(pointer, value)]


def _run(run: Run) -> dict[str, Any]:
    return {
        "id": str(run.id),
        "request_id": run.request_id,
        "tenant": run.tenant.slug,
        "agent": run.agent,
        "user": run.user_id,
        "status": run.status,
        "outcome": run.outcome,
        "outcome_counts": dict(run.outcome_counts or {}),
        "created_at": _time(run.created_at),
        "finished_at": _time(run.finished_at) if run.finished_at else None,
    }


def _model_routes(records: list[Any]) -> list[str]:
    routes = [
        record.payload.get("route")
        for record in records
        if record.kind == AuditKind.MODEL_REQUEST and isinstance(record.payload, dict)
    ]
    return list(dict.fromkeys(route for route in routes if isinstance(route, str)))


def _tool_calls(records: list[Any]) -> list[dict[str, Any]]:
    """One entry per tool call, in the order the chain first names it: each policy decision
    (check, verdict, rule, policy version) and, if it ran, digests of its arguments and result
    as recorded."""
    calls: dict[str, dict[str, Any]] = {}
    for record in records:
        payload = record.payload if isinstance(record.payload, dict) else {}
        call_id = payload.get("call_id")
        if record.kind not in (AuditKind.POLICY_DECISION, AuditKind.TOOL_IO) or not call_id:
            continue
        call = calls.setdefault(
            str(call_id),
            {"call_id": str(call_id), "tool": str(payload.get("tool", "")), "decisions": []},
        )
        if record.kind == AuditKind.POLICY_DECISION:
            call["decisions"].append(_decision(payload))
            call["verdict"] = call["decisions"][-1]["verdict"]
        else:
            call["verdict"] = "executed" if payload.get("status") == "ok" else "failed"
            call["arguments_sha256"] = _sha256_json(payload.get("arguments"))
            outcome = (
                payload.get("result") if payload.get("status") == "ok" else payload.get("error")
            )
            call["result_sha256"] = _sha256_json(outcome)
    return list(calls.values())


def _decision(check: dict[str, Any]) -> dict[str, Any]:
    if check.get("refused"):
        verdict = "refused"
    elif check.get("held"):
        verdict = "held"
    else:
        verdict = str(check.get("decision") or "allowed")
    rule = check.get("rule", "")
    return {
        "check": str(check.get("check", "")),
        "verdict": verdict,
        "rule": ", ".join(map(str, rule)) if isinstance(rule, list) else str(rule or ""),
        "policy_version": check.get("policy_version"),
    }


def _approvals(run: Run) -> list[dict[str, Any]]:
    """Who decided each held call, when, and what they changed (the JSON pointers of the
    arguments they edited, and digests of the arguments before and after)."""
    return [
        {
            "call_id": approval.call_id,
            "tool": approval.tool,
            "round": approval.round,
            "rule": approval.rule,
            "policy_version": approval.policy_version,
            "status": approval.status,
            "decided_by": approval.decided_by or None,
            "decided_at": _time(approval.decided_at) if approval.decided_at else None,
            "arguments_sha256": approval.arguments_sha256,
            "edited_arguments_sha256": approval.edited_arguments_sha256 or None,
            "edited_fields": _changed_pointers(approval.arguments, approval.edited_arguments)
            if approval.edited_arguments is not None
            else [],
        }
        for approval in policy.list_approvals(run.tenant.slug, str(run.id))
    ]


def _changed_pointers(before: Any, after: Any, pointer: str = "") -> list[str]:
    if isinstance(before, dict) and isinstance(after, dict):
        changed = []
        for key in sorted(set(before) | set(after)):
            escaped = str(key).replace("~", "~0").replace("/", "~1")
            changed += _changed_pointers(before.get(key), after.get(key), f"{pointer}/{escaped}")
        return changed
    return [] if before == after else [pointer or "/"]


def _chain(run: Run, records: list[Any]) -> dict[str, Any]:
    head = records[-1]
    link = get_run_link(run.request_id)
    return {
        "head": {"sequence": head.sequence, "hash": head.hash},
        "tenant_link": None
        if link is None
        else {
            "sequence": link.sequence,
            "prev_hash": link.prev_hash,
            "run_sequence": link.run_sequence,
            "run_hash": link.run_hash,
            "created_at": link.created_at.isoformat(),
            "final": link.final,
            "hash": link.hash,
        },
    }


def _time(moment: datetime) -> str:
    return moment.isoformat()


def _sha256_text(text: str) -> str:
    return hashlib.sha256((text or "").encode()).hexdigest()


def _sha256_json(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()
