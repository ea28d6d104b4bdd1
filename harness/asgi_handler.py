"""Django's ASGI handler with a request's sync work done in one hop, on threads kept between
requests.

Django's own handler builds the middleware chain in async mode and gives each request a
thread of its own (asgiref's ``ThreadSensitiveContext``): a request crossed between the event
loop and that thread about a dozen times, and the thread, with its database connection, was
new each time (Django's connections are per thread). Measured, the shipped ASGI server then
answered sync runs slower than threaded WSGI (issue 26). Here, as under a threaded WSGI
server:

- the chain is built in sync mode, and everything Django does around the view
  (``request_started``, the chain and the view, the response's ``close`` and
  ``request_finished``) runs in **one hop** to a request thread;
- request threads come from one pool per process and are kept between requests, so a thread's
  connection object lives on: with the connection pool (the default on PostgreSQL) it hands
  its connection back at the end of each request and takes one again at the next; with
  persistent connections (``HARNESS_DB_POOL=off``) it keeps it for ``CONN_MAX_AGE``.

Reading the body and sending the response stay on the event loop. A streaming response (the
live event streams, an async iterator) is sent as Django sends it: raced against the
client's disconnect, its sync parts on a thread of its own, so a stream holds no request
thread while it is open. An async view (the event stream's opening) runs on the loop through
``async_to_sync``, as Django does for async views under WSGI.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from asgiref.sync import SyncToAsync, ThreadSensitiveContext, sync_to_async
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.db import close_old_connections
from django.http import FileResponse, HttpResponseBase
from django.urls import set_script_prefix

from harness.request_threads import RequestThreads


class SyncChainASGIHandler(ASGIHandler):
    def __init__(self, request_threads: int) -> None:
        super().__init__()
        self._threads = RequestThreads(request_threads)
        # thread_sensitive=False with our executor: the call goes to one of our threads (not to
        # the request's own), and asgiref still tells that thread which event loop an
        # ``async_to_sync`` inside it goes back to.
        self._in_thread = SyncToAsync(self._respond, thread_sensitive=False, executor=self._threads)

    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async=False)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        await self.handle(scope, receive, send)

    async def handle(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        set_script_prefix(get_script_prefix(scope))
        try:
            response = await self._in_thread(scope, body_file)
            if response.streaming:
                await self._stream(response, receive, send)
            else:
                # Sent to a client that left, uvicorn drops it: a disconnect changes nothing
                # for a response made in one hop, so nothing listens for it.
                await self.send_response(response, send)
        finally:
            body_file.close()

    def _respond(self, scope: dict[str, Any], body_file: Any) -> HttpResponseBase:
        """On a request thread: what Django's handler does around the view, in one go. A
        response with its content already made is closed here (``request_finished`` on the
        thread whose connection it hands back)."""
        signals.request_started.send(sender=self.__class__, scope=scope)
        request, response = self.create_request(scope, body_file)
        if request is not None:
            response = self.get_response(request)
            response._handler_class = self.__class__
            if isinstance(response, FileResponse):
                response.block_size = self.chunk_size
        if response.streaming:
            # The view is done with this thread's connection; the stream's own work (and its
            # close) happens elsewhere.
            close_old_connections()
        else:
            response.close()
        return response

    async def _stream(self, response: HttpResponseBase, receive: Any, send: Any) -> None:
        """Django's way: the stream is cancelled when the client disconnects; its sync parts
        (a sync iterator, ``close``) run on a thread of this stream's own."""
        async with ThreadSensitiveContext():
            tasks = [
                asyncio.create_task(self.listen_for_disconnect(receive)),
                asyncio.create_task(self.send_response(response, send)),
            ]
            try:
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                for task in tasks:
                    if not task.done():
                        task.cancel()
                    # The client left, or the stream ended first.
                    with contextlib.suppress(asyncio.CancelledError, RequestAborted):
                        await task
            finally:
                await sync_to_async(response.close)()
