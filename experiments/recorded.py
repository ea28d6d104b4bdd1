"""Tools answered from a recording: the seam that makes an experiment hermetic.

An experiment run (``Run.experiment``) is driven by the real engine, with one change made
where the driver loads its configuration (``harness.engine.driver._drive``): the agent is the
candidate's, and every tool of the registry is swapped for a ``RecordedTool`` whose handler
answers from the dataset item's recording. A call whose tool and canonical arguments match a
recorded, executed call gets the recorded result (or the recorded error); any other call gets
the tool error ``off_record``. No tool file's handler (Python, HTTP or MCP) is ever reached,
whatever the policy allows: the policy, the executor (timeouts, idempotency rows), spans and
audit records run as for any call.
"""

from __future__ import annotations

import dataclasses
import json
import unicodedata
from typing import Any

from gateway.messages import Message
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


def recorded_registry(registry: ToolRegistry, recording: Recording) -> ToolRegistry:
    """The same tools (names, schemas, access, policy attributes), answered from
    ``recording``; ``http``/``mcp`` cleared so that nothing can reach a real endpoint."""
    tools = {
        name: RecordedTool(
            **{f.name: getattr(tool, f.name) for f in dataclasses.fields(ToolDefinition)}
            | {"http": None, "mcp": None},
            recording=recording,
        )
        for name, tool in registry.tools.items()
    }
    return ToolRegistry(tools=tools, warnings=registry.warnings)


# Tool errors that mean the policy (not the tool) answered: such a call was never executed.
REFUSALS = {
    ToolErrorCode.UNKNOWN_TOOL,
    ToolErrorCode.PERMISSION_DENIED,
    ToolErrorCode.INVALID_ARGUMENTS_JSON,
    ToolErrorCode.INVALID_ARGUMENTS,
    ToolErrorCode.LIMIT_EXCEEDED,
    ToolErrorCode.POLICY_REFUSED,
    ToolErrorCode.APPROVAL_DENIED,
    ToolErrorCode.TOOL_DISABLED,
}


def calls_of(messages: list[Message]) -> list[dict[str, Any]]:
    """Every call the model proposed, in order (``step`` counts calls from 1), with what
    answered it: ``executed`` when a tool (not the policy) answered."""
    results: dict[str, dict[str, Any]] = {}
    for message in messages:
        if message.role == "tool" and message.tool_call_id:
            try:
                results[message.tool_call_id] = json.loads(message.content)
            except (TypeError, ValueError):
                results[message.tool_call_id] = {"ok": False, "error": {"code": "unreadable"}}
    calls: list[dict[str, Any]] = []
    for message in messages:
        if message.role != "assistant":
            continue
        for call in message.tool_calls:
            body = results.get(call.id)
            entry: dict[str, Any] = {
                "step": len(calls) + 1,
                "tool": call.name,
                "arguments": call.arguments if call.arguments is not None else call.raw_arguments,
                "ok": bool(body and body.get("ok")),
                "executed": False,
            }
            if body is not None:
                if body.get("ok"):
                    entry |= {"result": body.get("result"), "executed": True}
                else:
                    error = body.get("error") or {}
                    entry |= {"error": error, "executed": error.get("code") not in REFUSALS}
            calls.append(entry)
    return calls
