"""The scripted model: a deterministic provider that plays responses from a JSON file.

It is what tests and the offline demo use. It is a real provider of the gateway (same
interface, same usage accounting), and it always names itself ``scripted:…``: it never poses
as a language model.

Script file: either a JSON list of responses, or an object with ``responses`` or with
``scenarios`` (each ``{"when_input_matches": regex, "responses": [...]}``, the first whose
regex matches the conversation's first user message wins; one without a regex is the
default). A response is ``{"text": "..."}`` or ``{"tool_calls": [{"name": ..., "arguments":
{...}}]}`` (arguments may also be a string, to play a model that emits malformed JSON).
The n-th model call of a conversation gets the n-th response (the caller passes ``turn``, else
the assistant messages sent are counted), so a conversation resumed in another process, or
trimmed to fit the context, continues where it stopped.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from django.conf import settings

from gateway.arguments import parse_tool_arguments
from gateway.errors import InvalidScript, ScriptNotFound
from gateway.messages import Message, ModelResponse, ToolCall, ToolSpec, Usage
from gateway.tokens import estimate_tokens

EXHAUSTED_TEXT = "[scripted model] The script has no more responses."


def resolve_script_path(name_or_path: str) -> Path:
    """``demo`` → a bundled script; anything with a slash or ``.json`` → a file path."""
    return _resolved(name_or_path, tuple(settings.HARNESS_SCRIPT_DIRS))


# Resolving walks the path's folders (a system call each) and every model call of a run asks
# again: the answer is kept while the file is there (complete() stats it each time anyway).
@lru_cache(maxsize=256)
def _resolved(name_or_path: str, script_dirs: tuple[str, ...]) -> Path:
    if "/" in name_or_path or name_or_path.endswith(".json"):
        path = Path(name_or_path).expanduser()
        if path.is_file():
            return path.resolve()
    else:
        for folder in script_dirs:
            candidate = Path(folder) / f"{name_or_path}.json"
            if candidate.is_file():
                return candidate.resolve()
    raise ScriptNotFound(
        f"No script {name_or_path!r} for the scripted model.", {"script": name_or_path}
    )


def complete(
    model: str, messages: list[Message], tools: list[ToolSpec], turn: int | None = None
) -> ModelResponse:
    path = resolve_script_path(model)
    try:
        stat = path.stat()
    except FileNotFoundError:
        _resolved.cache_clear()  # moved or removed since it was resolved: look again
        path = resolve_script_path(model)
        stat = path.stat()
    scenarios = _load_script(str(path), stat.st_mtime_ns, stat.st_size)
    first_user = next((m.content for m in messages if m.role == "user"), "")
    responses = _choose_scenario(scenarios, first_user)
    position = turn if turn is not None else sum(1 for m in messages if m.role == "assistant")
    usage = Usage(prompt_tokens=estimate_tokens(messages, tools))
    if position >= len(responses):
        usage.completion_tokens = estimate_tokens(EXHAUSTED_TEXT)
        return ModelResponse(text=EXHAUSTED_TEXT, usage=usage, model=f"scripted:{model}")
    spec = responses[position]
    calls = [_tool_call(position, index, call) for index, call in enumerate(spec["tool_calls"])]
    text = spec["text"]
    usage.completion_tokens = estimate_tokens(text) + sum(
        estimate_tokens(c.raw_arguments) for c in calls
    )
    return ModelResponse(
        text=text,
        tool_calls=calls,
        finish_reason="tool_calls" if calls else "stop",
        usage=usage,
        model=f"scripted:{model}",
    )


def _tool_call(position: int, index: int, call: dict[str, Any]) -> ToolCall:
    raw = call["arguments"]
    raw_text = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)
    arguments, error = parse_tool_arguments(raw_text)
    return ToolCall(
        id=call.get("id") or f"call_{position + 1}_{index + 1}",
        name=call["name"],
        arguments=arguments,
        index=index,
        raw_arguments=raw_text,
        parse_error=error,
    )


def _choose_scenario(
    scenarios: list[tuple[re.Pattern[str] | None, list[dict[str, Any]]]], first_user: str
) -> list[dict[str, Any]]:
    default: list[dict[str, Any]] = []
    for pattern, responses in scenarios:
        if pattern is None:
            default = default or responses
        elif pattern.search(first_user):
            return responses
    return default


@lru_cache(maxsize=64)
def _load_script(
    path: str, mtime_ns: int, size: int
) -> list[tuple[re.Pattern[str] | None, list[dict[str, Any]]]]:
    """Parse and check a script once per file version (mtime and size are the cache key)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InvalidScript(f"{path}: not readable JSON: {exc}", {"script": path}) from exc
    if isinstance(data, list):
        raw_scenarios = [{"responses": data}]
    elif isinstance(data, dict) and "scenarios" in data:
        raw_scenarios = data["scenarios"]
    elif isinstance(data, dict) and "responses" in data:
        raw_scenarios = [{"responses": data["responses"]}]
    else:
        raise InvalidScript(
            f"{path}: expected a list of responses or an object with 'responses' or 'scenarios'",
            {"script": path},
        )
    return [_check_scenario(path, i, s) for i, s in enumerate(raw_scenarios)]


def _check_scenario(
    path: str, number: int, scenario: Any
) -> tuple[re.Pattern[str] | None, list[dict[str, Any]]]:
    where = f"{path}: scenario {number}"
    if not isinstance(scenario, dict) or not isinstance(scenario.get("responses"), list):
        raise InvalidScript(f"{where}: needs a 'responses' list", {"script": path})
    pattern = scenario.get("when_input_matches")
    try:
        compiled = re.compile(pattern) if pattern else None
    except re.error as exc:
        raise InvalidScript(f"{where}: bad regex: {exc}", {"script": path}) from exc
    responses = [_check_response(where, i, r) for i, r in enumerate(scenario["responses"])]
    return compiled, responses


def _check_response(where: str, number: int, response: Any) -> dict[str, Any]:
    where = f"{where}, response {number}"
    if not isinstance(response, dict) or not ({"text", "tool_calls"} & response.keys()):
        raise InvalidScript(f"{where}: needs 'text' or 'tool_calls'", {"where": where})
    text = response.get("text", "")
    calls = response.get("tool_calls", [])
    if not isinstance(text, str) or not isinstance(calls, list):
        raise InvalidScript(f"{where}: 'text' must be a string, 'tool_calls' a list")
    for call in calls:
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise InvalidScript(f"{where}: every tool call needs a 'name'", {"where": where})
        if not isinstance(call.setdefault("arguments", {}), dict | str):
            raise InvalidScript(f"{where}: 'arguments' must be an object or a string")
    return {"text": text, "tool_calls": calls}
