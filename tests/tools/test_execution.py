"""Running tools in a run: timeouts, failures, retries, parallel calls kept in the model's order."""

import pytest

from tests.factories import write_tool
from tests.tools import handlers
from tools.models import ToolExecution

LABEL = {
    "type": "object",
    "properties": {"label": {"type": "string"}, "after": {"type": "string"}},
    "required": ["label"],
    "additionalProperties": False,
}


def tool(tool_dir, handler, **overrides):
    return write_tool(tool_dir, handler=f"tests.tools.handlers.{handler}", **overrides)["name"]


def test_a_hung_tool_times_out_and_the_run_goes_on(run_script, tool_dir):
    hung = tool(tool_dir, "hang", timeout_s=0.3)

    done = run_script([{"name": hung, "arguments": {}}], tools=[hung])

    assert done.run["status"] == "succeeded"
    # The scripted answer hides the failure, so the honesty guard states it first.
    assert done.run["answer"].startswith("Note: some actions in this run did not complete")
    assert done.run["answer"].endswith("Done.")
    error = done.tool_results[0]["error"]
    assert error["code"] == "timeout"
    assert error["message"] == f"{hung} did not finish within 0.3 s and was abandoned."
    [span] = done.spans("tool_call")
    assert span["status"] == "error"
    assert span["attributes"]["error_code"] == "timeout"


def test_a_handler_that_raises_gives_the_model_a_short_error_and_the_audit_the_traceback(
    run_script, tool_dir
):
    failing = tool(tool_dir, "boom")

    done = run_script([{"name": failing, "arguments": {}}], tools=[failing])

    assert done.run["status"] == "succeeded"
    error = done.tool_results[0]["error"]
    assert error == {
        "code": "tool_failed",
        "message": f"{failing} failed: RuntimeError: the ledger is locked",
        "details": {},
    }
    io = done.tool_io(failing)
    assert io["traceback"].startswith("Traceback (most recent call last)")
    assert "internal detail: ledger.py line 42" in io["traceback"]
    assert "ledger.py" not in str(done.tool_results)


def test_a_result_that_is_not_json_data_is_a_tool_failure(run_script, tool_dir):
    odd = tool(tool_dir, "not_json")

    done = run_script([{"name": odd, "arguments": {}}], tools=[odd])

    error = done.tool_results[0]["error"]
    assert error["code"] == "tool_failed"
    assert "is not JSON serializable" in error["message"]


def test_parallel_calls_finishing_out_of_order_are_appended_in_the_models_order(
    run_script, tool_dir
):
    # c finishes first, then b, then a; with serial execution a would wait for b forever.
    name = tool(tool_dir, "finish_after", parameters=LABEL)
    calls = [
        {"name": name, "arguments": {"label": "a", "after": "b"}},
        {"name": name, "arguments": {"label": "b", "after": "c"}},
        {"name": name, "arguments": {"label": "c"}},
    ]

    done = run_script(calls, tools=[name])

    assert handlers.finished == ["c", "b", "a"]
    assert [r["result"]["label"] for r in done.tool_results] == ["a", "b", "c"]
    assert [r["call_id"] for r in done.tool_results] == ["call_1_1", "call_1_2", "call_1_3"]
    spans = done.spans("tool_call")
    assert [s["attributes"]["call_id"] for s in spans] == ["call_1_1", "call_1_2", "call_1_3"]


def test_calls_that_are_not_concurrency_safe_run_one_at_a_time(run_script, tool_dir):
    unsafe = tool(tool_dir, "meet_a_partner", concurrency_safe=False, idempotent=False)

    done = run_script([{"name": unsafe, "arguments": {}}] * 2, tools=[unsafe])

    assert [r["result"] for r in done.tool_results] == [{"met": False}, {"met": False}]


def test_concurrency_safe_calls_do_run_together(run_script, tool_dir):
    safe = tool(tool_dir, "meet_a_partner")

    done = run_script([{"name": safe, "arguments": {}}] * 2, tools=[safe])

    assert [r["result"] for r in done.tool_results] == [{"met": True}, {"met": True}]


def test_an_unsafe_call_waits_for_the_safe_calls_before_it_and_holds_back_those_after(
    run_script, tool_dir
):
    safe = tool(tool_dir, "finish_after", parameters=LABEL)
    unsafe = tool(
        tool_dir, "finish_after", parameters=LABEL, concurrency_safe=False, idempotent=False
    )
    calls = [
        {"name": safe, "arguments": {"label": "a"}},
        {"name": safe, "arguments": {"label": "b"}},
        {"name": unsafe, "arguments": {"label": "write", "after": "b"}},
        {"name": safe, "arguments": {"label": "c", "after": "write"}},
    ]

    done = run_script(calls, tools=[safe, unsafe])

    assert handlers.finished.index("write") == 2
    assert handlers.finished[3] == "c"
    assert [r["result"]["label"] for r in done.tool_results] == ["a", "b", "write", "c"]


def test_parallel_calls_of_a_run_are_bounded(run_script, tool_dir, settings):
    settings.HARNESS_TOOL_PARALLELISM_PER_RUN = 2
    safe = tool(tool_dir, "count_in_flight")

    done = run_script([{"name": safe, "arguments": {}}] * 4, tools=[safe])

    assert all(r["ok"] for r in done.tool_results)
    assert handlers.max_in_flight == 2


def test_a_transient_failure_of_an_idempotent_tool_is_retried(run_script, tool_dir):
    flaky = tool(tool_dir, "flaky", idempotent=True)

    done = run_script([{"name": flaky, "arguments": {}}], tools=[flaky])

    assert done.tool_results[0]["result"] == {"attempt": 2}
    assert done.tool_io(flaky)["attempts"] == 2


def test_a_non_idempotent_tool_is_never_retried(run_script, tool_dir):
    flaky = tool(tool_dir, "flaky", idempotent=False, concurrency_safe=False)

    done = run_script([{"name": flaky, "arguments": {}}], tools=[flaky])

    assert done.tool_results[0]["error"]["code"] == "http_error"
    assert handlers.calls["flaky"] == 1
    assert done.tool_io(flaky)["attempts"] == 1


@pytest.mark.parametrize("retries", [0])
def test_retries_can_be_switched_off(run_script, tool_dir, settings, retries):
    settings.HARNESS_TOOL_MAX_RETRIES = retries
    flaky = tool(tool_dir, "flaky", idempotent=True)

    done = run_script([{"name": flaky, "arguments": {}}], tools=[flaky])

    assert done.tool_results[0]["error"]["code"] == "http_error"
    assert handlers.calls["flaky"] == 1


def test_a_call_that_finds_every_tool_worker_busy_times_out_without_running(
    run_script, tool_dir, settings
):
    settings.HARNESS_TOOL_MAX_THREADS = 1
    # Not idempotent: its execution is recorded when it starts (an idempotent one, in a run's
    # first drive, only when it ends).
    hung = tool(tool_dir, "hang", timeout_s=0.3, idempotent=False, concurrency_safe=False)

    done = run_script([{"name": hung, "arguments": {}}] * 2, tools=[hung])

    first, second = (result["error"]["message"] for result in done.tool_results)
    assert first == f"{hung} did not finish within 0.3 s and was abandoned."
    assert second == (
        f"{hung} could not start within 0.3 s: every tool worker of this process is busy."
    )
    assert handlers.calls["hang"] == 1
    keys = set(ToolExecution.objects.values_list("idempotency_key", flat=True))
    assert keys == {f"{done.run['id']}:call_1_1"}  # the call that never ran left no record
