"""Single sign-on for the console against a real OpenID Provider (tests/support/oidc.py):
users provisioned at their first sign-in, their console roles (tenant grant, Django group,
Casbin role per tenant) following their groups at every sign-in, passwords for the break-glass
superuser only, and signing out ending the session here and at the provider."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from harness.models import OidcIdentity, StaffTenantGrant
from policy import services as policy
from tests.support.oidc import (
    sign_in,
)


def roles_in(tenant: str, user: str) -> list[str]:
    return sorted(r["role"] for r in policy.list_lines(tenant)["roles"] if r["user"] == user)


def granted(user) -> list[str]:
    return sorted(StaffTenantGrant.objects.filter(user=user).values_list("tenant__slug", flat=True))


def test_a_first_sign_in_provisions_the_user_with_the_roles_of_their_groups(sso, client):
    sso.set_groups("carol", ["harness-acme-operators", "unrelated-group"])

    response = sign_in(client, "carol")

    assert response.status_code == 302
    assert response["Location"] == "/admin/"
    carol = get_user_model().objects.get(username="carol")
    assert (carol.is_staff, carol.is_superuser, carol.has_usable_password()) == (True, False, False)
    assert carol.email == "carol@example.com"
    assert OidcIdentity.objects.get(user=carol).issuer == sso.issuer
    assert granted(carol) == ["acme"]
    assert [g.name for g in carol.groups.all()] == ["operator"]
    assert roles_in("acme", "carol") == ["operator"]
    assert roles_in("globex", "carol") == []
    assert client.get("/admin/harness/run/").status_code == 200
    assert client.get("/admin/harness/oidcidentity/").status_code == 403  # superusers only
    root = get_user_model().objects.create_superuser("root", password="break-glass-pw")
    client.force_login(root)
    identities = client.get("/admin/harness/oidcidentity/").content.decode()
    assert "carol" in identities
    assert "harness-acme-operators" in identities


def test_a_user_taken_out_of_a_group_loses_that_role_at_the_next_sign_in(sso, client):
    sso.set_groups("dora", ["harness-acme-operators", "harness-globex-auditors"])
    sign_in(client, "dora")
    dora = get_user_model().objects.get(username="dora")
    assert granted(dora) == ["acme", "globex"]
    assert roles_in("globex", "dora") == ["auditor"]
    client.post("/admin/logout/")

    sso.set_groups("dora", ["harness-acme-operators"])
    response = sign_in(client, "dora")

    assert response.status_code == 302
    dora.refresh_from_db()
    assert granted(dora) == ["acme"]
    assert sorted(g.name for g in dora.groups.all()) == ["operator"]
    assert roles_in("globex", "dora") == []
    assert roles_in("acme", "dora") == ["operator"]
    assert OidcIdentity.objects.filter(user=dora).count() == 1


def test_a_user_whose_groups_give_no_console_role_is_refused_and_loses_every_role(sso, client):
    sso.set_groups("erin", ["harness-acme-operators"])
    sign_in(client, "erin")
    client.post("/admin/logout/")

    sso.set_groups("erin", ["unrelated-group"])
    response = sign_in(client, "erin")

    assert response.status_code == 403
    assert "none of their groups gives a console role" in response.content.decode()
    erin = get_user_model().objects.get(username="erin")
    assert (erin.is_staff, granted(erin), roles_in("acme", "erin")) == (False, [], [])
    assert client.get("/admin/").status_code == 302  # not signed in


def test_single_sign_on_never_signs_into_a_local_account_of_the_same_name(sso, client):
    get_user_model().objects.create_superuser("root", password="break-glass-pw")
    sso.set_groups("root", ["harness-acme-operators"])

    response = sign_in(client, "root")

    assert response.status_code == 403
    assert "never signs into another account" in response.content.decode()
    assert not OidcIdentity.objects.exists()
    assert client.get("/admin/").status_code == 302


def test_passwords_sign_in_only_the_break_glass_superuser_while_sso_is_on(sso, client):
    User = get_user_model()
    User.objects.create_user("local-staff", password="staff-pw", is_staff=True)
    User.objects.create_superuser("root", password="break-glass-pw")

    staff = client.post("/admin/login/", {"username": "local-staff", "password": "staff-pw"})
    root = client.post("/admin/login/", {"username": "root", "password": "break-glass-pw"})

    assert staff.status_code == 200  # the form again, with its error
    assert "correct username and password" in staff.content.decode()
    assert root.status_code == 302


def test_the_console_sets_no_password_and_adds_no_user_while_sso_is_on(sso, client):
    root = get_user_model().objects.create_superuser("root", password="break-glass-pw")
    client.force_login(root)

    assert client.get(f"/admin/auth/user/{root.pk}/password/").status_code == 403
    assert client.get("/admin/auth/user/add/").status_code == 403


def test_signing_out_ends_the_console_session_and_the_providers(sso, client):
    sso.set_groups("fay", ["harness-acme-operators"])
    sign_in(client, "fay")
    assert client.get("/admin/").status_code == 200

    response = client.post("/admin/logout/")

    assert response.status_code == 302
    assert response["Location"].startswith(f"{sso.issuer}/session/end?")
    assert "id_token_hint=" in response["Location"]
    assert client.get("/admin/").status_code == 302


def test_the_sign_in_page_offers_single_sign_on_only_when_it_is_on(sso, client, settings):
    assert b'id="sso-button"' in client.get("/admin/login/").content
    settings.HARNESS_OIDC_ISSUER = ""
    assert b'id="sso-button"' not in client.get("/admin/login/").content
    assert client.get("/oidc/authenticate/").status_code == 404


def test_an_operator_role_unknown_as_a_django_group_gives_no_model_permission(sso, client):
    Group.objects.filter(name="operator").delete()
    sso.set_groups("gus", ["harness-acme-operators"])

    sign_in(client, "gus")

    gus = get_user_model().objects.get(username="gus")
    assert granted(gus) == ["acme"]
    assert list(gus.groups.all()) == []
    assert client.get("/admin/harness/run/").status_code == 403
