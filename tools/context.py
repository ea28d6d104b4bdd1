"""What a tool's handler is handed besides its arguments (docs/agents-and-tools.md: ``handler``).

Its own module so that handlers (``tools.demo``, experiments' recorded tools) need not import
the executor, which imports the registry, which reaches them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ToolContext:
    """Who a call acts for, handed to every handler. ``idempotency_key`` = run id + call id.

    ``deadline`` (``time.monotonic()`` clock) and ``attempt`` are set by the executor.
    """

    tenant: str
    user_id: str
    run_id: str
    call_id: str
    idempotency_key: str
    deadline: float | None = None
    attempt: int = 1
