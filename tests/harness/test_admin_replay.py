"""Replay and the policy-change preview in the admin console (the browser test drives them
too; these check the rules the browser cannot see)."""

import pytest
from casbin_adapter.models import CasbinRule
from django.contrib.auth import get_user_model
from django.test import Client

from harness.models import Run, RunMessage, StaffTenantGrant, Tenant
from policy.models import PolicyChange, PolicyRule, TenantPolicyVersion
from tests.runs import ADMIN
from traces.services import seal, unseal

DEMO = {"agent": "ticket-assistant", "user": "bob", "input": "Why T-20250318-007?"}


@pytest.fixture
def operator(demo) -> Client:
    client = Client()
    client.force_login(get_user_model().objects.get(username="admin"))
    return client


def test_replay_shows_no_divergence_for_an_unchanged_system(acme, operator):
    acme.post("/api/v1/runs", DEMO)
    run = Run.objects.get()

    page = operator.get(f"/admin/harness/run/{run.pk}/replay/").content.decode()

    assert "No divergence" in page
    assert page.count('class="replay-call"') == 3
    assert page.count(">Same</span>") == 3
    assert '<h2>The final answer: <span class="replay-same">unchanged</span></h2>' in page
    assert 'class="answer-diff"' not in page


def test_a_refused_call_shows_its_coloured_verdict_its_check_and_rule_and_links_to_it(
    acme, operator
):
    acme.post("/api/v1/runs", DEMO)
    run = Run.objects.get()
    rule = {"name": "no-reassign", "kind": "call", "tool": "update_ticket", "effect": "refuse"}
    assert acme.post("/api/v1/policies/rules", rule, **ADMIN).status_code == 201
    rule_pk = PolicyRule.objects.get(tenant="acme", name="no-reassign").pk

    page = operator.get(f"/admin/harness/run/{run.pk}/replay/").content.decode()
    run_page = operator.get(f"/admin/harness/run/{run.pk}/change/").content.decode()

    [row] = [r for r in page.split("<tr")[1:] if 'class="replay-call diverged"' in r]
    then, now = row.split('class="verdict-now"')
    assert 'data-verdict="allowed"' in then
    assert (
        '<span class="run-status verdict-badge status-failed" data-verdict="refused" '
        'title="A check of the decision chain refuses the call: it does not run.">Refused</span>'
    ) in now
    assert ">Call rule</span>" in now
    assert (
        f'<a class="rule-link" href="/admin/policy/policyrule/{rule_pk}/change/">'
        "<code>no-reassign</code></a>"
    ) in now
    assert 'class="run-status divergence-badge status-failed"' in now
    assert ">Now refused</span>" in now
    # The link goes to the call on the run's page, which has the anchor.
    anchor = f"/admin/harness/run/{run.pk}/change/#call-call_2_1"
    assert f'<a class="call-link" href="{anchor}"' in row
    assert '<div class="proposed-call" id="call-call_2_1">' in run_page
    # The honesty guard's note is what today adds to the answer; the rest is kept.
    diff = page.split('<pre class="answer-diff">')[1].split("</pre>")[0]
    assert diff.startswith("<ins>Note: some actions in this run did not complete")
    assert "no-reassign" in diff.split("</ins>")[0]
    assert "<del>" not in diff
    assert diff.endswith("and notified them to follow up.")


def test_an_acl_refusal_names_the_permission_line_that_refused_it_and_links_to_it(acme, operator):
    acme.post("/api/v1/runs", DEMO)
    run = Run.objects.get()
    denied = {"subject": "bob", "scope": "ticket:write", "effect": "deny"}
    assert acme.post("/api/v1/policies/permissions", denied, **ADMIN).status_code == 201
    line = CasbinRule.objects.get(ptype="p", v0="bob", v2="ticket", v3="write", v4="deny")

    page = operator.get(f"/admin/harness/run/{run.pk}/replay/").content.decode()

    now = page.split('class="replay-call diverged"')[1].split('class="verdict-now"')[1]
    assert ">ACL</span>" in now
    assert (
        f'<a class="rule-link" href="/admin/casbin_adapter/casbinrule/{line.pk}/change/" '
        'title="a permission line"><code>bob ticket:write deny</code></a>'
    ) in now
    assert "ticket:write denied by rule bob, acme, ticket, write, deny" in now


def test_arguments_read_differently_today_are_shown_as_a_diff(acme, operator):
    acme.post("/api/v1/runs", DEMO)
    run = Run.objects.get()
    # As if the gateway of the day had read the model's raw text into other arguments.
    row = RunMessage.objects.get(run_id=run.id, index=3)
    message = unseal(row.sealed)
    recorded = message["tool_calls"][0]
    assert recorded["name"] == "update_ticket"
    today = recorded["arguments"]["assignee_id"]
    recorded["arguments"]["assignee_id"] = "<b>agent-wu</b>"
    RunMessage.objects.filter(pk=row.pk).update(sealed=seal(message))

    page = operator.get(f"/admin/harness/run/{run.pk}/replay/").content.decode()

    row_html = page.split('class="replay-call diverged"')[1].split("</tr>")[0]
    assert ">Arguments read differently</span>" in row_html
    diff = row_html.split('<pre class="answer-diff arguments-diff"')[1].split("</pre>")[0]
    assert (
        f"<del>&quot;&lt;b&gt;agent-wu&lt;/b&gt;&quot;,</del><ins>&quot;{today}&quot;,</ins>"
        in (diff)
    )


def test_a_staff_user_cannot_replay_another_tenants_run(acme, demo):
    acme.post("/api/v1/runs", DEMO)
    run = Run.objects.get()
    staff = get_user_model().objects.create_user("globex-staff", password="x", is_staff=True)
    StaffTenantGrant.objects.create(user=staff, tenant=Tenant.objects.get(slug="globex"))
    client = Client()
    client.force_login(staff)

    response = client.get(f"/admin/harness/run/{run.pk}/replay/")

    assert response.status_code in {302, 403, 404}
    assert b"replay-report" not in response.content


def test_the_preview_saves_nothing_until_asked_and_then_records_the_edit(acme, operator):
    acme.post("/api/v1/runs", DEMO)
    version = TenantPolicyVersion.objects.get(tenant="acme").version
    form = {
        "tenant": Tenant.objects.get(slug="acme").pk,
        "op": "add",
        "subject": "bob",
        "scope": "ticket:write",
        "effect": "deny",
        "limit": 5,
    }

    preview = operator.post("/admin/harness/run/preview-policy/", form | {"preview": "1"})

    assert preview.status_code == 200
    assert preview.content.decode().count('class="what-if-change"') == 1
    assert TenantPolicyVersion.objects.get(tenant="acme").version == version
    saved = operator.post("/admin/harness/run/preview-policy/", form | {"save": "1"})
    assert saved.status_code == 302
    change = PolicyChange.objects.order_by("-id").first()
    assert change.actor == "admin"
    assert TenantPolicyVersion.objects.get(tenant="acme").version == version + 1


def test_a_malformed_proposed_change_is_named_in_the_form(acme, operator):
    form = {
        "tenant": Tenant.objects.get(slug="acme").pk,
        "op": "add",
        "subject": "bob",
        "scope": "not a scope",
        "effect": "deny",
        "limit": 5,
        "preview": "1",
    }

    response = operator.post("/admin/harness/run/preview-policy/", form)

    assert response.status_code == 200
    assert "not of the form object:action" in response.content.decode()


def preview(operator: Client, **fields: object) -> str:
    form = {"tenant": Tenant.objects.get(slug="acme").pk, "limit": 5, "preview": "1"} | fields
    response = operator.post("/admin/harness/run/preview-policy/", form)
    assert response.status_code == 200
    return response.content.decode()


def test_the_preview_diff_is_coloured_and_its_runs_are_linked(acme, operator):
    acme.post("/api/v1/runs", DEMO)
    run = Run.objects.get()

    page = preview(
        operator, target="permission", op="add", subject="bob", scope="ticket:write", effect="deny"
    )

    assert '<span class="diff-line diff-added">+ permission  bob  ticket:write  deny</span>' in page
    assert (
        '<span class="diff-line diff-kept">  permission  role:member  ticket:read  allow</span>'
        in page
    )
    assert (
        f'<a class="run-link" href="/admin/harness/run/{run.pk}/change/">{run.request_id}</a>'
        in (page)
    )


def test_the_preview_covers_taking_a_role_away(acme, operator):
    acme.post("/api/v1/runs", DEMO)

    page = preview(operator, target="role", op="remove", user="bob", role="member")

    assert '<span class="diff-line diff-removed">- role        bob  member</span>' in page
    # Without his role bob may not read the ticket: the run's get_ticket would be refused.
    assert page.count('class="what-if-change"') == 3
    now = page.split('class="verdict-now"')[1:]
    assert len(now) == 3
    assert all('data-verdict="refused"' in cell and ">ACL</span>" in cell for cell in now)
    # No permission line grants bob ticket:read any more: the page says so and links to acme's.
    assert "<code>no permission grants it</code>" in page


def test_the_preview_covers_a_call_rule_and_saves_it_on_request(acme, operator):
    acme.post("/api/v1/runs", DEMO)
    rule = (
        '{"name": "assign-needs-a-human", "kind": "call", "tool": "update_ticket", '
        '"match": {"action": "assign"}, "effect": "require_approval"}'
    )

    page = preview(operator, target="rule", op="add", rule=rule)
    saved = operator.post(
        "/admin/harness/run/preview-policy/",
        {"tenant": Tenant.objects.get(slug="acme").pk, "limit": 5, "save": "1"}
        | {"target": "rule", "op": "add", "rule": rule},
    )

    assert 'diff-added">+ rule        assign-needs-a-human: kind=call' in page
    assert page.count('class="what-if-change"') == 1
    # The rule is only proposed: no row of it to link to yet.
    assert (
        '<span class="run-status verdict-badge status-held" data-verdict="needs_approval" '
        'title="A rule holds the call until a person approves it.">Needs approval</span>'
    ) in page
    assert (
        '<code title="not a saved rule of the tenant: a shipped default, or the change '
        'previewed">assign-needs-a-human</code>'
    ) in page
    assert saved.status_code == 302
    assert PolicyChange.objects.order_by("-id").first().rule == ["rule", "assign-needs-a-human"]


def test_a_rule_that_is_not_json_is_named_in_the_form(demo, operator):
    page = preview(operator, target="rule", op="add", rule="{nope")

    assert "Not JSON: Expecting property name enclosed in double quotes" in page


def test_only_rules_are_updated(demo, operator):
    page = preview(operator, target="role", op="update", user="bob", role="member")

    assert "Only rules are updated" in page
