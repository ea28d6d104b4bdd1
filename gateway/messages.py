"""The gateway's provider-neutral message and response model.

Everything outside ``gateway/`` speaks only these types; each provider adapter translates to
and from its own wire format. Messages are persisted as plain dicts (``to_dict``) so a run's
conversation can be checkpointed and resumed by another process.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]

# Finish reasons after translation; a provider's own word is kept in ``provider_finish_reason``.
FINISH_REASONS = ("stop", "tool_calls", "length", "content_filter", "unknown")


@dataclass(frozen=True)
class ToolCall:
    """A call the model proposed. ``arguments`` is None when the text could not be parsed."""

    id: str
    name: str
    arguments: dict[str, Any] | None
    index: int = 0
    raw_arguments: str = ""
    parse_error: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCall:
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        # Written out rather than ``dataclasses.asdict``: that deep-copies every argument, and
        # the engine turns messages into dicts several times a step.
        return {
            "id": self.id,
            "name": self.name,
            "arguments": self.arguments,
            "index": self.index,
            "raw_arguments": self.raw_arguments,
            "parse_error": self.parse_error,
        }


@dataclass(frozen=True)
class Message:
    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    reasoning: str | None = None
    # Anthropic signs its thinking blocks; the signature must travel back with the text.
    reasoning_signature: str | None = None
    # Image URLs, ``data:`` URLs included.
    images: tuple[str, ...] = ()
    is_error: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The fields that are set; values are shared, not copied (messages are immutable)."""
        data = {
            "role": self.role,
            "content": self.content,
            "tool_calls": [call.to_dict() for call in self.tool_calls],
            "tool_call_id": self.tool_call_id,
            "name": self.name,
            "reasoning": self.reasoning,
            "reasoning_signature": self.reasoning_signature,
            "images": list(self.images),
            "is_error": self.is_error,
        }
        return {key: value for key, value in data.items() if value not in (None, "", [], False)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        values = dict(data)
        values["tool_calls"] = tuple(ToolCall.from_dict(c) for c in data.get("tool_calls", ()))
        values["images"] = tuple(data.get("images", ()))
        return cls(**values)


@dataclass(frozen=True)
class ToolSpec:
    """What the model is shown of a tool."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass
class Usage:
    """Tokens of one model call.

    ``prompt_tokens`` counts every input token, cached ones included; ``cached_tokens`` is the
    part read from the provider's prompt cache. ``reasoning_tokens`` is the part of
    ``completion_tokens`` spent on reasoning. ``estimated`` is True when the provider reported
    no usage and the numbers are the gateway's own estimate.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class ModelResponse:
    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str = "stop"
    usage: Usage = field(default_factory=Usage)
    route: str = ""
    model: str = ""
    reasoning: str | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)
    reasoning_signature: str | None = None
    provider_finish_reason: str = ""
    cost_usd: float | None = None
    # What the gateway replaced in the provider's answer before anyone used it (NUL, lone
    # surrogates, non-finite numbers: ``traces.untrusted``); empty for almost every response.
    normalised: list[str] = field(default_factory=list)

    def to_message(self) -> Message:
        return Message(
            role="assistant",
            content=self.text,
            tool_calls=tuple(self.tool_calls),
            reasoning=self.reasoning,
            reasoning_signature=self.reasoning_signature,
        )

    def to_dict(self) -> dict[str, Any]:
        data = {
            "text": self.text,
            "tool_calls": [call.to_dict() for call in self.tool_calls],
            "finish_reason": self.finish_reason,
            "usage": asdict(self.usage),
            "route": self.route,
            "model": self.model,
            "reasoning": self.reasoning,
            "provider_finish_reason": self.provider_finish_reason,
            "cost_usd": self.cost_usd,
        }
        if self.normalised:
            data["normalised"] = self.normalised
        return data


@dataclass(frozen=True)
class StreamEvent:
    """Something the model produced, handed on while the response is still arriving.

    ``kind`` is ``text`` or ``reasoning`` (``text`` holds the delta) or ``tool_call`` (``call``
    holds one complete call: its arguments will not change any more).
    """

    kind: Literal["text", "reasoning", "tool_call"]
    route: str
    text: str = ""
    call: ToolCall | None = None


EventCallback = Callable[[StreamEvent], None]
