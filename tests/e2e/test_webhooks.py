"""Signed callbacks delivered by a real worker to a real local receiver."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from standardwebhooks.webhooks import Webhook

from harness.models import DeliveryStatus, Tenant, WebhookDelivery
from tests.runs import wait_until
from tests.support.servers import free_port

pytestmark = pytest.mark.worker


class Receiver:
    """A webhook receiver on loopback that verifies every signature as a customer would."""

    def __init__(self, secret: str, port: int = 0) -> None:
        self.secret = secret
        self.received: list[dict] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["content-length"]))
                try:
                    payload = Webhook(receiver.secret).verify(body, dict(self.headers))
                except Exception:
                    self.send_response(401)
                    self.end_headers()
                    return
                receiver.received.append({"id": self.headers["webhook-id"], "payload": payload})
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/harness"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def start_async_run(client, callback_url):
    response = client.post(
        "/api/v1/runs",
        {
            "agent": "ticket-assistant",
            "user": "bob",
            "input": "Why has ticket T-20250318-007 not been handled?",
            "mode": "async",
            "callback_url": callback_url,
        },
    )
    assert response.status_code == 202
    return response.json()


def test_an_async_run_calls_back_with_a_valid_signature(acme, celery_worker):
    receiver = Receiver(Tenant.objects.get(slug="acme").webhook_secret)
    try:
        run = start_async_run(acme, receiver.url)

        wait_until(lambda: receiver.received, timeout_s=60)
    finally:
        receiver.close()

    [event] = receiver.received
    assert event["payload"]["type"] == "run.succeeded"
    assert event["payload"]["data"]["run_id"] == run["id"]
    assert "agent-li" in event["payload"]["data"]["answer"]
    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.attempts, str(delivery.id)) == (
        DeliveryStatus.DELIVERED,
        1,
        event["id"],
    )


def test_a_receiver_that_is_down_then_up_gets_the_event_exactly_once(acme, start_worker):
    port = free_port()
    start_worker(beat=True, env={"HARNESS_SWEEP_INTERVAL_S": "1"})
    run = start_async_run(acme, f"http://127.0.0.1:{port}/hooks/harness")

    wait_until(
        lambda: WebhookDelivery.objects.filter(run_id=run["id"], attempts__gte=1).exists(),
        timeout_s=60,
    )
    receiver = Receiver(Tenant.objects.get(slug="acme").webhook_secret, port=port)
    try:
        wait_until(
            lambda: WebhookDelivery.objects.filter(status=DeliveryStatus.DELIVERED).exists(),
            timeout_s=60,
        )
        time.sleep(2)  # a few more beat ticks: nothing may be sent twice
    finally:
        receiver.close()

    assert len(receiver.received) == 1
    delivery = WebhookDelivery.objects.get()
    attempts = list(delivery.attempt_log.values_list("status_code", "error"))
    assert attempts[0][0] is None
    assert "ConnectError" in attempts[0][1]
    assert attempts[-1] == (204, "")
    assert delivery.attempts == len(attempts) >= 2


def test_a_forged_signature_is_rejected_by_a_receiver(acme):
    secret = Tenant.objects.get(slug="acme").webhook_secret
    body = json.dumps({"type": "run.succeeded"})
    headers = {"webhook-id": "msg_1", "webhook-timestamp": str(int(time.time()))}
    headers["webhook-signature"] = "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="

    with pytest.raises(Exception, match="No matching signature"):
        Webhook(secret).verify(body, headers)


def test_the_default_retry_schedule_spans_more_than_a_day():
    from harness.settings import base

    assert sum(base.HARNESS_WEBHOOK_RETRY_SCHEDULE_S) >= 24 * 3600
