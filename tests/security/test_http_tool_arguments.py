"""Finding 9: an HTTP tool's URL arguments are exactly one path segment each (``.``/``..``
refused), and a static ``?query`` of the URL template is kept for GET and DELETE."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest

from tools.errors import ToolHandlerError
from tools.http_tools import HttpHandler


@pytest.fixture
def service():
    """An order service on loopback that answers every request with the path it received."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            seen.append(self.path)
            body = json.dumps({"path": self.path}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_DELETE = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()


CONTEXT = SimpleNamespace(idempotency_key="run:call", deadline=None)


@pytest.mark.parametrize("value", ["..", ".", ""])
def test_dot_segments_are_refused(service, value):
    base, seen = service
    handler = HttpHandler.from_spec(
        "get_order", {"method": "GET", "url": f"{base}/orders/{{order_id}}/lines"}
    )
    with pytest.raises(ToolHandlerError) as caught:
        handler({"order_id": value}, CONTEXT)
    assert caught.value.code == "invalid_arguments"
    assert seen == []


def test_an_argument_is_exactly_one_segment_whatever_it_holds(service):
    base, seen = service
    handler = HttpHandler.from_spec(
        "get_order", {"method": "GET", "url": f"{base}/orders/{{order_id}}"}
    )
    handler({"order_id": "../admin/x?y=1#z"}, CONTEXT)
    handler({"order_id": "%2e%2e"}, CONTEXT)
    assert seen == ["/orders/..%2Fadmin%2Fx%3Fy%3D1%23z", "/orders/%252e%252e"]


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_the_templates_own_query_is_kept(service, method):
    base, seen = service
    handler = HttpHandler.from_spec(
        "list_orders",
        {"method": method, "url": f"{base}/orders/{{customer}}?view=full&limit=5"},
    )
    handler({"customer": "C-1", "state": "open"}, CONTEXT)
    assert seen == ["/orders/C-1?view=full&limit=5&state=open"]
