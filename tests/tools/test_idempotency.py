"""The idempotency store: a call executed again with the same key does not act twice.

A re-execution happens when a run is resumed by another worker after a crash; the API cannot
provoke that on demand, so these tests call the executor service directly.
"""

import threading
import time

import pytest
from django.db import connection

from tests.factories import write_tool
from tests.tools import handlers
from tools.demo.models import Notification
from tools.models import ExecutionStatus, ToolExecution
from tools.services import ToolContext, execute_tool, get_tool_registry
from traces.services import seal

pytestmark = pytest.mark.usefixtures("transactional_db")


def context(call_id="call_1_1", run_id="run-1"):
    return ToolContext(
        tenant="acme",
        user_id="bob",
        run_id=run_id,
        call_id=call_id,
        idempotency_key=f"{run_id}:{call_id}",
    )


def registered(tool_dir, handler, **overrides):
    name = write_tool(tool_dir, handler=f"tests.tools.handlers.{handler}", **overrides)["name"]
    return get_tool_registry().get(name)


def test_a_call_executed_again_with_the_same_key_returns_the_stored_result(tool_dir):
    tool = registered(tool_dir, "echo", idempotent=False, concurrency_safe=False)

    first = execute_tool(tool, {"n": 1}, context())
    again = execute_tool(tool, {"n": 1}, context())

    assert handlers.calls["echo"] == 1
    assert again.result == first.result == {"echo": {"n": 1}, "idempotency_key": "run-1:call_1_1"}
    assert (first.replayed, again.replayed) == (False, True)
    record = ToolExecution.objects.get(idempotency_key="run-1:call_1_1")
    assert (record.status, record.tool, record.attempts) == ("succeeded", tool.name, 1)


def test_another_call_id_is_another_execution(tool_dir):
    tool = registered(tool_dir, "echo")

    execute_tool(tool, {}, context("call_1_1"))
    execute_tool(tool, {}, context("call_1_2"))

    assert handlers.seen_keys == ["run-1:call_1_1", "run-1:call_1_2"]


def test_a_failed_non_idempotent_call_is_not_run_again(tool_dir):
    tool = registered(tool_dir, "flaky", idempotent=False, concurrency_safe=False)

    first = execute_tool(tool, {}, context())
    again = execute_tool(tool, {}, context())

    assert handlers.calls["flaky"] == 1
    assert again.error.to_dict() == first.error.to_dict()
    assert again.replayed is True


def test_a_non_idempotent_call_whose_end_was_never_stored_is_not_run_again(tool_dir):
    # The process died after the handler acted and before the store recorded the end.
    tool = registered(tool_dir, "echo", idempotent=False, concurrency_safe=False)
    ToolExecution.objects.create(idempotency_key="run-1:call_1_1", tenant="acme", tool=tool.name)

    outcome = execute_tool(tool, {}, context())

    assert handlers.calls["echo"] == 0
    assert outcome.error.code == "outcome_unknown"
    assert "Check the current state" in outcome.error.message


def test_a_call_started_elsewhere_whose_outcome_is_stored_a_moment_later_is_read_not_unknown(
    tool_dir,
):
    # The process that ran it is alive: it kept the outcome while the database was away and
    # stores it now, as the driver that took the run over reaches the call.
    tool = registered(tool_dir, "echo", idempotent=False, concurrency_safe=False)
    record = ToolExecution.objects.create(
        idempotency_key="run-1:call_1_1", tenant="acme", tool=tool.name
    )

    def store_a_moment_later() -> None:
        time.sleep(1)
        ToolExecution.objects.filter(pk=record.pk).update(
            status=ExecutionStatus.SUCCEEDED,
            sealed_outcome=seal({"result": {"done": True}, "error": None}),
        )
        connection.close()

    storer = threading.Thread(target=store_a_moment_later)
    storer.start()
    outcome = execute_tool(tool, {}, context())
    storer.join()

    assert handlers.calls["echo"] == 0
    assert outcome.error is None
    assert (outcome.result, outcome.replayed) == ({"done": True}, True)


def test_an_idempotent_call_whose_end_was_never_stored_runs_again_with_the_same_key():
    notify = get_tool_registry().get("notify_user")
    arguments = {"user_id": "agent-li", "message": "Please look at T-20250318-007."}
    first = execute_tool(notify, arguments, context())
    # Simulate a crash between the handler's effect and the store write.
    ToolExecution.objects.filter(idempotency_key="run-1:call_1_1").update(
        status=ExecutionStatus.STARTED, sealed_outcome=""
    )

    again = execute_tool(notify, arguments, context())

    assert again.replayed is False
    assert again.result == first.result | {"duplicate": True}
    assert Notification.objects.count() == 1
    record = ToolExecution.objects.get(idempotency_key="run-1:call_1_1")
    assert (record.status, record.attempts) == ("succeeded", 2)


def test_a_timed_out_calls_late_result_is_stored_for_a_re_execution(tool_dir):
    tool = registered(tool_dir, "hang", timeout_s=0.2, idempotent=False)

    timed_out = execute_tool(tool, {}, context())
    handlers.release.set()
    record = ToolExecution.objects.get(idempotency_key="run-1:call_1_1")
    for _ in range(200):  # the abandoned thread stores its result once released
        record.refresh_from_db()
        if record.status != ExecutionStatus.STARTED:
            break
        handlers.release.wait(0.05)
    again = execute_tool(tool, {}, context())

    assert timed_out.error.code == "timeout"
    assert record.status == "succeeded"
    assert again.result == {"released": True}
    assert handlers.calls["hang"] == 1


@pytest.mark.parametrize("idempotent", [True, False])
def test_a_first_execution_records_an_idempotent_call_with_its_outcome_only(tool_dir, idempotent):
    from tools.services import PlannedCall, execute_tool_calls, store_outcome

    tool = registered(tool_dir, "note_if_recorded", idempotent=idempotent)
    call = PlannedCall(tool, {}, context())

    [outcome] = execute_tool_calls([call], first_execution=True)

    # Not idempotent: recorded as started before it runs, so a takeover never runs it twice.
    assert handlers.recorded_when_run == [not idempotent]
    record = ToolExecution.objects.get(idempotency_key="run-1:call_1_1")
    assert (record.status, record.tool, record.attempts) == ("succeeded", tool.name, 1)
    assert record.started_at <= record.finished_at
    # Storing it again (a late result racing the step) leaves the one row.
    store_outcome(call, 0, outcome)
    assert ToolExecution.objects.filter(idempotency_key="run-1:call_1_1").count() == 1


def test_a_later_execution_of_a_first_executions_key_replays_its_outcome(tool_dir):
    from tools.services import PlannedCall, execute_tool_calls

    tool = registered(tool_dir, "note_if_recorded", idempotent=True)
    execute_tool_calls([PlannedCall(tool, {}, context())], first_execution=True)

    [again] = execute_tool_calls([PlannedCall(tool, {}, context())])

    assert handlers.recorded_when_run == [False]  # not run again
    assert again.replayed is True


def test_an_outcome_stored_before_outcomes_were_normalised_is_normalised_when_replayed(tool_dir):
    from traces.services import seal

    tool = registered(tool_dir, "echo", idempotent=False, concurrency_safe=False)
    ToolExecution.objects.create(
        idempotency_key="run-1:call_1_1",
        tenant="acme",
        tool=tool.name,
        status=ExecutionStatus.SUCCEEDED,
        sealed_outcome=seal({"result": {"score": float("nan"), "note": "a\x00b"}, "error": None}),
        attempts=1,
    )

    again = execute_tool(tool, {}, context())

    assert again.replayed
    assert again.result == {"score": "NaN", "note": "a\ufffdb"}
    assert again.normalised == ["non_finite", "nul"]
    assert "echo" not in handlers.calls
