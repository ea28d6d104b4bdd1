"""Tools answered from a recording: the seam that makes an experiment hermetic.

An experiment run (``Run.experiment``) is driven by the real engine, with one change made
where the driver loads its configuration (``harness.engine.experiment_seam``, registered by
``ExperimentsConfig.ready``): the agent is the candidate's, the policy is the proposed one if
the candidate has a policy change, and every tool of the registry is swapped for a
``RecordedTool`` whose handler answers from the dataset item's recording. A call whose tool and
canonical arguments match a recorded, executed call gets the recorded result (or the recorded
error); any other call gets the tool error ``off_record``. No tool file's handler (Python, HTTP
or MCP) is reached, whatever the policy allows — except the tools the experiment was allowed to
run live (declared read-only and idempotent, ``experiments.candidate.live_tools``): the policy,
the executor (timeouts, idempotency rows), spans and audit records run as for any call.
"""

from __future__ import annotations

import dataclasses
import json
import unicodedata
from typing import Any

from experiments.errors import ExperimentError, ExperimentErrorCode
from harness.agent_registry import AgentSpec
from harness.engine.tool_calls import DrivePolicy
from harness.models import Run
from tools.context import ToolContext
from tools.errors import ToolErrorCode, ToolHandlerError
from tools.registry import ToolDefinition, ToolRegistry


def canonical(value: Any) -> str:
    """The canonical JSON of a call's arguments: keys sorted, no spaces, strings in NFC,
    integral floats as integers (``1.0`` is ``1``) — the key calls are matched by."""
    return json.dumps(_normalised(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _normalised(value: Any) -> Any:
    if isinstance(value, dict):
        return {unicodedata.normalize("NFC", str(k)): _normalised(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_normalised(v) for v in value]
    if isinstance(value, str):
        return unicodedata.normalize("NFC", value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


class Recording:
    """The executed calls of a recorded run, by (tool, canonical arguments). The first
    recorded answer of a key is given to every call with that key: a tool's result is taken
    to depend only on its arguments (the limit of hermetic replay)."""

    def __init__(self, calls: list[dict[str, Any]]) -> None:
        self.answers: dict[tuple[str, str], dict[str, Any]] = {}
        for call in calls:
            if call.get("executed"):
                self.answers.setdefault((call["tool"], canonical(call["arguments"])), call)

    def answer(self, tool: str, arguments: dict[str, Any]) -> Any:
        recorded = self.answers.get((tool, canonical(arguments)))
        if recorded is None:
            raise ToolHandlerError(
                ToolErrorCode.OFF_RECORD,
                f"{tool} was not called with these arguments in the recorded run: an "
                "experiment answers tools only from the recording, and nothing was executed.",
                {"tool": tool, "arguments": arguments},
            )
        if recorded.get("ok"):
            return recorded.get("result")
        error = recorded.get("error") or {}
        try:
            code = ToolErrorCode(error.get("code"))
        except ValueError:
            code = ToolErrorCode.TOOL_FAILED
        raise ToolHandlerError(code, str(error.get("message", "")), error.get("details") or {})


@dataclasses.dataclass(frozen=True)
class RecordedTool(ToolDefinition):
    """A tool definition whose handler is the recording (its file's handler never runs)."""

    recording: Recording | None = None

    @property
    def handler(self) -> Any:
        recording, name = self.recording, self.name

        def answer(arguments: dict[str, Any], context: ToolContext) -> Any:
            assert recording is not None
            return recording.answer(name, arguments)

        return answer


def recorded_registry(
    registry: ToolRegistry, recording: Recording, live: tuple[str, ...] = ()
) -> ToolRegistry:
    """``registry`` with every tool answered by ``recording``, but the ``live`` ones (checked
    read-only and idempotent when the experiment started, checked again here)."""
    tools = {
        name: tool
        if name in live and tool.read_only and tool.idempotent
        else RecordedTool(
            **{f.name: getattr(tool, f.name) for f in dataclasses.fields(ToolDefinition)}
            | {"http": None, "mcp": None},
            recording=recording,
        )
        for name, tool in registry.tools.items()
    }
    return ToolRegistry(tools=tools, warnings=registry.warnings)


# Run id -> (experiment, recorded calls), handed over by ``experiments.services`` to the drive
# it starts next in this process: the item and its recording are already in memory.
_handed: dict[str, tuple[Any, list[dict[str, Any]]]] = {}


def hand_over(run_id: str, experiment: Any, calls: list[dict[str, Any]]) -> None:
    _handed[run_id] = (experiment, calls)


def take_back(run_id: str) -> None:
    """Forget what the drive did not take (it never started)."""
    _handed.pop(run_id, None)


def experiment_setup(
    run: Run, agent: AgentSpec, registry: ToolRegistry, policy: DrivePolicy
) -> tuple[AgentSpec, ToolRegistry, DrivePolicy]:
    """The candidate's agent, the recorded (or live) tools and, for a proposed policy change,
    the changed policy of an experiment run (``harness.engine.experiment_seam``)."""
    from experiments.candidate import candidate_agent
    from experiments.models import ExperimentItem
    from experiments.proposed_policy import ProposedDrivePolicy
    from experiments.recordings import recording_of

    handed = _handed.pop(str(run.id), None)
    if handed is not None:  # this process created the run for its item: nothing to read
        experiment, calls = handed
    else:  # driven elsewhere (a worker took the run over): its item says what to answer
        item = ExperimentItem.objects.select_related("experiment", "item").filter(run=run).first()
        if item is None:  # never run tools for real: the run fails as misconfigured
            raise ExperimentError(
                ExperimentErrorCode.EXPERIMENT_RUN_UNLINKED,
                f"Experiment run {run.id} has no experiment item: no recording to answer from.",
            )
        experiment, calls = item.experiment, recording_of(item.item).get("calls", [])
    recording = Recording(calls)
    changes = experiment.candidate.get("policy_changes")
    return (
        candidate_agent(agent, experiment.candidate),
        recorded_registry(registry, recording, tuple(experiment.live_tools)),
        ProposedDrivePolicy.over(policy, changes) if changes else policy,
    )
