"""The shipped ASGI application runs a request's middleware and view in one thread hop.

Django's own handler ran each middleware's hooks through ``sync_to_async`` (about a dozen
crossings between the event loop and the request's thread per request), which made the shipped
ASGI server slower than threaded WSGI on sync runs (issue 26). These tests drive
``harness.asgi.application`` itself with ASGI messages and count the crossings.
"""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from asgiref import sync

from harness.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)


def _call(path: str, headers: list[tuple[bytes, bytes]], monkeypatch) -> tuple[int, bytes, int]:
    """Status, body and the number of sync_to_async crossings of one GET through the app."""
    crossings = 0
    original = sync.SyncToAsync.__call__

    async def counted(self, *args, **kwargs):
        nonlocal crossings
        crossings += 1
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(sync.SyncToAsync, "__call__", counted)
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"localhost"), *headers],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    sent: list[dict] = []
    requested = False

    async def receive():
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.Event().wait()  # no disconnect while the response is made
        raise AssertionError("unreachable")

    async def send(message):
        sent.append(message)

    # In a thread of its own: the test itself runs inside pytest's (sync) thread.
    result: list = []
    thread = threading.Thread(
        target=lambda: result.append(asyncio.run(application(scope, receive, send)))
    )
    thread.start()
    thread.join(60)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, body, crossings


def test_a_request_enters_its_thread_once_besides_the_signals(monkeypatch, acme):
    status, body, crossings = _call(
        "/api/v1/runs", [(b"authorization", f"Bearer {acme.key}".encode())], monkeypatch
    )
    assert status == 200, body
    assert "results" in json.loads(body)
    # request_started; the middleware chain with the view; the rest of the chain after
    # ServeStatic's middleware (async only: Django runs it on the loop); the response's close.
    assert crossings == 4


def test_an_error_response_still_goes_through_the_whole_chain(monkeypatch, acme):
    status, body, crossings = _call("/api/v1/runs", [], monkeypatch)
    assert status == 401
    assert json.loads(body)["error"]["code"] == "unauthenticated"
    # An error adds only the access log's line (Django logs a 4xx in a thread of its own).
    assert crossings <= 5
