"""Scoring one experiment item against its recording (docs/experiments.md).

Trajectory: the calls in order by tool and canonical arguments — ``same``, ``reordered`` (the
same calls in another order) or ``diverged`` at the first step (call, counted from 1) that
differs. Outcome: status and outcome, baseline vs candidate. The verdict: ``regression`` when
the candidate ended worse (status, then outcome severity) or broke an expectation,
``improved`` when better, else ``same`` (same trajectory and answer) or ``diverged``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from jsonschema import Draft202012Validator

from experiments.models import DatasetItem, Verdict
from experiments.recorded import canonical
from experiments.recordings import calls_of, latency_ms
from harness.engine.conversation import load_run_messages
from harness.engine.outcome import SEVERITY
from harness.models import Run, RunStatus
from tools.errors import ToolErrorCode
from traces.services import unseal


def trajectory(baseline: list[dict[str, Any]], candidate: list[dict[str, Any]]) -> dict[str, Any]:
    keys_b = [(c["tool"], canonical(c["arguments"])) for c in baseline]
    keys_c = [(c["tool"], canonical(c["arguments"])) for c in candidate]
    if keys_b == keys_c:
        return {"trajectory": "same", "first_divergence": None}
    step = next(
        (i for i, (b, c) in enumerate(zip(keys_b, keys_c, strict=False)) if b != c),
        min(len(keys_b), len(keys_c)),
    )
    divergence = {
        "step": step + 1,
        "baseline": baseline[step]["tool"] if step < len(baseline) else None,
        "candidate": candidate[step]["tool"] if step < len(candidate) else None,
    }
    kind = "reordered" if sorted(keys_b) == sorted(keys_c) else "diverged"
    return {"trajectory": kind, "first_divergence": divergence}


def rank(status: str, outcome: str) -> tuple[int, int]:
    """Lower is better: a run that succeeded, then the severity of its outcome."""
    severity = len(SEVERITY) - SEVERITY.index(outcome) if outcome in SEVERITY else 0
    return (0 if status == RunStatus.SUCCEEDED else 1, severity)


def check_expectations(
    expectations: dict[str, Any], answer: str, calls: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Each expectation with ``passed``: must/must-not tool calls, and assertions on the
    answer (contains, regex, JSON Schema on the answer read as JSON)."""
    tools = {c["tool"] for c in calls}
    checks: list[dict[str, Any]] = []
    for tool in expectations.get("must_call", []):
        checks.append({"type": "must_call", "value": tool, "passed": tool in tools})
    for tool in expectations.get("must_not_call", []):
        checks.append({"type": "must_not_call", "value": tool, "passed": tool not in tools})
    for assertion in expectations.get("assertions", []):
        kind, value = assertion["type"], assertion["value"]
        if kind == "contains":
            passed = value in answer
        elif kind == "regex":
            passed = re.search(value, answer) is not None
        else:  # json_schema
            try:
                document = json.loads(answer)
            except ValueError:
                passed = False
            else:
                passed = Draft202012Validator(value).is_valid(document)
        checks.append({"type": kind, "value": value, "passed": passed})
    return checks


def tool_call_counts(calls: list[dict[str, Any]], live: tuple[str, ...] = ()) -> dict[str, int]:
    """``from_record``: calls answered from the recording; ``off_record``: calls it had no
    answer for; ``executed``: calls that reached a real handler — the live tools' (read-only,
    idempotent) only: every other tool of an experiment run is the recording
    (``experiments.recorded.recorded_registry``)."""
    off = sum(1 for c in calls if (c.get("error") or {}).get("code") == ToolErrorCode.OFF_RECORD)
    answered = [c for c in calls if c["executed"]]
    executed_live = sum(1 for c in answered if c["tool"] in live)
    return {
        "executed": executed_live,
        "from_record": len(answered) - executed_live - off,
        "off_record": off,
    }


def score_item(
    item: DatasetItem, recording: dict[str, Any], run: Run, live: tuple[str, ...] = ()
) -> dict[str, Any]:
    baseline_calls = recording.get("calls", [])
    candidate_calls = calls_of(load_run_messages(run))
    candidate_answer = (unseal(run.sealed, None) or {}).get("answer") or ""
    baseline_answer = recording.get("answer") or ""
    path = trajectory(baseline_calls, candidate_calls)
    checks = check_expectations(item.expectations or {}, candidate_answer, candidate_calls)
    before, after = rank(item.status, item.outcome), rank(run.status, run.outcome)
    answer_changed = candidate_answer != baseline_answer
    if run.status == RunStatus.FAILED and run.stop_reason == "configuration":
        verdict = Verdict.ERROR
    elif after > before or not all(check["passed"] for check in checks):
        verdict = Verdict.REGRESSION
    elif after < before:
        verdict = Verdict.IMPROVED
    elif path["trajectory"] == "same" and not answer_changed:
        verdict = Verdict.SAME
    else:
        verdict = Verdict.DIVERGED
    return {
        "verdict": str(verdict),
        "trajectory": path["trajectory"],
        "first_divergence": path["first_divergence"],
        "answer": {"baseline": item.answer, "candidate": run.answer, "changed": answer_changed},
        "outcome": {
            "baseline": {"status": item.status, "outcome": item.outcome},
            "candidate": {"status": run.status, "outcome": run.outcome},
        },
        "tool_calls": tool_call_counts(candidate_calls, live),
        "assertions": checks,
        "tokens": {
            "baseline": item.prompt_tokens + item.completion_tokens,
            "candidate": run.prompt_tokens + run.completion_tokens,
        },
        "cost_usd": {"baseline": float(item.cost_usd), "candidate": float(run.cost_usd)},
        "latency_ms": {"baseline": item.latency_ms, "candidate": latency_ms(run)},
        "steps": {"baseline": item.steps, "candidate": run.steps},
        "calls": {
            "baseline": [_brief(c) for c in baseline_calls],
            "candidate": [_brief(c) for c in candidate_calls],
        },
        "model_route": run.model_route,
    }


def _brief(call: dict[str, Any]) -> dict[str, Any]:
    """A call as the summary lists it: step, tool, how it ended (no arguments or results:
    these are clear data here; the console shows the runs' masked ones)."""
    return {
        "step": call["step"],
        "tool": call["tool"],
        "error": (call.get("error") or {}).get("code"),
    }
