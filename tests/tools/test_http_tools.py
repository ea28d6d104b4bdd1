"""HTTP tools against a real local server started by the test."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.factories import write_tool

SECRET = "s3cret-token-value"
TICKET_PARAMETERS = {
    "type": "object",
    "properties": {
        "ticket_id": {"type": "string"},
        "verbose": {"type": "boolean"},
        "include": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["ticket_id"],
    "additionalProperties": False,
}


class Service(BaseHTTPRequestHandler):
    """A small business service: it records every request it receives."""

    received: list[dict[str, Any]]
    stop: threading.Event
    busy_answers: list[int]

    def do_GET(self) -> None:
        self._record(b"")
        path = self.path.split("?", 1)[0]
        if path.startswith("/tickets/"):
            ticket = path.removeprefix("/tickets/")
            self._json(200, {"data": {"id": ticket, "state": "open"}, "meta": {"took_ms": 3}})
        elif path == "/broken":
            self._send(500, "text/plain", b"Internal Server Error: stack at db.py line 7")
        elif path == "/slow":
            self.stop.wait(5)
            self._json(200, {"late": True})
        elif path == "/html":
            self._send(200, "text/html", b"<html><body>Down for maintenance</body></html>")
        elif path == "/busy":
            status = self.busy_answers.pop(0) if self.busy_answers else 200
            self._json(status, {"status": status})
        else:
            self._json(404, {"error": "no such page"})

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._record(body)
        self._json(201, {"ticket": {"id": "T-1", **json.loads(body)}, "request": "r-9"})

    def _record(self, body: bytes) -> None:
        self.received.append(
            {
                "method": self.command,
                "path": self.path,
                "headers": dict(self.headers),
                "body": json.loads(body) if body else None,
            }
        )

    def _json(self, status: int, data: Any) -> None:
        self._send(status, "application/json", json.dumps(data).encode())

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def service():
    stop = threading.Event()
    handler = type(
        "RecordingService", (Service,), {"received": [], "stop": stop, "busy_answers": [503]}
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    server.base_url = f"http://127.0.0.1:{server.server_port}"
    server.received = handler.received
    yield server
    stop.set()
    server.shutdown()
    server.server_close()


@pytest.fixture
def crm_secret(settings):
    settings.HARNESS_SECRETS = {"CRM_TOKEN": SECRET}


def http_tool(tool_dir, handler, **overrides):
    return write_tool(tool_dir, handler={"kind": "http", **handler}, **overrides)["name"]


def test_a_get_tool_fills_the_url_sends_the_secret_and_returns_the_json_at_its_pointer(
    run_script, tool_dir, service, crm_secret
):
    name = http_tool(
        tool_dir,
        {
            "method": "GET",
            "url": service.base_url + "/tickets/{ticket_id}",
            "headers": {"Authorization": "Bearer ${secret:CRM_TOKEN}"},
            "response": {"pointer": "/data"},
        },
        parameters=TICKET_PARAMETERS,
    )

    done = run_script(
        [
            {
                "name": name,
                "arguments": {"ticket_id": "T-7", "verbose": True, "include": ["notes", "log"]},
            }
        ],
        tools=[name],
    )

    assert done.tool_results[0]["result"] == {"id": "T-7", "state": "open"}
    [request] = service.received
    assert request["path"] == "/tickets/T-7?verbose=true&include=notes&include=log"
    assert request["headers"]["Authorization"] == f"Bearer {SECRET}"
    assert request["headers"]["Idempotency-Key"] == f"{done.run['id']}:call_1_1"
    assert SECRET not in json.dumps(done.trace)


def test_an_argument_cannot_change_the_path_it_is_placed_in(
    run_script, tool_dir, service, crm_secret
):
    name = http_tool(
        tool_dir,
        {"method": "GET", "url": service.base_url + "/tickets/{ticket_id}"},
        parameters=TICKET_PARAMETERS,
    )

    run_script([{"name": name, "arguments": {"ticket_id": "../admin?x=1#"}}], tools=[name])

    assert service.received[0]["path"] == "/tickets/..%2Fadmin%3Fx%3D1%23"


def test_a_post_tool_sends_the_other_arguments_as_json_and_maps_response_fields(
    run_script, tool_dir, service
):
    parameters = {
        "type": "object",
        "properties": {"title": {"type": "string"}, "priority": {"enum": ["low", "high"]}},
        "required": ["title"],
    }
    name = http_tool(
        tool_dir,
        {
            "method": "POST",
            "url": service.base_url + "/tickets",
            "idempotency_header": "X-Request-Key",
            "response": {"fields": {"ticket_id": "/ticket/id", "priority": "/ticket/priority"}},
        },
        parameters=parameters,
        idempotent=False,
        concurrency_safe=False,
    )

    done = run_script(
        [{"name": name, "arguments": {"title": "Refund", "priority": "high"}}], tools=[name]
    )

    assert done.tool_results[0]["result"] == {"ticket_id": "T-1", "priority": "high"}
    [request] = service.received
    assert request["body"] == {"title": "Refund", "priority": "high"}
    assert request["headers"]["X-Request-Key"] == f"{done.run['id']}:call_1_1"
    assert "Idempotency-Key" not in request["headers"]


def test_a_500_answer_is_an_http_error_for_the_model(run_script, tool_dir, service):
    name = http_tool(tool_dir, {"method": "GET", "url": service.base_url + "/broken"})

    done = run_script([{"name": name, "arguments": {}}], tools=[name])

    assert done.run["status"] == "succeeded"
    error = done.tool_results[0]["error"]
    assert error["code"] == "http_error"
    assert error["details"] == {
        "status": 500,
        "body": "Internal Server Error: stack at db.py line 7",
    }
    assert len(service.received) == 1  # a 500 is not transient: no retry


def test_a_service_that_does_not_answer_in_time_is_a_timeout(run_script, tool_dir, service):
    name = http_tool(tool_dir, {"method": "GET", "url": service.base_url + "/slow"}, timeout_s=0.3)

    done = run_script([{"name": name, "arguments": {}}], tools=[name])

    assert done.run["status"] == "succeeded"
    assert done.tool_results[0]["error"]["code"] == "timeout"


def test_a_body_that_is_not_json_is_an_invalid_response(run_script, tool_dir, service):
    name = http_tool(tool_dir, {"method": "GET", "url": service.base_url + "/html"})

    done = run_script([{"name": name, "arguments": {}}], tools=[name])

    error = done.tool_results[0]["error"]
    assert error["code"] == "invalid_response"
    assert error["details"] == {
        "status": 200,
        "content_type": "text/html",
        "body": "<html><body>Down for maintenance</body></html>",
    }


def test_a_response_without_the_pointed_part_is_an_invalid_response(run_script, tool_dir, service):
    name = http_tool(
        tool_dir,
        {"method": "GET", "url": service.base_url + "/tickets/T-1", "response": {"pointer": "/x"}},
    )

    done = run_script([{"name": name, "arguments": {}}], tools=[name])

    error = done.tool_results[0]["error"]
    assert (error["code"], error["details"]) == ("invalid_response", {"pointer": "/x"})


def test_a_503_is_retried_for_an_idempotent_tool(run_script, tool_dir, service):
    name = http_tool(tool_dir, {"method": "GET", "url": service.base_url + "/busy"})

    done = run_script([{"name": name, "arguments": {}}], tools=[name])

    assert done.tool_results[0]["result"] == {"status": 200}
    assert len(service.received) == 2
    keys = {r["headers"]["Idempotency-Key"] for r in service.received}
    assert keys == {f"{done.run['id']}:call_1_1"}


def test_a_503_is_not_retried_for_a_non_idempotent_tool(run_script, tool_dir, service):
    name = http_tool(
        tool_dir,
        {"method": "GET", "url": service.base_url + "/busy"},
        idempotent=False,
        concurrency_safe=False,
    )

    done = run_script([{"name": name, "arguments": {}}], tools=[name])

    assert done.tool_results[0]["error"]["details"]["status"] == 503
    assert len(service.received) == 1


def test_an_unreachable_service_is_an_http_error(run_script, tool_dir, settings):
    settings.HARNESS_TOOL_MAX_RETRIES = 0
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    name = http_tool(tool_dir, {"method": "GET", "url": f"http://127.0.0.1:{port}/x"})

    done = run_script([{"name": name, "arguments": {}}], tools=[name])

    error = done.tool_results[0]["error"]
    assert error["code"] == "http_error"
    assert "could not be reached (ConnectError)" in error["message"]


def test_a_missing_secret_fails_the_call_without_a_request(run_script, tool_dir, service):
    name = http_tool(
        tool_dir,
        {
            "method": "GET",
            "url": service.base_url + "/tickets/T-1",
            "headers": {"Authorization": "Bearer ${secret:CRM_TOKEN}"},
        },
    )

    done = run_script([{"name": name, "arguments": {}}], tools=[name])

    error = done.tool_results[0]["error"]
    assert error["message"] == f"{name} is not configured: secret CRM_TOKEN is missing."
    assert service.received == []
