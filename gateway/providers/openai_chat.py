"""OpenAI-compatible Chat Completions: OpenAI, DeepSeek, Qwen/DashScope, vLLM, Ollama, ….

Translates the gateway's messages to ``/chat/completions`` and back, streaming or not.
``reasoning_content`` (DeepSeek, vLLM, Qwen) or ``reasoning`` (some other servers) is kept as
the response's reasoning. Usage comes from ``usage`` (in the last chunk when streaming, asked
for with ``stream_options.include_usage``), with cached and reasoning tokens from its details.
"""

from __future__ import annotations

import json
from typing import Any

from gateway.messages import Message, ModelResponse, ToolSpec, Usage
from gateway.providers.calls import base_request, call_provider
from gateway.providers.clients import openai_client, stream_object
from gateway.reliability import ProviderFailure
from gateway.routes import Route
from gateway.streaming import EventSink, ToolCallAssembler, server_sent_events

FINISH_REASONS = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "content_filter",
}


# The adapters' one entry point: the same signature as the Anthropic adapter's, which the
# import contract keeps independent of this one (duplicates pairs them; see
# docs/architecture.md, "Repetition left on purpose").
def complete(
    route: Route,
    messages: list[Message],
    tools: list[ToolSpec],
    tool_choice: str | None,
    sink: EventSink,
) -> ModelResponse:
    client = openai_client(route)
    request = _request(route, messages, tools, tool_choice)
    assembler = ToolCallAssembler(sink, id_prefix=f"call_{len(messages)}_")

    def send() -> ModelResponse:
        if route.stream:
            stream = client.chat.completions.create(
                **request, stream=True, stream_options={"include_usage": True}
            )
            return _read_stream(stream, assembler, sink)
        completion = client.chat.completions.create(**request)
        return _read_completion(completion, assembler, sink)

    return call_provider(send)


def _request(
    route: Route, messages: list[Message], tools: list[ToolSpec], tool_choice: str | None
) -> dict[str, Any]:
    request = base_request(route, [_message(m) for m in messages])
    if tools:
        request["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in tools
        ]
        if tool_choice:
            request["tool_choice"] = (
                tool_choice
                if tool_choice in ("auto", "none", "required")
                else {"type": "function", "function": {"name": tool_choice}}
            )
    if route.max_tokens:
        request["max_tokens"] = route.max_tokens
    return request


def _message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if message.role == "assistant":
        item: dict[str, Any] = {"role": "assistant", "content": message.content or None}
        if message.tool_calls:
            item["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": call.raw_arguments or json.dumps(call.arguments or {}),
                    },
                }
                for call in message.tool_calls
            ]
        return item
    if message.images:
        parts: list[dict[str, Any]] = [{"type": "text", "text": message.content}]
        parts += [{"type": "image_url", "image_url": {"url": url}} for url in message.images]
        return {"role": message.role, "content": parts}
    return {"role": message.role, "content": message.content}


def _read_completion(
    completion: Any, assembler: ToolCallAssembler, sink: EventSink
) -> ModelResponse:
    if not getattr(completion, "choices", None):
        raise ProviderFailure("bad_response", "the response has no choices")
    choice = completion.choices[0]
    message = choice.message
    reasoning = _reasoning(message)
    sink.reasoning(reasoning)
    sink.text(message.content or "")
    for position, call in enumerate(message.tool_calls or ()):
        function = getattr(call, "function", None)
        assembler.add(
            position,
            id=call.id,
            name=getattr(function, "name", None),
            fragment=getattr(function, "arguments", None) or "",
        )
    return _response(
        completion.model,
        message.content or "",
        reasoning,
        choice.finish_reason,
        completion.usage,
        assembler,
    )


def _read_stream(stream: Any, assembler: ToolCallAssembler, sink: EventSink) -> ModelResponse:
    text: list[str] = []
    reasoning: list[str] = []
    finish: str | None = None
    usage: Any = None
    model = ""
    body = stream.response
    try:
        for _, data in server_sent_events(body.iter_lines()):
            if data.startswith("[DONE]"):
                continue  # read on to the end of the body, so the connection can be reused
            chunk = _json(data)
            if chunk.get("error"):
                raise ProviderFailure("server_error", f"error in the stream: {chunk['error']}")
            model = chunk.get("model") or model
            usage = chunk.get("usage") or usage
            for choice in chunk.get("choices") or ():
                if choice.get("index", 0) != 0:
                    continue
                _read_delta(choice.get("delta") or {}, text, reasoning, assembler, sink)
                finish = choice.get("finish_reason") or finish
    finally:
        body.close()
    if finish is None:
        raise ProviderFailure("stream_broken", "the stream ended before the model finished")
    return _response(model, "".join(text), "".join(reasoning), finish, usage, assembler)


def _read_delta(
    delta: dict[str, Any],
    text: list[str],
    reasoning: list[str],
    assembler: ToolCallAssembler,
    sink: EventSink,
) -> None:
    piece = _reasoning(delta)
    if piece:
        reasoning.append(piece)
        sink.reasoning(piece)
    content = delta.get("content")
    if isinstance(content, str) and content:
        text.append(content)
        sink.text(content)
    for position, call in enumerate(delta.get("tool_calls") or ()):
        function = call.get("function") or {}
        index = call.get("index")
        assembler.add(
            index if isinstance(index, int) else position,
            id=call.get("id"),
            name=function.get("name"),
            fragment=function.get("arguments") or "",
        )


def _json(data: str) -> dict[str, Any]:
    return stream_object(data, "stream chunk")


def _response(
    model: str,
    text: str,
    reasoning: str,
    finish: str | None,
    usage: Any,
    assembler: ToolCallAssembler,
) -> ModelResponse:
    finish_reason = FINISH_REASONS.get(finish or "", "unknown")
    return ModelResponse(
        text=text,
        tool_calls=assembler.finish(truncated=finish_reason == "length"),
        finish_reason=finish_reason,
        usage=_usage(usage),
        model=model or "",
        reasoning=reasoning or None,
        provider_finish_reason=finish or "",
    )


def _reasoning(message: Any) -> str:
    value = _get(message, "reasoning_content") or _get(message, "reasoning")
    return value if isinstance(value, str) else ""


def _usage(usage: Any) -> Usage:
    """Usage from a typed SDK object (plain responses) or a dict (streamed chunks)."""
    if usage is None:
        return Usage(estimated=True)
    cached = _get(_get(usage, "prompt_tokens_details"), "cached_tokens")
    if cached is None:
        cached = _get(usage, "prompt_cache_hit_tokens")  # DeepSeek
    return Usage(
        prompt_tokens=_get(usage, "prompt_tokens") or 0,
        completion_tokens=_get(usage, "completion_tokens") or 0,
        reasoning_tokens=_get(_get(usage, "completion_tokens_details"), "reasoning_tokens") or 0,
        cached_tokens=cached or 0,
    )


def _get(value: Any, name: str) -> Any:
    if isinstance(value, dict):
        return value.get(name)
    return getattr(value, name, None)
