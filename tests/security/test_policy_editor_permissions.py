"""Who may read and edit a tenant's policy in the console's Policy pages. Reading needs the
rules page's view permission and the tenant granted; saving needs, in addition, the admin
permission of what the edit changes (rules or Casbin lines) and ``policy:admin`` for the staff
user, as themselves, in that tenant's policy (what the policy API asks of the user it acts
for). A viewer may preview but not save; staff of another tenant see and save nothing here."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client

from policy import services as policy
from policy.models import PolicyChange, PolicyRule
from tests.security.test_admin_permissions import staff as staff_user

EFFECTIVE = "/admin/policy/effective/"
EDITOR = "/admin/policy/editor/"
EDIT_RULES = ["add_policyrule", "change_policyrule", "delete_policyrule", "view_policyrule"]
RULE = {
    "kind": "call",
    "op": "add",
    "name": "no-escalations",
    "tool": "update_ticket",
    "match": '{"action": "escalate"}',
    "effect": "refuse",
    "description": "",
    "enabled": "on",
    "limit": "5",
}


def staff(username: str, codenames: list[str], tenants: tuple[str, ...] = ("acme",)) -> Client:
    return staff_user(username, *codenames, tenants=tenants)[1]


def viewer() -> Client:
    views = Permission.objects.filter(codename__startswith="view_")
    return staff("vera", [permission.codename for permission in views])


def nothing_saved(rules: int, changes: int) -> bool:
    return (
        PolicyRule.objects.count() == rules
        and PolicyChange.objects.count() == changes
        and not PolicyRule.objects.filter(name="no-escalations").exists()
    )


def test_a_read_only_staff_user_reads_and_previews_but_cannot_save(demo):
    vera = viewer()
    rules, changes = PolicyRule.objects.count(), PolicyChange.objects.count()

    page = vera.get(EFFECTIVE, {"tenant": "acme"})
    preview = vera.post(EDITOR, RULE | {"tenant": "acme", "preview": "1"})
    saved = vera.post(EDITOR, RULE | {"tenant": "acme", "save": "1"})

    assert page.status_code == 200
    assert preview.status_code == 200
    assert preview.context["preview"] is not None
    assert 'name="save"' not in preview.content.decode()
    assert "Saving needs" in preview.content.decode()
    assert saved.status_code == 403
    assert nothing_saved(rules, changes)


def test_the_admin_permission_without_policy_admin_in_the_tenants_policy_cannot_save(demo):
    dave = staff("dave", EDIT_RULES)
    rules, changes = PolicyRule.objects.count(), PolicyChange.objects.count()

    refused = dave.post(EDITOR, RULE | {"tenant": "acme", "save": "1"})
    assert nothing_saved(rules, changes)
    policy.assign_role("acme", "dave", "tenant_admin", actor="tests")  # policy:admin in acme
    saved = dave.post(EDITOR, RULE | {"tenant": "acme", "save": "1"})

    assert refused.status_code == 403
    assert saved.status_code == 302
    assert PolicyRule.objects.filter(tenant="acme", name="no-escalations").exists()
    assert PolicyChange.objects.count() == changes + 2  # the role given, then the rule


def test_policy_admin_without_the_admin_permission_of_what_it_edits_cannot_save(demo):
    # alice holds policy:admin in acme (the demo's tenant_admin), but may only view rules.
    alice = staff("alice", ["view_policyrule", "view_casbinrule"])
    rules, changes = PolicyRule.objects.count(), PolicyChange.objects.count()
    line = {"kind": "permission", "op": "add", "subject": "mallory", "scope": "policy:admin"}

    rule = alice.post(EDITOR, RULE | {"tenant": "acme", "save": "1"})
    permission = alice.post(EDITOR, line | {"acl_effect": "allow", "tenant": "acme", "save": "1"})

    assert rule.status_code == 403
    assert permission.status_code == 403
    assert nothing_saved(rules, changes)
    assert not policy.decide("acme", "mallory", "policy:admin").allowed


def test_staff_of_another_tenant_see_and_save_nothing_of_it(demo):
    # gina edits globex's policy, and even holds policy:admin in acme's; acme is not granted.
    gina = staff("gina", EDIT_RULES, tenants=("globex",))
    for tenant in ("acme", "globex"):
        policy.assign_role(tenant, "gina", "tenant_admin", actor="tests")
    rules, changes = PolicyRule.objects.count(), PolicyChange.objects.count()

    own = gina.get(EFFECTIVE)
    other = gina.get(EFFECTIVE, {"tenant": "acme"})
    editor = gina.get(EDITOR, {"tenant": "acme"})
    saved = gina.post(EDITOR, RULE | {"tenant": "acme", "save": "1"})
    previewed = gina.post(EDITOR, RULE | {"tenant": "acme", "preview": "1"})

    assert own.status_code == 200
    assert own.context["tenant"].slug == "globex"
    assert [t.slug for t in own.context["tenants"]] == ["globex"]
    assert other.status_code == editor.status_code == 403
    assert saved.status_code == previewed.status_code == 403
    assert nothing_saved(rules, changes)


def test_staff_who_may_not_view_the_rules_open_neither_page(demo):
    runs_only = staff("rita", ["view_run"])

    assert runs_only.get(EFFECTIVE).status_code == 403
    assert runs_only.get(EDITOR).status_code == 403
    assert runs_only.post(EDITOR, RULE | {"tenant": "acme", "preview": "1"}).status_code == 403


def test_the_demos_console_login_saves_as_itself_holding_policy_admin(demo):
    admin = Client()
    admin.force_login(get_user_model().objects.get(username="admin"))

    saved = admin.post(EDITOR, RULE | {"tenant": "globex", "save": "1"})

    assert saved.status_code == 302
    assert PolicyChange.objects.filter(tenant="globex").first().actor == "admin:admin"
    assert policy.get_rule("globex", "no-escalations").tool == "update_ticket"
