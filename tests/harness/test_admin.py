"""The admin console lists runs and shows a run's spans in order."""

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


def test_the_admin_lists_runs_and_shows_a_runs_spans_in_order(acme, operator):
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
    kinds = re.findall(r'<tr class="span-(\w+)">', page)
    assert kinds[0] == "agent_session"
    assert kinds[-1] == "action_response"
    names = re.findall(r"<td>(get_ticket|update_ticket|notify_user)</td>", page)
    assert names == ["get_ticket", "update_ticket", "notify_user"]


def test_runs_cannot_be_edited_or_deleted_in_the_admin(acme, operator):
    acme.post("/api/v1/runs", {"agent": "ticket-assistant", "user": "bob", "input": "hi"})
    run = Run.objects.get()

    response = operator.post(f"/admin/harness/run/{run.pk}/delete/", {"post": "yes"})

    assert response.status_code == 403
    assert Run.objects.filter(pk=run.pk).exists()
