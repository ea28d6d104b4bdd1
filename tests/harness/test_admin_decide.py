"""An operator reads a held call on its run's page and decides it there; a failed or stopped
run says why before anything else; the run list reads at a glance; masked values show as
masked."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client

from harness.console.reads import format_money, mark_masked
from harness.models import Run, RunStatus, StaffTenantGrant, Tenant
from policy import services as policy
from policy.models import ApprovalStatus, ToolApproval
from tests.runs import TICKET, call, scripted_agent, start
from traces.models import Span

ESCALATION = {"ticket_id": TICKET, "action": "escalate", "escalate_reason": "call 13812345678"}


def staff(username: str, tenant: str, *codenames: str, approver: bool = True) -> Client:
    """A staff user granted ``tenant`` who may view everything plus ``codenames``; with
    ``approver``, the tenant's policy lets them decide approvals (``approval:decide``)."""
    user = get_user_model().objects.create_user(username, password="pw", is_staff=True)
    permissions = Permission.objects.filter(codename__startswith="view_")
    user.user_permissions.set([*permissions, *Permission.objects.filter(codename__in=codenames)])
    StaffTenantGrant.objects.create(user=user, tenant=Tenant.objects.get(slug=tenant))
    if approver:
        policy.assign_role(tenant, username, "approver", actor="tests")
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def held_run(acme, agent_dir) -> Run:
    """A run of acme holding an escalation (the default escalation rule asks a human)."""
    agent = scripted_agent(agent_dir, [call("update_ticket", **ESCALATION), {"text": "Done."}])
    response = start(acme, agent, user="bob")
    assert response.json()["status"] == "awaiting_approval", response.content
    return Run.objects.get(id=response.json()["id"])


def page_of(client: Client, run: Run) -> str:
    response = client.get(f"/admin/harness/run/{run.pk}/change/")
    assert response.status_code == 200
    return response.content.decode()


def test_a_held_run_shows_its_call_the_rule_the_time_left_and_approve_deny(held_run):
    page = page_of(staff("olga", "acme", "change_toolapproval"), held_run)

    held = page[page.index('id="held-calls"') :]
    assert page.index('id="held-calls"') < page.index("<fieldset")  # before the metadata
    assert "update_ticket" in held
    assert "default-escalation-approval" in held
    assert " left</span>" in held
    assert 'value="approve"' in held
    assert 'value="deny"' in held
    assert 'name="changes"' in held  # approve with edits
    # The arguments as held: masked, and marked as masked.
    assert "13812345678" not in page
    assert '<mark class="masked" title="masked value">138****5678</mark>' in held


def test_approving_on_the_page_records_the_decision_as_the_approvals_page_does(held_run):
    operator = staff("olga", "acme", "change_toolapproval")
    approval = ToolApproval.objects.get(run_id=str(held_run.id))

    response = operator.post(
        f"/admin/harness/run/{held_run.pk}/decide/",
        {
            "call_id": approval.call_id,
            "arguments_sha256": approval.arguments_sha256,
            "decision": "approve",
        },
    )

    assert response.status_code == 302
    assert response["Location"] == f"/admin/harness/run/{held_run.pk}/change/"
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.APPROVED
    assert approval.decided_by == "olga"
    assert approval.comment == "decided in the admin"
    span = Span.objects.get(request_id=held_run.request_id, kind="approval")
    assert span.attributes["decided_by"] == "olga"
    after = page_of(operator, held_run)
    assert 'id="held-calls"' not in after
    assert "Approved call_1_1" in after


def test_denying_on_the_page_keeps_the_comment(held_run):
    operator = staff("olga", "acme", "change_toolapproval")
    approval = ToolApproval.objects.get(run_id=str(held_run.id))

    operator.post(
        f"/admin/harness/run/{held_run.pk}/decide/",
        {
            "call_id": approval.call_id,
            "arguments_sha256": approval.arguments_sha256,
            "decision": "deny",
            "comment": "not without the customer's consent",
        },
    )

    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.DENIED
    assert approval.comment == "not without the customer's consent"


def test_a_decision_on_other_arguments_is_refused_with_its_code(held_run):
    operator = staff("olga", "acme", "change_toolapproval")
    approval = ToolApproval.objects.get(run_id=str(held_run.id))

    response = operator.post(
        f"/admin/harness/run/{held_run.pk}/decide/",
        {"call_id": approval.call_id, "arguments_sha256": "0" * 64, "decision": "approve"},
        follow=True,
    )

    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.PENDING
    assert "Not decided (approval_arguments_mismatch)" in response.content.decode()


def test_a_staff_user_outside_the_tenants_policy_cannot_decide(held_run):
    operator = staff("olga", "acme", "change_toolapproval", approver=False)
    approval = ToolApproval.objects.get(run_id=str(held_run.id))

    response = operator.post(
        f"/admin/harness/run/{held_run.pk}/decide/",
        {
            "call_id": approval.call_id,
            "arguments_sha256": approval.arguments_sha256,
            "decision": "approve",
        },
        follow=True,
    )

    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.PENDING
    assert "Not decided (permission_denied)" in response.content.decode()


def test_view_only_staff_see_the_held_call_but_get_no_buttons_and_a_403(held_run):
    viewer = staff("vic", "acme")
    approval = ToolApproval.objects.get(run_id=str(held_run.id))

    page = page_of(viewer, held_run)
    response = viewer.post(
        f"/admin/harness/run/{held_run.pk}/decide/",
        {
            "call_id": approval.call_id,
            "arguments_sha256": approval.arguments_sha256,
            "decision": "approve",
        },
    )

    assert "default-escalation-approval" in page
    assert 'value="approve"' not in page
    assert response.status_code == 403
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.PENDING


def test_staff_of_another_tenant_cannot_decide_even_with_the_permission(held_run, globex):
    outsider = staff("gus", "globex", "change_toolapproval")
    approval = ToolApproval.objects.get(run_id=str(held_run.id))

    response = outsider.post(
        f"/admin/harness/run/{held_run.pk}/decide/",
        {
            "call_id": approval.call_id,
            "arguments_sha256": approval.arguments_sha256,
            "decision": "approve",
        },
    )

    assert response.status_code == 403
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.PENDING


def test_deciding_needs_a_post(held_run):
    operator = staff("olga", "acme", "change_toolapproval")

    assert operator.get(f"/admin/harness/run/{held_run.pk}/decide/").status_code == 405


def test_a_failed_run_says_why_before_its_metadata(acme):
    acme.post("/api/v1/runs", {"agent": "ticket-assistant", "user": "bob", "input": "hello"})
    run = Run.objects.get()
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.BUDGET_EXCEEDED,
        stop_reason="budget_exceeded",
        status_detail="The run's token budget (100) is spent.",
    )

    page = page_of(staff("olga", "acme"), run)

    top = page.index('id="run-problem"')
    assert top < page.index("<fieldset")
    assert top < page.index("Deadline at")
    assert "The run&#x27;s token budget (100) is spent." in page[top:]
    assert 'class="run-status status-failed"' in page[top:]


def test_a_runs_fields_open_on_the_run_not_on_the_engines_bookkeeping(acme):
    acme.post("/api/v1/runs", {"agent": "ticket-assistant", "user": "bob", "input": "hello"})
    run = Run.objects.get()
    Run.objects.filter(pk=run.pk).update(status=RunStatus.FAILED, status_detail="It broke.")

    page = page_of(staff("olga", "acme"), run)

    fields = page[page.index("<fieldset") :]
    labels = re.findall(r"<label>([^<:]+):</label>", fields)
    assert labels[:4] == ["Request id", "Tenant", "Agent", "User id"], labels
    assert "Tool call counts" in labels
    assert "Lease token" not in labels
    assert "Request digest" not in labels


def test_every_field_of_a_run_is_placed_on_its_page_or_left_out_on_purpose():
    # A field the admin does not name would be shown first, above the run's own fields.
    from harness.console.admin import RunAdmin

    editable = {f.name for f in Run._meta.concrete_fields if f.editable and not f.primary_key}

    assert editable - {*RunAdmin.readonly_fields, *RunAdmin.exclude} == set()


def test_a_succeeded_run_has_no_problem_banner(acme):
    acme.post("/api/v1/runs", {"agent": "ticket-assistant", "user": "bob", "input": "hello"})

    page = page_of(staff("olga", "acme"), Run.objects.get())

    assert 'id="run-problem"' not in page


def test_the_run_list_shows_a_badge_the_masked_input_duration_tokens_and_money(acme, settings):
    settings.HARNESS_ROUTES = {"scripted:demo": {"price": {"input": 2.5, "output": 10.0}}}
    text = "Why T-20250318-007? Call me on 13812345678, it has been a week already, please help"
    acme.post("/api/v1/runs", {"agent": "ticket-assistant", "user": "bob", "input": text})
    run = Run.objects.get()

    listing = staff("olga", "acme").get("/admin/harness/run/").content.decode()

    assert '<span class="run-status status-ok" data-status="succeeded">Succeeded</span>' in listing
    assert '<mark class="masked" title="masked value">138****5678</mark>' in listing
    assert "13812345678" not in listing
    assert "it has been a week already, please help" not in listing.split('title="')[0]
    assert f">{format_money(run.cost_usd)}<" in listing
    assert f">{run.total_tokens:,}<" in listing
    assert " ms<" in listing or " s<" in listing


@pytest.mark.parametrize(
    ("amount", "shown"),
    [
        (Decimal("0"), "$0"),
        (Decimal("0.00896000"), "$0.0090"),
        (Decimal("0.00001"), "<$0.0001"),
        (Decimal("12.345"), "$12.35"),
    ],
)
def test_money_is_shown_as_money(amount, shown):
    assert format_money(amount) == shown


def test_masked_values_are_marked_and_ids_are_not():
    text = (
        "T-20250318-007 for 138****5678, z***@example.com, [national_id:1a2b3c4d], "
        "****1111, Z**** W**, [api_key removed] <b>"
    )

    marked = str(mark_masked(text))

    for value in [
        "138****5678",
        "z***@example.com",
        "[national_id:1a2b3c4d]",
        "****1111",
        "Z**** W**",
        "[api_key removed]",
    ]:
        assert f'<mark class="masked" title="masked value">{value}</mark>' in marked
    assert marked.startswith("T-20250318-007 for ")
    assert "&lt;b&gt;" in marked


def test_the_honesty_instruction_is_shown_once_and_span_json_is_compact(acme):
    acme.post(
        "/api/v1/runs", {"agent": "ticket-assistant", "user": "bob", "input": "T-20250318-007?"}
    )

    page = page_of(staff("olga", "acme"), Run.objects.get())

    first_step = page[page.index('id="step-1"') : page.index('id="step-2"')]
    assert first_step.count("succeeded unless its tool call succeeded") == 1
    # Short JSON on one line: arguments read as {"ticket_id": "T-20250318-007"}.
    assert "{&quot;ticket_id&quot;: &quot;T-20250318-007&quot;}" in first_step


def test_the_tenant_column_is_listed_only_for_those_who_see_several_tenants(acme):
    acme.post("/api/v1/runs", {"agent": "ticket-assistant", "user": "bob", "input": "hello"})
    superuser = Client()
    superuser.force_login(get_user_model().objects.get(username="admin"))

    one_tenant = staff("olga", "acme").get("/admin/harness/run/").content.decode()
    every_tenant = superuser.get("/admin/harness/run/").content.decode()

    assert "column-tenant" not in one_tenant
    assert "column-tenant" in every_tenant


def test_approving_with_edits_on_the_page_records_both_versions(held_run):
    operator = staff("olga", "acme", "change_toolapproval")
    approval = ToolApproval.objects.get(run_id=str(held_run.id))

    response = operator.post(
        f"/admin/harness/run/{held_run.pk}/decide/",
        {
            "call_id": approval.call_id,
            "arguments_sha256": approval.arguments_sha256,
            "decision": "approve",
            "changes": '{"escalate_reason": "customer asked for a refund"}',
        },
        follow=True,
    )

    approval.refresh_from_db()
    assert response.status_code == 200
    assert "Approved with edits" in response.content.decode()
    assert approval.status == ApprovalStatus.APPROVED
    assert approval.decided_by == "olga"
    assert approval.edited_arguments["escalate_reason"] == "customer asked for a refund"
    assert approval.arguments["escalate_reason"] == "call 138****5678"  # as held, masked


def test_a_long_runs_steps_fold_and_it_opens_on_its_last_step(acme, agent_dir):
    tickets = ["T-20250318-007", "T-20250320-011", "T-20250321-002", "T-20250319-001"]
    lookups = [call("get_ticket", ticket_id=t) for t in tickets + tickets[:2]]
    long = scripted_agent(agent_dir, [*lookups, {"text": "Looked them up."}], max_steps=10)
    assert start(acme, long, user="bob").json()["status"] == "succeeded"
    acme.post("/api/v1/runs", {"agent": "ticket-assistant", "user": "bob", "input": "hello"})
    operator = staff("olga", "acme")
    long_run = Run.objects.get(agent=long)
    short_run = Run.objects.get(agent="ticket-assistant")

    long_page = page_of(operator, long_run)
    short_page = page_of(operator, short_run)

    steps = re.findall(r'<details class="step"( open)?>', long_page)
    assert len(steps) == long_run.steps == 7
    # Folded, but for the last step and step 4, the run's first problem (globex's ticket is
    # not found for acme): the page opens on it.
    assert steps == [""] * 3 + [" open"] + [""] * 2 + [" open"]
    assert "expand all steps" in long_page
    assert "collapse all" in long_page
    short_steps = re.findall(r'<details class="step"( open)?>', short_page)
    assert short_steps
    assert short_steps == [" open"] * len(short_steps)  # a short run shows every step
