"""The shipped ASGI application does a request's sync work in one hop, on threads kept
between requests.

Django's own handler ran each middleware's hooks through ``sync_to_async`` (about a dozen
crossings between the event loop and the request's thread per request) on a thread made for
that request, with a database connection object of its own, which made the shipped ASGI server
slower than threaded WSGI on sync runs (issue 26). These tests drive
``harness.asgi.application`` itself with ASGI messages.
"""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from asgiref import sync
from django.core import signals
from django.db import connections
from django.http import HttpResponse
from django.test import RequestFactory, override_settings
from servestatic.middleware import ServeStaticMiddleware

from harness.api.views import RunListView
from harness.asgi import application
from harness.static_files import StaticFilesMiddleware

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


def _bearer(acme) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", f"Bearer {acme.key}".encode())]


def test_a_request_enters_a_thread_once(monkeypatch, acme):
    status, body, crossings = _call("/api/v1/runs", _bearer(acme), monkeypatch)
    assert status == 200, body
    assert "results" in json.loads(body)
    # request_started, the middleware chain with the view, the response's close and
    # request_finished: one hop (Django's handler made four, its async chain sixteen).
    assert crossings == 1


def test_an_error_response_still_goes_through_the_whole_chain_in_one_hop(monkeypatch, acme):
    status, body, crossings = _call("/api/v1/runs", [], monkeypatch)
    assert status == 401
    assert json.loads(body)["error"]["code"] == "unauthenticated"
    assert crossings == 1


@pytest.fixture
def request_threads():
    """Per request: the threads and connection objects its signals saw, in order."""
    seen: list[tuple[str, int, int]] = []

    def started(**_):
        seen.append(("started", threading.get_ident(), id(connections["default"])))

    def finished(**_):
        seen.append(("finished", threading.get_ident(), id(connections["default"])))

    signals.request_started.connect(started)
    signals.request_finished.connect(finished)
    yield seen
    signals.request_started.disconnect(started)
    signals.request_finished.disconnect(finished)


def test_a_request_thread_and_its_connection_object_serve_the_next_request(
    monkeypatch, acme, request_threads
):
    for _ in range(3):
        status, body, _ = _call("/api/v1/runs", _bearer(acme), monkeypatch)
        assert status == 200, body
    assert [kind for kind, _, _ in request_threads] == ["started", "finished"] * 3
    # One after another: each request found the last one's thread idle, and its connection
    # object (Django's are per thread) with it.
    assert len({thread for _, thread, _ in request_threads}) == 1
    assert len({wrapper for _, _, wrapper in request_threads}) == 1
    assert threading.get_ident() not in {thread for _, thread, _ in request_threads}


def test_request_finished_runs_on_the_thread_whose_connection_the_view_used(
    monkeypatch, acme, request_threads
):
    used: list[int] = []
    monkeypatch.setattr(RunListView, "get", _recording(RunListView.get, used))
    status, body, _ = _call("/api/v1/runs", _bearer(acme), monkeypatch)
    assert status == 200, body
    assert [thread for _, thread, _ in request_threads] == [used[0], used[0]]


def _recording(view, used: list[int]):
    def recorded(self, request, *args, **kwargs):
        used.append(threading.get_ident())
        return view(self, request, *args, **kwargs)

    return recorded


def test_api_requests_never_reach_servestatic_and_static_files_are_served(monkeypatch, acme):
    asked: list[str] = []
    original = ServeStaticMiddleware.__call__

    async def counted(self, request):
        asked.append(request.path_info)
        return await original(self, request)

    monkeypatch.setattr(ServeStaticMiddleware, "__call__", counted)
    status, body, _ = _call("/api/v1/runs", _bearer(acme), monkeypatch)
    assert status == 200, body
    assert asked == []

    # A file (from the apps' folders, as under DEBUG: the tests collect no static files).
    passed_on: list[str] = []

    def rest_of_the_chain(request):
        passed_on.append(request.path_info)
        return HttpResponse("from the view")

    with override_settings(SERVESTATIC_USE_FINDERS=True):
        middleware = StaticFilesMiddleware(rest_of_the_chain)
    served = middleware(RequestFactory().get("/static/harness/favicon.svg"))
    assert served.status_code == 200
    assert served["Content-Type"].startswith("image/svg")
    assert asked == ["/static/harness/favicon.svg"]
    assert passed_on == []
    assert middleware(RequestFactory().get("/api/v1/runs")).content == b"from the view"
    assert asked == ["/static/harness/favicon.svg"]
    assert passed_on == ["/api/v1/runs"]
