"""Local HTTP servers speaking the providers' wire formats, for tests and the bench.

A ``FakeProvider`` answers each request with the next queued ``Reply``: a JSON body, or a
server-sent event stream (chunked, as the real APIs send it) that can be written in pieces of
a few bytes, paused, or cut off mid-way. It records every request it received.

The shapes follow the public API references: OpenAI ``chat.completion`` and
``chat.completion.chunk`` objects ending with ``data: [DONE]``; Anthropic ``message`` objects
and the ``message_start`` / ``content_block_*`` / ``message_delta`` / ``message_stop`` events.
"""

from __future__ import annotations

import json
import socket
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    events: list[bytes] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    write_size: int | None = None  # write the stream in pieces of this many bytes
    break_after: int | None = None  # cut the connection after this many events
    stall_s: float = 0.0  # wait this long (or until the server closes) before answering
    pause_after: int | None = None  # after this many events, wait for ``resume``
    resume: threading.Event | None = None
    resumed: bool | None = None  # whether ``resume`` was set before the pause timed out


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: Any


class FakeProvider:
    def __init__(self, api: str) -> None:
        self.api = api
        self.replies: deque[Reply] = deque()
        self.always: Reply | None = None  # the answer when nothing is queued (for the bench)
        self.requests: list[Received] = []
        self.released = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.02,), daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}/v1" if self.api == "openai" else f"http://127.0.0.1:{port}"

    def queue(self, *replies: Reply) -> FakeProvider:
        self.replies.extend(replies)
        return self

    def close(self) -> None:
        self.released.set()
        self._server.shutdown()
        self._server.server_close()


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that hang up (timeouts, closed pools) are part of the tests, not a fault.
        pass


def _handler(fake: FakeProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in separate writes: without this, Nagle's algorithm and
        # delayed ACKs add ~40 ms to every answer.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            raw = self.rfile.read(length)
            headers = {k.lower(): v for k, v in self.headers.items()}
            if fake.always is None:
                fake.requests.append(Received(self.path, headers, json.loads(raw)))
            reply = fake.replies.popleft() if fake.replies else (fake.always or _no_reply())
            if reply.stall_s:
                fake.released.wait(reply.stall_s)
            if reply.events is None:
                self._send_json(reply)
            else:
                self._send_stream(reply)

        def _send_json(self, reply: Reply) -> None:
            data = json.dumps(reply.body).encode()
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _send_stream(self, reply: Reply) -> None:
            self.send_response(reply.status)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for number, event in enumerate(reply.events or (), start=1):
                size = reply.write_size or len(event)
                for start in range(0, len(event), size):
                    self._chunk(event[start : start + size])
                if reply.break_after is not None and number >= reply.break_after:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if reply.pause_after == number and reply.resume is not None:
                    reply.resumed = reply.resume.wait(5)
            self.wfile.write(b"0\r\n\r\n")

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    return Handler


def _no_reply() -> Reply:
    return Reply(status=500, body={"error": {"message": "no reply queued", "type": "test"}})


# --- OpenAI Chat Completions ------------------------------------------------------------------


def openai_usage(prompt: int = 12, completion: int = 5, cached: int = 0, reasoning: int = 0):
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    }


def openai_completion(
    text: str | None = None,
    calls: list[tuple[str, str, str]] = (),
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
    model: str = "gpt-test",
    reasoning_content: str | None = None,
) -> Reply:
    """A ``chat.completion``; ``calls`` are ``(id, name, arguments text)``."""
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in calls
        ]
    if reasoning_content is not None:
        message["reasoning_content"] = reasoning_content
    return Reply(
        body={
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 1700000000,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": finish_reason or ("tool_calls" if calls else "stop"),
                }
            ],
            "usage": usage if usage is not None else openai_usage(),
        }
    )


def openai_chunk(
    delta: dict[str, Any] | None = None,
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
    model: str = "gpt-test",
) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": model,
        "system_fingerprint": "fp_test",
        "choices": []
        if delta is None and finish_reason is None
        else [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish_reason}],
    }
    if usage is not None:
        chunk["usage"] = usage
    return chunk


def call_start(index: int, id: str, name: str, arguments: str = "") -> dict[str, Any]:
    """The first delta of a tool call: id, type, name and (often) empty arguments."""
    return {
        "tool_calls": [
            {
                "index": index,
                "id": id,
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
        ]
    }


def call_args(index: int, fragment: str) -> dict[str, Any]:
    return {"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}


def openai_stream(*chunks: dict[str, Any], done: bool = True, **options: Any) -> Reply:
    events = [f"data: {json.dumps(c, ensure_ascii=False)}\n\n".encode() for c in chunks]
    if done:
        events.append(b"data: [DONE]\n\n")
    return Reply(events=events, **options)


def openai_text_stream(text: str, pieces: int = 3, usage: dict | None = None) -> Reply:
    size = max(1, len(text) // pieces)
    parts = [text[i : i + size] for i in range(0, len(text), size)]
    return openai_stream(
        openai_chunk({"role": "assistant", "content": ""}),
        *(openai_chunk({"content": p}) for p in parts),
        openai_chunk({}, finish_reason="stop"),
        openai_chunk(usage=usage or openai_usage()),
    )


def openai_calls_stream(
    calls: list[tuple[str, str, str]], fragment: int = 7, finish_reason: str = "tool_calls"
) -> Reply:
    """Tool calls one after another, each argument text cut every ``fragment`` characters."""
    chunks = [openai_chunk({"role": "assistant", "content": None})]
    for index, (id, name, arguments) in enumerate(calls):
        chunks.append(openai_chunk(call_start(index, id, name)))
        for start in range(0, len(arguments), fragment):
            chunks.append(openai_chunk(call_args(index, arguments[start : start + fragment])))
    chunks.append(openai_chunk({}, finish_reason=finish_reason))
    chunks.append(openai_chunk(usage=openai_usage()))
    return openai_stream(*chunks)


def openai_error(status: int, message: str = "error", **headers: str) -> Reply:
    kind = "rate_limit_exceeded" if status == 429 else "server_error"
    return Reply(
        status=status,
        body={"error": {"message": message, "type": kind, "param": None, "code": kind}},
        headers=headers,
    )


# --- Anthropic Messages -----------------------------------------------------------------------


def anthropic_usage(
    input: int = 12, output: int = 5, cache_read: int = 0, cache_creation: int = 0
) -> dict[str, int]:
    return {
        "input_tokens": input,
        "output_tokens": output,
        "cache_read_input_tokens": cache_read,
        "cache_creation_input_tokens": cache_creation,
    }


def anthropic_message(
    text: str | None = None,
    calls: list[tuple[str, str, dict[str, Any]]] = (),
    stop_reason: str | None = None,
    usage: dict[str, int] | None = None,
    thinking: tuple[str, str] | None = None,
    model: str = "claude-test",
) -> Reply:
    """A ``message``; ``calls`` are ``(id, name, input)``; ``thinking`` is (text, signature)."""
    content: list[dict[str, Any]] = []
    if thinking:
        content.append({"type": "thinking", "thinking": thinking[0], "signature": thinking[1]})
    if text is not None:
        content.append({"type": "text", "text": text})
    content += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls]
    return Reply(
        body={
            "id": "msg_test",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop_reason or ("tool_use" if calls else "end_turn"),
            "stop_sequence": None,
            "usage": usage or anthropic_usage(),
        }
    )


def anthropic_event(data: dict[str, Any]) -> bytes:
    body = json.dumps(data, ensure_ascii=False)
    return f"event: {data['type']}\ndata: {body}\n\n".encode()


def message_start(usage: dict[str, int] | None = None, model: str = "claude-test") -> dict:
    return {
        "type": "message_start",
        "message": {
            "id": "msg_test",
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": model,
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage or {"input_tokens": 12, "output_tokens": 1},
        },
    }


def block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def block_delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


def block_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def message_delta(stop_reason: str, output_tokens: int = 5) -> dict[str, Any]:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": None},
        "usage": {"output_tokens": output_tokens},
    }


def anthropic_stream(*events: dict[str, Any], **options: Any) -> Reply:
    return Reply(events=[anthropic_event(e) for e in events], **options)


def anthropic_text_stream(text: str, pieces: int = 3) -> Reply:
    size = max(1, len(text) // pieces)
    parts = [text[i : i + size] for i in range(0, len(text), size)]
    return anthropic_stream(
        message_start(),
        block_start(0, {"type": "text", "text": ""}),
        {"type": "ping"},
        *(block_delta(0, {"type": "text_delta", "text": p}) for p in parts),
        block_stop(0),
        message_delta("end_turn"),
        {"type": "message_stop"},
    )


def anthropic_calls_stream(
    calls: list[tuple[str, str, str]], fragment: int = 7, stop_reason: str = "tool_use"
) -> Reply:
    """tool_use blocks one after another, their input JSON cut every ``fragment`` characters."""
    events: list[dict[str, Any]] = [message_start()]
    for index, (id, name, arguments) in enumerate(calls):
        events.append(block_start(index, {"type": "tool_use", "id": id, "name": name, "input": {}}))
        for start in range(0, len(arguments), fragment):
            piece = arguments[start : start + fragment]
            events.append(block_delta(index, {"type": "input_json_delta", "partial_json": piece}))
        events.append(block_stop(index))
    events += [message_delta(stop_reason), {"type": "message_stop"}]
    return anthropic_stream(*events)


def anthropic_error(status: int, kind: str, message: str = "error", **headers: str) -> Reply:
    return Reply(
        status=status,
        body={"type": "error", "error": {"type": kind, "message": message}},
        headers=headers,
    )
