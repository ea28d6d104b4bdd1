"""Token estimates made locally, with nothing downloaded at run time.

Used for budgets before a call is sent and by providers that report no usage (the scripted
model). Real usage from a provider always replaces the estimate once it is known.
"""

from __future__ import annotations

import json
import math
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.messages import Message, ToolSpec

# Per-message framing the chat formats add (role markers, separators).
MESSAGE_OVERHEAD_TOKENS = 4


def estimate_tokens(content: Any, tools: list[ToolSpec] | None = None) -> int:
    """Roughly count tokens: ~4 characters per token for Latin text, 1 per CJK character."""
    if isinstance(content, str):
        return _text_tokens(content)
    total = 0
    for message in content:
        total += MESSAGE_OVERHEAD_TOKENS + _message_tokens(message)
    for tool in tools or ():
        total += _text_tokens(tool.name + tool.description + json.dumps(tool.parameters))
    return total


def _message_tokens(message: Message) -> int:
    # A run's context is estimated at every step and its messages never change (frozen), so
    # each is counted once. Keyed by identity (a message holding arguments is not hashable);
    # the entry keeps the message alive, so its id cannot be reused while cached.
    cached = _counted.get(id(message))
    if cached is not None and cached[0] is message:
        return cached[1]
    tokens = _count_message(message)
    with _counted_lock:
        if len(_counted) >= MAX_COUNTED:
            _counted.clear()
        _counted[id(message)] = (message, tokens)
    return tokens


MAX_COUNTED = 16_384
_counted: dict[int, tuple[Any, int]] = {}
_counted_lock = threading.Lock()


def _count_message(message: Message) -> int:
    text = message.content + (message.reasoning or "")
    for call in message.tool_calls:
        text += call.name + call.raw_arguments
    return _text_tokens(text)


def _text_tokens(text: str) -> int:
    if not text:
        return 0
    if text.isascii():  # most text: no character-by-character loop
        return math.ceil(len(text) / 4)
    wide = sum(1 for ch in text if ord(ch) >= 0x2E80)
    narrow = len(text) - wide
    return wide + math.ceil(narrow / 4)
