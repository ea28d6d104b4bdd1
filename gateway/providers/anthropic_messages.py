"""Anthropic Messages: ``tool_use`` / ``tool_result`` blocks, the system prompt, thinking.

Tool results travel in user messages (all results of one turn in one message); thinking
blocks are kept as the response's reasoning with their signature, and sent back with it, as
Anthropic requires for tool use with extended thinking. Usage: ``input_tokens`` excludes the
cache, so the prompt count adds ``cache_read_input_tokens`` and
``cache_creation_input_tokens``; the cached count is the cache read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from gateway.messages import Message, ModelResponse, ToolSpec, Usage
from gateway.providers.calls import base_request, call_provider
from gateway.providers.clients import anthropic_client, stream_object
from gateway.reliability import ProviderFailure
from gateway.routes import Route
from gateway.streaming import EventSink, ToolCallAssembler, server_sent_events

STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}


def complete(
    route: Route,
    messages: list[Message],
    tools: list[ToolSpec],
    tool_choice: str | None,
    sink: EventSink,
) -> ModelResponse:
    client = anthropic_client(route)
    request = _request(route, messages, tools, tool_choice)
    assembler = ToolCallAssembler(sink, id_prefix=f"toolu_{len(messages)}_")

    def send() -> ModelResponse:
        if route.stream:
            return _read_stream(client.messages.create(**request, stream=True), assembler, sink)
        return _read_message(client.messages.create(**request), assembler, sink)

    return call_provider(send)


def _request(
    route: Route, messages: list[Message], tools: list[ToolSpec], tool_choice: str | None
) -> dict[str, Any]:
    system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
    request = base_request(route, _messages(messages))
    request["max_tokens"] = route.max_tokens  # required by Anthropic
    if system:
        request["system"] = system
    if tools:
        request["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in tools
        ]
        if tool_choice:
            request["tool_choice"] = {
                "auto": {"type": "auto"},
                "required": {"type": "any"},
                "none": {"type": "none"},
            }.get(tool_choice, {"type": "tool", "name": tool_choice})
    return request


def _messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Anthropic alternates user and assistant turns: consecutive blocks of a role merge."""
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return turns


def _blocks(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id,
            "content": message.content,
        }
        if message.is_error:
            block["is_error"] = True
        return [block]
    blocks: list[dict[str, Any]] = []
    if message.role == "assistant" and message.reasoning and message.reasoning_signature:
        blocks.append(
            {
                "type": "thinking",
                "thinking": message.reasoning,
                "signature": message.reasoning_signature,
            }
        )
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    blocks += [_image(url) for url in message.images]
    blocks += [
        {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments or {}}
        for c in message.tool_calls
    ]
    return blocks


def _image(url: str) -> dict[str, Any]:
    if url.startswith("data:") and ";base64," in url:
        media_type, data = url[5:].split(";base64,", 1)
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }
    return {"type": "image", "source": {"type": "url", "url": url}}


def _read_message(message: Any, assembler: ToolCallAssembler, sink: EventSink) -> ModelResponse:
    text: list[str] = []
    reasoning: list[str] = []
    signature = ""
    content = list(getattr(message, "content", None) or ())
    cut = message.stop_reason == "max_tokens"
    calls = 0
    for position, block in enumerate(content):
        if block.type == "text":
            text.append(block.text)
        elif block.type == "thinking":
            reasoning.append(block.thinking)
            signature = getattr(block, "signature", "") or signature
        elif block.type == "tool_use":
            raw = json.dumps(block.input if block.input is not None else {}, ensure_ascii=False)
            if cut and position == len(content) - 1:
                # The token limit fell inside this call: its input is whatever was parsed.
                assembler.add(calls, id=block.id, name=block.name)
                calls += 1
                continue
            assembler.add(calls, id=block.id, name=block.name, fragment=raw)
            assembler.close(calls)
            calls += 1
    sink.reasoning("".join(reasoning))
    sink.text("".join(text))
    return _response(
        message.model,
        "".join(text),
        "".join(reasoning),
        signature,
        message.stop_reason,
        _usage(message.usage, None),
        assembler,
    )


def _read_stream(stream: Any, assembler: ToolCallAssembler, sink: EventSink) -> ModelResponse:
    state = _StreamState()
    body = stream.response
    try:
        for _, data in server_sent_events(body.iter_lines()):
            state.read(_json(data), assembler, sink)
    finally:
        body.close()
    if not state.stopped or state.stop_reason is None:
        raise ProviderFailure("stream_broken", "the stream ended before message_stop")
    return _response(
        state.model,
        "".join(state.text),
        "".join(state.reasoning),
        state.signature,
        state.stop_reason,
        _usage(state.start_usage, state.delta_usage),
        assembler,
    )


@dataclass
class _StreamState:
    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    signature: str = ""
    calls: dict[int, int] = field(default_factory=dict)  # content block index → call index
    model: str = ""
    stop_reason: str | None = None
    start_usage: Any = None
    delta_usage: Any = None
    stopped: bool = False

    def read(self, event: dict[str, Any], assembler: ToolCallAssembler, sink: EventSink) -> None:
        kind = event.get("type")
        index = event.get("index", -1)
        if kind == "message_start":
            message = event.get("message") or {}
            self.model = message.get("model") or self.model
            self.start_usage = message.get("usage")
        elif kind == "content_block_start":
            block = event.get("content_block") or {}
            if block.get("type") == "tool_use":
                self.calls[index] = len(self.calls)
                assembler.add(self.calls[index], id=block.get("id"), name=block.get("name"))
        elif kind == "content_block_delta":
            self._delta(event.get("delta") or {}, index, assembler, sink)
        elif kind == "content_block_stop" and index in self.calls:
            assembler.close(self.calls[index])
        elif kind == "message_delta":
            self.stop_reason = (event.get("delta") or {}).get("stop_reason") or self.stop_reason
            self.delta_usage = event.get("usage") or self.delta_usage
        elif kind == "message_stop":
            self.stopped = True
        elif kind == "error":
            raise _stream_error(event.get("error") or {})

    def _delta(
        self, delta: dict[str, Any], index: int, assembler: ToolCallAssembler, sink: EventSink
    ) -> None:
        kind = delta.get("type")
        if kind == "text_delta":
            self.text.append(delta.get("text", ""))
            sink.text(delta.get("text", ""))
        elif kind == "thinking_delta":
            self.reasoning.append(delta.get("thinking", ""))
            sink.reasoning(delta.get("thinking", ""))
        elif kind == "signature_delta":
            self.signature += delta.get("signature", "")
        elif kind == "input_json_delta" and index in self.calls:
            assembler.add(self.calls[index], fragment=delta.get("partial_json", ""))


def _stream_error(error: dict[str, Any]) -> ProviderFailure:
    kind = str(error.get("type", ""))
    message = f"{kind}: {error.get('message', '')}"
    if kind == "rate_limit_error":
        return ProviderFailure("rate_limited", message)
    if kind in ("overloaded_error", "api_error"):
        return ProviderFailure("server_error", message)
    return ProviderFailure("rejected", message)


def _json(data: str) -> dict[str, Any]:
    return stream_object(data, "stream event")


def _response(
    model: str,
    text: str,
    reasoning: str,
    signature: str,
    stop_reason: str | None,
    usage: Usage,
    assembler: ToolCallAssembler,
) -> ModelResponse:
    finish_reason = STOP_REASONS.get(stop_reason or "", "unknown")
    return ModelResponse(
        text=text,
        tool_calls=assembler.finish(truncated=finish_reason == "length"),
        finish_reason=finish_reason,
        usage=usage,
        model=model or "",
        reasoning=reasoning or None,
        reasoning_signature=signature or None,
        provider_finish_reason=stop_reason or "",
    )


def _usage(start: Any, delta: Any) -> Usage:
    """Merge the usage of message_start with the cumulative counts of message_delta."""
    if start is None and delta is None:
        return Usage(estimated=True)

    def count(name: str) -> int:
        for source in (delta, start):
            value = source.get(name) if isinstance(source, dict) else getattr(source, name, None)
            if value is not None:
                return int(value)
        return 0

    cache_read = count("cache_read_input_tokens")
    return Usage(
        prompt_tokens=count("input_tokens") + cache_read + count("cache_creation_input_tokens"),
        completion_tokens=count("output_tokens"),
        cached_tokens=cache_read,
    )
