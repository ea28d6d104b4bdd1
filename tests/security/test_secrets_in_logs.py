"""Finding 7: no secret or unmasked personal data in any log line, at any level.

A run calls an HTTP tool whose URL path and header carry a secret, for an input with a phone
number and an e-mail address, and calls back a URL whose query carries a token; every log line
of it, captured at DEBUG (httpx and httpcore included), is scanned."""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote

import pytest

from harness.models import WebhookDelivery
from harness.webhooks import deliver
from tests.factories import write_agent, write_script, write_tool

SECRET = "tok/en+9f2c41d7e8b3"  # has characters a URL percent-encodes
CALLBACK_TOKEN = "cb-7d1e0c5a9b"
PHONE, EMAIL = "13812345678", "zhang.wei@example.com"


@pytest.fixture
def orders_service():
    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            body = json.dumps({"data": {"state": "shipped", "phone": PHONE}}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_run_using_secrets_logs_none_of_them(
    acme, agent_dir, tmp_path, settings, caplog, orders_service
):
    settings.HARNESS_SECRETS = {"ORDERS_TOKEN": SECRET}
    tool_dir = tmp_path / "tools"
    tool_dir.mkdir()
    settings.HARNESS_TOOL_DIRS = [*settings.HARNESS_TOOL_DIRS, tool_dir]
    tool = write_tool(
        tool_dir,
        parameters={
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
            "additionalProperties": False,
        },
        handler={
            "kind": "http",
            "method": "GET",
            "url": orders_service + "/${secret:ORDERS_TOKEN}/orders/{order_id}",
            "headers": {"Authorization": "Bearer ${secret:ORDERS_TOKEN}"},
            "response": {"pointer": "/data"},
        },
    )
    script = write_script(
        tmp_path,
        [
            {"tool_calls": [{"name": tool["name"], "arguments": {"order_id": "O-1"}}]},
            {"text": f"Order O-1 shipped; I will call {PHONE}."},
        ],
    )
    agent = write_agent(agent_dir, model=f"scripted:{script}", tools=[tool["name"]])
    for name in ("", "httpx", "httpcore"):
        caplog.set_level(logging.DEBUG, logger=name or None)

    response = acme.post(
        "/api/v1/runs",
        {
            "agent": agent["name"],
            "user": "bob",
            "input": f"Where is order O-1? Call me on {PHONE} or write to {EMAIL}.",
            "callback_url": f"{orders_service}/hooks?token={CALLBACK_TOKEN}",
        },
    )
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "succeeded"
    for delivery in WebhookDelivery.objects.all():
        deliver(str(delivery.id))
    logging.getLogger("tests").error("a handler failed for %s", f"{orders_service}/{SECRET}/x")

    text = caplog.text + "\n".join(str(r.exc_text or "") for r in caplog.records)
    assert len(caplog.records) > 3  # the scan saw real log lines
    for clear in (SECRET, quote(SECRET, safe=""), quote(SECRET), CALLBACK_TOKEN, PHONE, EMAIL):
        assert clear not in text, f"{clear!r} was logged"
