"""MCP sessions of one process: a background event loop that owns them, and a thread-safe face.

The SDK is async; the executor runs handlers in threads. So each process (web or worker) has
one daemon thread running an asyncio loop, and on it one long-lived task per configured server
that opens the transport and the ``ClientSession``, initialises it and keeps it until the
connection breaks. Handlers submit coroutines to that loop and wait with their own timeout; a
call given up is cancelled on the loop (the SDK tells the server with
``notifications/cancelled``). A server that exits or drops the connection is reconnected at the
next call. A forked child (Celery's prefork) starts its own loop: sessions are never shared
across processes.

Each session's tool list is kept for ``HARNESS_MCP_LIST_TTL_S`` seconds and dropped at once
when the server announces ``notifications/tools/list_changed`` or reconnects: every call is
checked against a list no older than that.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx2
import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tools.http_tools import fill_secrets
from tools.mcp.config import McpServerConfig
from tools.mcp.listeners import ConnectListener, connect_listeners

logger = logging.getLogger(__name__)

CLIENT_INFO = types.Implementation(name="harness", version="1")


class McpUnavailable(Exception):
    """The server could not be reached, or the connection broke during a request."""


class McpProtocolError(Exception):
    """The server answered a request with a protocol error (not a tool's ``isError``)."""


class McpResultTooLarge(Exception):
    """The server's answer is larger than the client reads (``MAX_RESULT_BYTES``): the SDK
    stopped reading it. The call itself ran; the session is fine."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the result is larger than the {limit} bytes the client reads")
        self.limit = limit


# Over Streamable HTTP the SDK reads one server-sent event (one JSON-RPC message) of at most
# this many bytes; a larger one fails that request only, with a CONNECTION_CLOSED error whose
# message says so (httpx2's ``SSEError``). It is not the connection that broke: the session
# is kept and the call is not retried.
MAX_RESULT_BYTES = 1024 * 1024
_EVENT_TOO_LARGE = re.compile(r"exceeded the (\d+) byte limit")


class _Connection:
    """One server's session, owned by a task on the pool's loop."""

    def __init__(
        self, config: McpServerConfig, on_connect: Callable[[str, dict[str, Any]], None]
    ) -> None:
        self.config = config
        self.session: ClientSession | None = None
        self.task: asyncio.Task[None] | None = None
        self.ready: asyncio.Future[ClientSession] | None = None
        self.started_at = 0.0
        self.stop: asyncio.Event | None = None
        self.lock = asyncio.Lock()
        self.tools: dict[str, types.Tool] | None = None
        self.listed_at = 0.0
        self.connects = 0
        self.reported = 0  # the connection whose first tool list was reported
        self.on_connect = on_connect

    @property
    def alive(self) -> bool:
        return self.session is not None and self.task is not None and not self.task.done()

    async def ensure(self, timeout: float, connect_timeout: float) -> ClientSession:
        """The live session, connecting if needed; waits at most ``timeout``.

        A connection still starting when a caller gives up keeps starting (a cold stdio server
        may take longer than one call's budget), so the next call can use it; one that has not
        come up within ``connect_timeout`` is abandoned and started again.
        """
        async with self.lock:
            if self.alive:
                assert self.session is not None
                return self.session
            starting = (
                self.task is not None
                and not self.task.done()
                and self.ready is not None
                and not self.ready.done()
            )
            if starting and time.monotonic() - self.started_at > connect_timeout:
                self.drop()
                assert self.task is not None
                self.task.cancel()
                starting = False
            if not starting:
                self.session, self.tools = None, None
                self.ready = asyncio.get_running_loop().create_future()
                # Nobody may be waiting when it fails: retrieve the exception so it is not logged.
                self.ready.add_done_callback(lambda f: f.cancelled() or f.exception())
                self.stop = asyncio.Event()
                self.started_at = time.monotonic()
                self.task = asyncio.create_task(self._own(self.ready, self.stop))
            assert self.ready is not None
            try:
                session = await asyncio.wait_for(asyncio.shield(self.ready), timeout)
            except TimeoutError as exc:
                raise McpUnavailable(
                    f"MCP server {self.config.name} did not answer within {timeout:.3g} s"
                ) from exc
            if self.session is not session:
                self.session = session
                self.connects += 1
        return session

    def drop(self) -> None:
        """Forget a broken session: the next call connects again."""
        self.session, self.tools = None, None
        if self.stop is not None:
            self.stop.set()

    async def _own(self, ready: asyncio.Future[ClientSession], stop: asyncio.Event) -> None:
        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(_transport(self.config))
                session = await stack.enter_async_context(
                    ClientSession(
                        read, write, message_handler=self._on_message, client_info=CLIENT_INFO
                    )
                )
                await session.initialize()
                ready.set_result(session)
                await stop.wait()
        except asyncio.CancelledError:
            if not ready.done():
                ready.set_exception(McpUnavailable(f"MCP server {self.config.name}: cancelled"))
            raise
        except BaseException as exc:  # the transport's failures come as exception groups
            logger.warning("MCP server %s: connection ended: %r", self.config.name, exc)
            if not ready.done():
                ready.set_exception(
                    McpUnavailable(
                        f"MCP server {self.config.name} could not be started: {_why(exc)}"
                    )
                )
        finally:
            if self.stop is stop:
                self.session, self.tools = None, None

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            logger.warning("MCP server %s: transport error: %r", self.config.name, message)
            return
        root = getattr(message, "root", message)
        if isinstance(root, types.ToolListChangedNotification):
            self.tools = None

    async def listing(
        self, ttl: float, timeout: float, connect_timeout: float
    ) -> dict[str, types.Tool]:
        session = await self.ensure(timeout, connect_timeout)
        if self.tools is None or time.monotonic() - self.listed_at >= ttl:
            tools: dict[str, types.Tool] = {}
            cursor: str | None = None
            while True:
                params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await session.list_tools(params=params)
                tools.update({tool.name: tool for tool in page.tools})
                cursor = page.next_cursor
                if not cursor:
                    break
            self.tools, self.listed_at = tools, time.monotonic()
            if self.reported != self.connects:
                # A new connection: compare its tools with the pins once (start-up check).
                self.reported = self.connects
                self.on_connect(self.config.name, tools)
        return self.tools


@contextlib.asynccontextmanager
async def _transport(config: McpServerConfig) -> Any:
    if config.transport == "http":
        headers = {name: fill_secrets(value) for name, value in config.headers.items()}
        client: httpx2.AsyncClient = create_mcp_http_client(headers=headers)
        async with (
            client,
            streamable_http_client(
                config.url, http_client=client, max_sse_event_size=MAX_RESULT_BYTES
            ) as streams,
        ):
            yield streams[0], streams[1]
        return
    params = StdioServerParameters(
        command=config.command,
        args=list(config.args),
        env={name: fill_secrets(value) for name, value in config.env.items()},
        cwd=config.cwd,
    )
    async with stdio_client(params, errlog=_errlog()) as streams:
        yield streams[0], streams[1]


def _errlog() -> Any:
    """Where a stdio server's stderr goes: this process's stderr (the worker's log).

    It must be a real file: Celery and pytest replace ``sys.stderr`` with objects that have
    no file descriptor, so fall back to the original stderr, then to /dev/null.
    """
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None:
                stream.fileno()
                return stream
        except (OSError, ValueError, AttributeError):
            continue
    return open(os.devnull, "w")


def _why(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


class McpPool:
    """The process's MCP sessions, one per configured server, on one background loop."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self.connections: dict[str, _Connection] = {}
        # Called with (server, advertised tools) at the first listing of each connection.
        self.connect_listeners: list[ConnectListener] = connect_listeners()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="mcp-sessions", daemon=True
        )
        self.thread.start()

    def submit(self, coroutine: Any) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def run(self, coroutine: Any, timeout: float) -> Any:
        """Run on the loop and wait; past ``timeout`` the work is cancelled and TimeoutError."""
        future = self.submit(coroutine)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError from None

    def _connection(self, config: McpServerConfig) -> _Connection:
        connection = self.connections.get(config.name)
        if connection is None or connection.config != config:
            if connection is not None:
                connection.drop()
            connection = _Connection(config, self._connected)
            self.connections[config.name] = connection
        return connection

    def _connected(self, server: str, tools: dict[str, Any]) -> None:
        for listener in list(self.connect_listeners):
            try:
                listener(server, tools)
            except Exception:
                logger.exception("MCP connect listener failed for %s", server)

    async def list_tools(
        self, config: McpServerConfig, ttl: float, timeout: float, connect_timeout: float
    ) -> dict[str, types.Tool]:
        connection = self._connection(config)
        try:
            return await connection.listing(ttl, timeout, connect_timeout)
        except McpUnavailable:
            raise
        except Exception as exc:
            connection.drop()
            raise McpUnavailable(f"MCP server {config.name}: {_why(exc)}") from exc

    async def call_tool(
        self,
        config: McpServerConfig,
        name: str,
        arguments: dict[str, Any],
        meta: dict[str, Any],
        timeout: float,
        check: Callable[[dict[str, types.Tool]], None],
        ttl: float,
        connect_timeout: float,
    ) -> types.CallToolResult:
        """List (if stale), let ``check`` refuse the call, then call the tool."""
        tools = await self.list_tools(config, ttl, timeout, connect_timeout)
        check(tools)
        connection = self._connection(config)
        session = await connection.ensure(timeout, connect_timeout)
        try:
            return await session.call_tool(name, arguments, read_timeout_seconds=timeout, meta=meta)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            from mcp import MCPError
            from mcp_types.jsonrpc import CONNECTION_CLOSED

            if isinstance(exc, MCPError):
                too_large = _EVENT_TOO_LARGE.search(exc.message or "")
                if too_large is not None:  # this answer only: the session stays
                    raise McpResultTooLarge(int(too_large.group(1))) from exc
                if exc.code != CONNECTION_CLOSED:
                    raise McpProtocolError(exc.message) from exc
            connection.drop()
            raise McpUnavailable(
                f"MCP server {config.name}: the connection broke during the call ({_why(exc)})"
            ) from exc

    async def aclose(self) -> None:
        tasks = [c.task for c in self.connections.values() if c.task is not None]
        for connection in self.connections.values():
            connection.drop()
        await asyncio.gather(*tasks, return_exceptions=True)


_pool: McpPool | None = None
_pool_lock = threading.Lock()


def get_pool() -> McpPool:
    """This process's pool (a new one in a forked child)."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool.pid != os.getpid():
            _pool = McpPool()
        return _pool


def reset_pool() -> None:
    """Close every session of this process (tests; a changed configuration)."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None and pool.pid == os.getpid():
        with contextlib.suppress(Exception):
            pool.run(pool.aclose(), timeout=10)
        pool.loop.call_soon_threadsafe(pool.loop.stop)
        pool.thread.join(timeout=5)
