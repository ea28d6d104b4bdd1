"""The console's Policy section: the rules in effect for a tenant (the built-in ones marked, with
how to override them), its call and chain rules, its ACL lines and its change log with exact
times."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.test import Client

from harness.console.policy_pages import effective_policy
from policy import services as policy
from policy.models import PolicyChange

EFFECTIVE = "/admin/policy/effective/"


def superuser() -> Client:
    client = Client()
    client.force_login(get_user_model().objects.get(username="admin"))
    return client


def test_a_tenant_without_rules_of_its_own_shows_the_built_in_ones_that_apply_to_it(demo):
    effective = effective_policy("globex")
    page = superuser().get(EFFECTIVE, {"tenant": "globex"})
    html = page.content.decode()

    assert [entry.rule.name for entry in effective.built_in] == [
        "default-pii-no-external",
        "default-escalation-approval",
    ]
    assert effective.call_rules == effective.chain_rules == []
    assert page.status_code == 200
    assert html.count('class="badge built-in-badge">built-in</span>') == 2
    assert "labels.carries" in html  # how the flow rule is got round: the tool files
    assert "&quot;approval&quot;: &quot;never&quot;" in html  # and the approval one
    assert "None of the tenant's own." in html


def test_the_tenants_own_rules_are_split_into_call_and_chain_rules_with_their_acl_lines(demo):
    policy.create_rule(
        "acme",
        {"name": "hold-refunds", "kind": "call", "tool": "refund", "match": {"amount": 100}}
        | {"effect": "require_approval"},
        actor="tests",
    )
    policy.create_rule(
        "acme",
        {"name": "no-mail-after-finance", "kind": "flow", "label": "finance", "sink": "*"}
        | {"effect": "refuse", "enabled": False},
        actor="tests",
    )

    page = superuser().get(EFFECTIVE, {"tenant": "acme"})
    context = page.context

    assert [r.name for r in context["policy"].call_rules] == ["hold-refunds"]
    assert [r.name for r in context["policy"].chain_rules] == ["no-mail-after-finance"]
    html = page.content.decode()
    assert "after <code>finance</code>, a <code>*</code> sink" in html
    assert "<code>refund</code> with <code>amount=100</code>" in html
    assert 'class="policy-rule disabled" data-rule="no-mail-after-finance"' in html
    assert {"subject": "role:member", "scope": "ticket:write", "effect": "allow"} in context[
        "policy"
    ].permissions
    assert {"user": "bob", "role": "member"} in context["policy"].roles
    assert "?tenant=acme&amp;rule=hold-refunds" in html  # opens it in the editor


def test_the_change_log_shows_who_what_before_after_and_the_exact_time(demo):
    policy.create_rule(
        "acme",
        {"name": "no-refunds", "kind": "call", "tool": "refund", "effect": "refuse"},
        actor="tests",
    )
    policy.update_rule("acme", "no-refunds", {"effect": "require_approval"}, actor="ann")
    newest = PolicyChange.objects.filter(tenant="acme").first()

    page = superuser().get(EFFECTIVE, {"tenant": "acme"})
    html = page.content.decode()
    row = html[html.index(f'data-version="{newest.version}"') :].split("</tr>")[0]

    exact = newest.created_at.isoformat(timespec="microseconds")
    assert f'<time datetime="{exact}">{exact}</time>' in row
    assert "<td>ann</td>" in row
    assert "rule no-refunds" in row
    assert "&#x27;effect&#x27;: &#x27;refuse&#x27;" in row  # before
    assert "&#x27;effect&#x27;: &#x27;require_approval&#x27;" in row  # after


def test_the_rules_list_says_that_the_built_in_rules_apply_too_and_the_index_links_the_pages(demo):
    client = superuser()

    rules = client.get("/admin/policy/policyrule/").content.decode()
    section = client.get("/admin/policy/").content.decode()

    assert "0 policy rules" in rules
    assert "Built-in rules" in rules
    assert "<code>default-pii-no-external</code>" in rules
    assert EFFECTIVE in rules
    assert EFFECTIVE in section
    assert "/admin/policy/editor/" in section
