"""The admin console lists runs and shows a run as a timeline of steps."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from harness.models import Run


@pytest.fixture
def operator(demo) -> Client:
    user = get_user_model().objects.get(username="admin")
    client = Client()
    client.force_login(user)
    return client


def test_the_admin_lists_runs_and_shows_a_run_as_a_timeline_of_steps(acme, operator):
    acme.post(
        "/api/v1/runs",
        {"agent": "ticket-assistant", "user": "bob", "input": "Why T-20250318-007?"},
    )
    run = Run.objects.get()

    listing = operator.get("/admin/harness/run/")
    detail = operator.get(f"/admin/harness/run/{run.pk}/change/")

    assert listing.status_code == 200
    assert run.request_id in listing.content.decode()
    assert detail.status_code == 200
    page = detail.content.decode()
    assert re.findall(r'data-step="(\d+)"', page) == ["1", "2", "3", "4"]
    tools = re.findall(r'data-kind="tool_call" data-tool="(\w+)"', page)
    assert tools == ["get_ticket", "update_ticket", "notify_user"]
    checks = re.findall(r'data-kind="policy_check" data-tool="(\w+)"', page)
    assert checks == ["get_ticket", "update_ticket", "notify_user"]
    assert 'by rule <code class="policy-rule">role:member, acme, ticket, read, allow</code>' in page
    assert re.search(r"\(policy v\d+\)", page)
    assert page.count('<details class="model-saw">') == 4
    assert page.count('<details class="tool-io">') == 3
    assert f'<td class="total-tokens">{run.total_tokens}</td>' in page
    assert "RUN ACTIONS: the Replay button" not in page  # a template comment, never rendered


def test_the_timeline_shows_what_the_model_saw_masked(acme, operator):
    acme.post(
        "/api/v1/runs",
        {
            "agent": "ticket-assistant",
            "user": "bob",
            "input": "Why T-20250318-007? Call me on 13812345678.",
        },
    )
    run = Run.objects.get()

    page = operator.get(f"/admin/harness/run/{run.pk}/change/").content.decode()

    assert "138****5678" in page
    assert "13812345678" not in page
    assert "T-20250318-007" in page


def test_runs_cannot_be_edited_or_deleted_in_the_admin(acme, operator):
    acme.post("/api/v1/runs", {"agent": "ticket-assistant", "user": "bob", "input": "hi"})
    run = Run.objects.get()

    response = operator.post(f"/admin/harness/run/{run.pk}/delete/", {"post": "yes"})

    assert response.status_code == 403
    assert Run.objects.filter(pk=run.pk).exists()


def test_an_operator_can_redeliver_a_webhook_from_the_admin(acme, operator):
    from django.utils import timezone

    from harness.models import DeliveryStatus, WebhookDelivery

    acme.post("/api/v1/runs", {"agent": "ticket-assistant", "user": "bob", "input": "hi"})
    run = Run.objects.get()
    delivery = WebhookDelivery.objects.create(
        run=run,
        event_type="run.succeeded",
        url="http://127.0.0.1:9/hook",
        payload={"type": "run.succeeded"},
        status=DeliveryStatus.FAILED,
        attempts=10,
    )

    response = operator.post(
        "/admin/harness/webhookdelivery/",
        {"action": "redeliver_selected", "_selected_action": [str(delivery.pk)]},
    )

    assert response.status_code == 302
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.PENDING
    assert delivery.next_attempt_at <= timezone.now()
    detail = operator.get(f"/admin/harness/webhookdelivery/{delivery.pk}/change/")
    assert detail.status_code == 200
