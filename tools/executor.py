"""Running a tool handler with a timeout, turning every failure into data.

A handler is ``handler(arguments: dict, context: ToolContext) -> JSON-able value``. It runs in
a bounded thread pool so that a hung handler cannot hang the run: past its timeout the caller
gets a ``timeout`` error (the thread is abandoned, and the pool bounds how many can pile up).
"""

from __future__ import annotations

import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

from django.db import close_old_connections, connections

from tools.errors import ToolCallError, ToolErrorCode
from tools.registry import ToolDefinition

MAX_WORKER_THREADS = 16

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


@dataclass(frozen=True)
class ToolContext:
    """Who a call acts for, handed to every handler. ``idempotency_key`` = run id + call id."""

    tenant: str
    user_id: str
    run_id: str
    call_id: str
    idempotency_key: str


@dataclass
class ToolOutcome:
    result: Any = None
    error: ToolCallError | None = None
    duration_ms: float = 0.0
    traceback: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None


def execute_tool(
    tool: ToolDefinition, arguments: dict[str, Any], context: ToolContext
) -> ToolOutcome:
    """Run the tool's handler within its timeout. Never raises for a handler's failure."""
    started = time.perf_counter()
    future = _executor().submit(_call_handler, tool, arguments, context)
    try:
        result = future.result(timeout=tool.timeout_s)
    except FutureTimeout:
        future.cancel()
        return ToolOutcome(
            error=ToolCallError(
                ToolErrorCode.TIMEOUT,
                f"{tool.name} did not finish within {tool.timeout_s:g} s and was abandoned.",
                {"timeout_s": tool.timeout_s},
            ),
            duration_ms=_elapsed_ms(started),
        )
    except Exception as exc:
        return ToolOutcome(
            error=ToolCallError(
                ToolErrorCode.TOOL_FAILED,
                f"{tool.name} failed: {type(exc).__name__}: {_first_line(exc)}",
            ),
            duration_ms=_elapsed_ms(started),
            traceback="".join(traceback.format_exception(exc)),
        )
    return ToolOutcome(result=result, duration_ms=_elapsed_ms(started))


def _call_handler(tool: ToolDefinition, arguments: dict[str, Any], context: ToolContext) -> Any:
    close_old_connections()
    try:
        return tool.handler(arguments, context)
    finally:
        # Pool threads outlive requests and tests: a connection left open here would pin the
        # database (PostgreSQL refuses to drop a database with open sessions).
        connections.close_all()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=MAX_WORKER_THREADS, thread_name_prefix="tool")
        return _pool


def _elapsed_ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else "(no message)"
