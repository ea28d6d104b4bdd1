"""Assembling a model's output as it arrives, and handing each finished part on at once.

Providers stream tool calls as fragments of argument text keyed by the call's index, possibly
interleaved between parallel calls and split anywhere (mid-key, mid-value, mid-character). A
call is finished when its argument text is one complete JSON object: a complete object cannot
be extended into another valid one, so it is safe to hand on before the stream ends. Calls
that never get there are settled when the response ends: parsed tolerantly, or, when the
model ran out of tokens, marked as cut off so that they are never executed.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from gateway.arguments import parse_tool_arguments
from gateway.messages import EventCallback, StreamEvent, ToolCall
from traces.untrusted import clean_text

TRUNCATED_CALL_REASON = (
    "the response reached its token limit (max_tokens) before this call was complete, "
    "so it was not executed; send the call again"
)


class EventSink:
    """Hands events to the caller's callback and remembers whether anything went out.

    Once something was handed on, the response cannot be replayed from the start without
    the listener seeing it twice: a broken stream is then an error, not a retry.
    """

    def __init__(self, route: str, callback: EventCallback | None) -> None:
        self.route = route
        self.callback = callback
        self.handed_on = False

    def text(self, delta: str) -> None:
        if delta:
            self._emit(StreamEvent(kind="text", route=self.route, text=delta))

    def reasoning(self, delta: str) -> None:
        if delta:
            self._emit(StreamEvent(kind="reasoning", route=self.route, text=delta))

    def tool_call(self, call: ToolCall) -> None:
        self._emit(StreamEvent(kind="tool_call", route=self.route, call=call))

    def _emit(self, event: StreamEvent) -> None:
        if self.callback is not None:
            text = clean_text(event.text) if event.text else event.text
            if text is not event.text:  # a delta is stored as it comes: storable text only
                event = dataclasses.replace(event, text=text)
            self.handed_on = True
            self.callback(event)


@dataclass
class _PartialCall:
    index: int
    id: str = ""
    name: str = ""
    fragments: list[str] = field(default_factory=list)
    done: ToolCall | None = None


class ToolCallAssembler:
    """Collects tool-call fragments per call index; see the module docstring for the rules."""

    def __init__(self, sink: EventSink, id_prefix: str) -> None:
        self._sink = sink
        self._id_prefix = id_prefix
        self._calls: dict[int, _PartialCall] = {}

    def add(
        self, index: int, *, id: str | None = None, name: str | None = None, fragment: str = ""
    ) -> None:
        """Add what one delta says about call ``index``; hand the call on if it is finished."""
        call = self._calls.get(index)
        if call is None:
            call = self._calls[index] = _PartialCall(index=index)
        if id and not call.id:
            call.id = id
        if name and name != call.name:
            # Servers send the name once, or repeat it whole, or (rarely) in pieces.
            call.name = call.name + name if call.name and not name.startswith(call.name) else name
        if fragment:
            call.fragments.append(fragment)
            if call.done is None and fragment.rstrip().endswith("}"):
                self._hand_on_if_complete(call)

    def close(self, index: int) -> None:
        """The provider says call ``index`` ended (Anthropic's content_block_stop)."""
        call = self._calls.get(index)
        if call is not None and call.done is None:
            if not "".join(call.fragments).strip():
                self._settle(call, {}, "")
            else:
                self._hand_on_if_complete(call)

    def finish(self, truncated: bool) -> list[ToolCall]:
        """Settle every call when the response ends; return all of them in index order.

        With ``truncated`` (the model hit its token limit), a call not finished by now is
        returned with no arguments and a reason, so that it is refused, never executed.
        """
        for call in sorted(self._calls.values(), key=lambda c: c.index):
            if call.done is not None:
                continue
            raw = "".join(call.fragments)
            if truncated:
                call.done = self._tool_call(call, None, raw, TRUNCATED_CALL_REASON)
                continue
            arguments, error = parse_tool_arguments(raw)
            self._settle(call, arguments, raw, error)
        return [c.done for c in sorted(self._calls.values(), key=lambda c: c.index) if c.done]

    def _hand_on_if_complete(self, call: _PartialCall) -> None:
        raw = "".join(call.fragments)
        value = _strict_object(raw)
        if value is not None:
            self._settle(call, value, raw)

    def _settle(
        self,
        call: _PartialCall,
        arguments: dict[str, Any] | None,
        raw: str,
        error: str | None = None,
    ) -> None:
        call.done = self._tool_call(call, arguments, raw, error)
        self._sink.tool_call(call.done)

    def _tool_call(
        self, call: _PartialCall, arguments: dict[str, Any] | None, raw: str, error: str | None
    ) -> ToolCall:
        return ToolCall(
            id=call.id or f"{self._id_prefix}{call.index + 1}",
            name=call.name,
            arguments=arguments,
            index=call.index,
            raw_arguments=raw,
            parse_error=error,
        )


def _strict_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def server_sent_events(lines: Iterable[str]) -> Iterator[tuple[str, str]]:
    """``(event, data)`` pairs from the lines of a ``text/event-stream`` body.

    The SDKs' own stream iterators build a typed object per chunk and stop reading at
    ``[DONE]``, which leaves the body unfinished and the connection unusable for the next
    call; reading the lines here is cheaper and lets the connection go back to the pool.
    """
    event, data = "", []
    for line in lines:
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = "", []
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
    if data:
        yield event, "\n".join(data)
