"""The gateway's provider-neutral message and response model.

Everything outside ``gateway/`` speaks only these types; each provider adapter translates to
and from its own wire format. Messages are persisted as plain dicts (``to_dict``) so a run's
conversation can be checkpointed and resumed by another process.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]


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


@dataclass(frozen=True)
class Message:
    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    reasoning: str | None = None
    images: tuple[str, ...] = ()
    is_error: bool = False

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["tool_calls"] = [asdict(call) for call in self.tool_calls]
        data["images"] = list(self.images)
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
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0

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

    def to_message(self) -> Message:
        return Message(
            role="assistant",
            content=self.text,
            tool_calls=tuple(self.tool_calls),
            reasoning=self.reasoning,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "tool_calls": [asdict(call) for call in self.tool_calls],
            "finish_reason": self.finish_reason,
            "usage": asdict(self.usage),
            "route": self.route,
            "model": self.model,
            "reasoning": self.reasoning,
        }
