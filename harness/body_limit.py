"""Request bodies over the size limit are refused before they are read, under either server.

The limit is Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (2.5 MiB): the API's parser and
Django's form parsing enforce the same number, so a body passes all three or none.

- ``BodyLimit`` wraps the ASGI application (``harness/asgi.py``, the shipped server). Django's
  ASGI handler reads the whole body into a temporary file before any middleware, view or
  authentication runs: a 200 MB unauthenticated POST was uploaded in full before its 401,
  and ``Content-Length: 10^20`` with two bytes sent held the connection until the client gave
  up. The guard answers ``413 request_too_large`` on a declared ``Content-Length`` over the
  limit before reading anything. A body without one (chunked) it reads itself, answering 413
  as soon as it passes the limit; one within the limit reaches the application with its
  length declared (Django REST framework reads a body only up to its ``Content-Length``: a
  chunked body used to arrive empty). Either 413 says ``Connection: close``, so the server
  stops reading the connection instead of draining the rest of the body.
- ``refuse_oversized_bodies`` is the same refusal of a declared length for the WSGI server
  (``harness/wsgi.py``, e.g. ``runserver``): there Django reads a body lazily, and never more
  than its declared length, so the declared length is all there is to check, before
  authentication as under ASGI.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from harness.errors import ErrorCode

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

logger = logging.getLogger(__name__)


def body_limit() -> int | None:
    """The largest body accepted, in bytes (``None``: no limit)."""
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def too_large_message(limit: int) -> str:
    return f"The request body is larger than {limit} bytes."


class BodyLimit:
    """ASGI middleware: 413 for a body over ``body_limit()``, before the app reads it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = body_limit() if scope["type"] == "http" else None
        if limit is None:
            await self.app(scope, receive, send)
            return
        headers = scope.get("headers") or []
        declared = declared_length(headers)
        if declared is not None and declared > limit:
            logger.info(
                "413 %s %s: Content-Length %d over the limit of %d bytes, nothing read",
                scope.get("method"), scope.get("path"), declared, limit,
            )  # fmt: skip
            await send_too_large(send, limit)
            return
        if declared is not None:
            # The server delivers exactly the declared length (HTTP framing), within the limit.
            await self.app(scope, receive, send)
            return
        body = await read_within(receive, limit)
        if body is None:  # the client went away
            return
        if isinstance(body, TooLarge):
            logger.info(
                "413 %s %s: body over the limit of %d bytes, cut off after reading %d",
                scope.get("method"), scope.get("path"), limit, body.read,
            )  # fmt: skip
            await send_too_large(send, limit)
            return
        if body:
            # A chunked body, now whole: declared to the app, which (like Django REST
            # framework) may read a body only up to its Content-Length.
            headers = [*headers, (b"content-length", str(len(body)).encode())]
            scope = {**scope, "headers": headers}
        await self.app(scope, replay(body, receive), send)


class TooLarge:
    def __init__(self, read: int) -> None:
        self.read = read


async def read_within(receive: Receive, limit: int) -> bytes | TooLarge | None:
    """A body without a declared length, read until it ends or passes ``limit`` (then
    ``TooLarge``: nothing more is read), or ``None`` if the client disconnected."""
    parts: list[bytes] = []
    read = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        part = message.get("body", b"")
        read += len(part)
        if read > limit:
            return TooLarge(read)
        parts.append(part)
        if not message.get("more_body", False):
            return b"".join(parts)


def replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` for the app: the body read already, then the server's messages (a
    disconnect)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> Message:
        return pending.pop() if pending else await receive()

    return replayed


def declared_length(headers: list[tuple[bytes, bytes]] | Any) -> int | None:
    """The largest ``Content-Length`` among the headers, or ``None`` (none, or not a number:
    the server refuses those itself; the body is then counted as it arrives)."""
    lengths = [value.strip() for name, value in headers if name.lower() == b"content-length"]
    numbers = [int(value) for value in lengths if value.isdigit()]
    return max(numbers) if numbers else None


async def send_too_large(send: Send, limit: int) -> None:
    body = json.dumps(
        {
            "error": {
                "code": str(ErrorCode.REQUEST_TOO_LARGE),
                "message": too_large_message(limit),
                "details": {},
            }
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                # The rest of the body is never read: the connection cannot carry another
                # request, and closing it is what stops the client's upload.
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def refuse_oversized_bodies(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[[HttpRequest], HttpResponse]:
    """Django middleware, first in the chain: 413 on a declared ``Content-Length`` over the
    limit, before sessions or authentication touch the request (WSGI; under ASGI
    ``BodyLimit`` has answered already)."""

    def middleware(request: HttpRequest) -> HttpResponse:
        limit = body_limit()
        raw = request.META.get("CONTENT_LENGTH") or ""
        if limit is not None and raw.strip().isdigit() and int(raw) > limit:
            response = JsonResponse(
                {
                    "error": {
                        "code": str(ErrorCode.REQUEST_TOO_LARGE),
                        "message": too_large_message(limit),
                        "details": {},
                    }
                },
                status=413,
            )
            # Set here: this middleware runs before CommonMiddleware, which would set it.
            # No "Connection: close" (a WSGI application may not send hop-by-hop headers):
            # gunicorn's sync workers close every connection after its response anyway.
            response["Content-Length"] = str(len(response.content))
            return response
        return get_response(request)

    return middleware
