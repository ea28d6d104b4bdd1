"""The gateway's provider servers, for end-to-end runs through the API; the console's users
and runs for the browser tests."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from harness.models import Run, StaffTenantGrant, Tenant
from tests.gateway.conftest import (  # noqa: F401  (fixtures)
    _fresh_rate_limit_buckets,
    anthropic_server,
    openai_server,
    routes,
)


@pytest.fixture
def operator(demo) -> tuple[str, str]:
    """A staff user granted acme who may view everything and decide approvals there (the
    admin permission, and approval:decide in acme's policy)."""
    from policy import services as policy

    user = get_user_model().objects.create_user("olga", password="olga-pw", is_staff=True)
    user.user_permissions.set(
        [
            *Permission.objects.filter(codename__startswith="view_"),
            Permission.objects.get(codename="change_toolapproval"),
        ]
    )
    StaffTenantGrant.objects.create(user=user, tenant=Tenant.objects.get(slug="acme"))
    policy.assign_role("acme", "olga", "approver", actor="tests")
    return "olga", "olga-pw"


@pytest.fixture
def varied_runs(acme, agent_dir, settings) -> dict[str, Run]:
    """Runs of acme as an operator meets them: succeeded, held for approval, failed."""
    from tests.runs import TICKET, call, scripted_agent, start

    settings.HARNESS_ROUTES = {"scripted:demo": {"price": {"input": 2.5, "output": 10.0}}}
    escalation = {
        "ticket_id": TICKET,
        "action": "escalate",
        "escalate_reason": "charged twice; customer on 13812345678",
    }
    agent = scripted_agent(
        agent_dir,
        [call("get_ticket", ticket_id=TICKET), call("update_ticket", **escalation)],
    )
    # Agent files are read once per set of folders: the agent is written before any run.
    demo_input = "T-20250318-007 为什么没人处理? Call 13812345678"
    acme.post("/api/v1/runs", {"agent": "ticket-assistant", "user": "bob", "input": demo_input})
    held = start(acme, agent, user="bob", input="Escalate T-20250318-007: customer charged twice")
    assert held.status_code == 202, held.content
    failed = acme.post(
        "/api/v1/runs", {"agent": "ticket-assistant", "user": "bob", "input": "Why T-20250320-011?"}
    )
    Run.objects.filter(id=failed.json()["id"]).update(
        status="budget_exceeded",
        stop_reason="budget_exceeded",
        status_detail="The run's token budget (2000 tokens) is spent.",
    )
    return {
        "held": Run.objects.get(id=held.json()["id"]),
        "failed": Run.objects.get(id=failed.json()["id"]),
    }
