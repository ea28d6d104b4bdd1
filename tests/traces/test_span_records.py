"""The typed record of each span kind, without a run: any record survives being stored (as
JSON) and read back, and attributes shaped like rows stored before the records existed still
read, unchanged. The stored names are a contract: renaming a record's field fails here."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from traces import span_records as records

RECORDS = (
    records.AgentSession,
    records.ModelCall,
    records.ToolCallSpan,
    records.PolicyCheck,
    records.HonestyCheck,
    records.ApprovalDecision,
    records.ActionResponse,
)

text = st.text(max_size=12)
scalars = st.none() | st.booleans() | st.integers() | text
json_values = st.recursive(
    scalars | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=6,
)
# PolicyCheck keeps what it does not own in ``extra``; "approval" is an old name it renames.
POLICY_CHECK_KEYS = {f.name for f in fields(records.PolicyCheck)} | {"approval"}
extra_keys = text.filter(lambda key: key not in POLICY_CHECK_KEYS)

# A strategy per field annotation (the modules say ``from __future__ import annotations``).
_BY_TYPE: dict[str, st.SearchStrategy[Any]] = {
    "str": text,
    "bool": st.booleans(),
    "int | None": st.none() | st.integers(),
    "bool | None": st.none() | st.booleans(),
    "str | None": st.none() | text,
    "float | None": st.none() | st.floats(allow_nan=False, allow_infinity=False),
    "list[str] | None": st.none() | st.lists(text, max_size=3),
    "list[Any] | None": st.none() | st.lists(json_values, max_size=3),
    "list[dict[str, Any]] | None": st.none() | st.lists(st.dictionaries(text, json_values)),
    "list[dict[str, Any]]": st.lists(st.dictionaries(text, json_values), max_size=3),
    "dict[str, int] | None": st.none() | st.dictionaries(text, st.integers(), max_size=3),
    "dict[str, Any] | None": st.none() | st.dictionaries(text, json_values, max_size=3),
    "str | list[str]": text | st.lists(text, min_size=1, max_size=3),
    "dict[str, Any]": st.dictionaries(extra_keys, json_values, max_size=3),
}


def records_of(cls: type) -> st.SearchStrategy[Any]:
    hints = {f.name: str(f.type) for f in fields(cls)}
    return st.builds(cls, **{name: _BY_TYPE[hint] for name, hint in hints.items()})


def stored(attributes: dict[str, Any]) -> dict[str, Any]:
    """What a JSON column gives back."""
    return json.loads(json.dumps(attributes))


@given(st.sampled_from(RECORDS).flatmap(records_of))
def test_any_record_reads_back_as_it_was_written(record):
    assert type(record).from_attributes(stored(record.attributes())) == record


KINDS = {
    "agent_session": records.AgentSession,
    "model_call": records.ModelCall,
    "tool_call": records.ToolCallSpan,
    "approval": records.ApprovalDecision,
    "action_response": records.ActionResponse,
}


@given(
    st.sampled_from(sorted(KINDS)).flatmap(lambda k: st.tuples(st.just(k), records_of(KINDS[k])))
)
def test_a_stored_span_is_read_as_the_record_of_its_kind(kind_and_record):
    kind, record = kind_and_record
    assert records.record_of(kind, stored(record.attributes())) == record


@given(
    records_of(records.PolicyCheck).filter(lambda c: c.check != "honesty"),
    records_of(records.HonestyCheck),
)
def test_a_policy_check_is_read_as_a_decision_or_as_the_honesty_guard(decision, honesty):
    assert records.record_of("policy_check", stored(decision.attributes())) == decision
    assert records.record_of("policy_check", stored(honesty.attributes())) == honesty


def test_a_kind_no_record_describes_reads_as_none():
    assert records.record_of("callback", {"url": "https://example.org"}) is None


# Attributes as the engine stored them before the records (copied from a run's spans): they
# read as the record's fields and are written back exactly as they are.
OLD_ROWS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "agent_session",
        {
            "agent": "ticket-assistant",
            "user_id": "bob",
            "tenant": "acme",
            "run_id": "0f3c8a0e-5a4e-4c55-9a7e-2f1c8b1d9e00",
            "resumed": False,
            "driver": "sync:4f2a",
            "status": "succeeded",
            "outcome": "corrected",
            "outcome_counts": {"refused": 1, "corrected": 1},
            "steps": 4,
            "prompt_tokens": 1204,
            "completion_tokens": 88,
        },
        {"resumed": False, "prompt_tokens": 1204, "outcome_counts": {"refused": 1, "corrected": 1}},
    ),
    (
        "agent_session",
        {
            "agent": "escalator",
            "user_id": "alice",
            "tenant": "acme",
            "run_id": "0f3c8a0e-5a4e-4c55-9a7e-2f1c8b1d9e01",
            "resumed": False,
            "driver": "sync:4f2a",
            "status": "awaiting_approval",
            "steps": 1,
            "waiting_for": ["call_1_1"],
        },
        {"waiting_for": ["call_1_1"], "status": "awaiting_approval"},
    ),
    (
        "model_call",
        {
            "step": 1,
            "context_tokens": 402,
            "context_full_tokens": 402,
            "context_saved_tokens": 0,
            "context_method": "none",
            "route": "scripted:demo",
            "model": "demo",
            "finish_reason": "tool_calls",
            "prompt_tokens": 402,
            "completion_tokens": 17,
            "tool_calls": ["get_ticket"],
            "attempts": [{"route": "scripted:demo", "ok": True}],
            "cost_usd": None,
            "charged_usd": 0.0,
        },
        {"route": "scripted:demo", "prompt_tokens": 402, "tool_calls": ["get_ticket"]},
    ),
    (
        "model_call",
        {
            "step": 2,
            "error_code": "provider_unavailable",
            "error": "every route failed",
            "attempts": [{"route": "openai:gpt-4o", "error": "503"}],
        },
        {"error_code": "provider_unavailable", "error": "every route failed"},
    ),
    (
        "model_call",
        {"plan": True, "revision": False, "plan_steps": ["read", "answer"], "plan_truncated": True},
        {"plan": True, "plan_steps": ["read", "answer"]},
    ),
    (
        "tool_call",
        {
            "call_id": "call_3_1",
            "tool": "always_fails",
            "duration_ms": 0.42,
            "idempotency_key": "9c1e",
            "attempts": 1,
            "replayed": False,
            "result_digest": False,
            "error_code": "tool_failed",
        },
        {"tool": "always_fails", "error_code": "tool_failed", "attempts": 1},
    ),
    (
        "tool_call",
        {"call_id": "call_2_1", "tool": "get_ticket", "last_resort": True},
        {"last_resort": True, "duration_ms": None},
    ),
    (
        "policy_check",
        {
            "call_id": "call_1_1",
            "tool": "update_ticket",
            "check": "call_rule",
            "refused": False,
            "held": True,
            "rule": "default-escalation-approval",
            "reason": "escalations need a human",
            "policy_version": 3,
            "arguments_sha256": "ab12",
            "expires_at": "2026-12-01T23:00:00+00:00",
        },
        {
            "held": True,
            "rule_name": "default-escalation-approval",
            "extra": {"arguments_sha256": "ab12", "expires_at": "2026-12-01T23:00:00+00:00"},
        },
    ),
    (
        "policy_check",
        {
            "call_id": "call_1_1",
            "tool": "send_external_email",
            "check": "acl",
            "refused": True,
            "allowed": False,
            "rule": ["bob", "acme", "send_external_email", "deny"],
            "error": {"code": "tool_not_allowed", "message": "not allowed"},
        },
        {"rule_name": "bob, acme, send_external_email, deny", "refused": True},
    ),
    (
        "policy_check",
        {
            "check": "honesty",
            "original_answer": "I assigned the ticket.",
            "replaced_answer": "The tool always_fails failed (tool_failed).",
            "failures": [{"call_id": "call_3_1", "tool": "always_fails"}],
            "contradictions": [],
        },
        {"original_answer": "I assigned the ticket."},
    ),
    (
        "approval",
        {
            "call_id": "call_1_1",
            "tool": "update_ticket",
            "decision": "approved",
            "decided_by": "admin",
            "comment": "",
            "rule": "default-escalation-approval",
            "policy_version": 3,
            "arguments_sha256": "ab12",
            "requested_at": "2026-12-01T22:00:00+00:00",
        },
        {"decision": "approved", "decided_by": "admin", "round": None},
    ),
    (
        "approval",
        {
            "call_id": "call_1_1",
            "tool": "update_ticket",
            "decision": "denied",
            "decided_by": "olga",
            "comment": "no",
            "rule": "default-escalation-approval",
            "policy_version": 3,
            "arguments_sha256": "cd34",
            "requested_at": "2026-12-01T22:00:00+00:00",
            "round": 2,
        },
        {"round": 2, "comment": "no"},
    ),
    (
        "action_response",
        {"status": "failed", "answer": "The run stopped.", "detail": None, "stop_reason": "budget"},
        {"stop_reason": "budget", "detail": None},
    ),
]


def test_attributes_stored_before_the_records_read_as_fields_and_write_back_unchanged():
    for kind, row, expected in OLD_ROWS:
        record = records.record_of(kind, row)
        for name, value in expected.items():
            assert getattr(record, name) == value, (kind, name)
        assert record.attributes() == row, kind


def test_a_policy_check_of_an_approval_stored_as_approval_reads_as_its_decision():
    old = {
        "call_id": "call_1_1",
        "tool": "update_ticket",
        "check": "approval",
        "approval": "denied",
    }

    check = records.record_of("policy_check", old)

    assert check.decision == "denied"
    assert "approval" not in check.extra


def test_the_stored_names_are_the_records_fields_and_do_not_change():
    # Renaming a field renames what is stored: old rows would no longer read. This list is the
    # stored contract (docs/audit-and-masking.md, "Traces"); a rename must add a reading of the
    # old name instead.
    assert records.HonestyCheck().attributes()["check"] == "honesty"
    assert {cls.__name__: [f.name for f in fields(cls)] for cls in RECORDS} == {
        "AgentSession": [
            "agent", "user_id", "tenant", "run_id", "resumed", "driver", "status",
            "handed_off", "outcome", "outcome_counts", "steps", "waiting_for",
            "prompt_tokens", "completion_tokens", "stop_reason", "last_resort", "error",
        ],
        "ModelCall": [
            "step", "plan", "revision", "plan_steps", "plan_truncated", "context_tokens",
            "context_full_tokens", "context_saved_tokens", "context_method", "route", "model",
            "finish_reason", "prompt_tokens", "completion_tokens", "tool_calls", "attempts",
            "cost_usd", "normalised", "charged_usd", "error_code", "error",
        ],
        "ToolCallSpan": [
            "call_id", "tool", "duration_ms", "idempotency_key", "attempts", "replayed",
            "result_digest", "error_code", "normalised", "last_resort",
        ],
        "PolicyCheck": [
            "call_id", "tool", "check", "refused", "allowed", "held", "rule", "reason",
            "policy_version", "error", "decision", "decided_by", "extra",
        ],
        "HonestyCheck": ["original_answer", "replaced_answer", "failures", "contradictions"],
        "ApprovalDecision": [
            "call_id", "tool", "decision", "decided_by", "comment", "rule", "policy_version",
            "arguments_sha256", "requested_at", "round",
        ],
        "ActionResponse": ["status", "answer", "detail", "stop_reason"],
    }  # fmt: skip
