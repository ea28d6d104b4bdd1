"""The demo loader and the key command."""

import io

import pytest
from django.core.management import CommandError, call_command

from harness.api_keys import authenticate_api_key
from harness.models import ApiKey, Tenant
from policy.models import PolicyChange
from tools.demo.models import Ticket


def test_load_demo_is_idempotent_and_resets_the_demo_ticket(db):
    call_command("load_demo", stdout=io.StringIO())
    Ticket.objects.filter(ticket_id="T-20250318-007").update(assignee_id="x", status="assigned")
    changes = PolicyChange.objects.count()

    call_command("load_demo", stdout=io.StringIO())

    assert sorted(Tenant.objects.values_list("slug", flat=True)) == ["acme", "globex"]
    assert Ticket.objects.filter(ticket_id="T-20250318-007").count() == 1
    ticket = Ticket.objects.get(ticket_id="T-20250318-007")
    assert (ticket.status, ticket.assignee_id) == ("open", "")
    assert PolicyChange.objects.count() == changes  # no rule added twice


def test_create_api_key_prints_a_key_that_is_stored_only_hashed(db):
    call_command("load_demo", stdout=io.StringIO())
    out = io.StringIO()

    call_command("create_api_key", "--tenant", "acme", stdout=out)

    secret = out.getvalue().strip()
    assert secret.startswith("hk_")
    stored = ApiKey.objects.get()
    assert secret not in (stored.key_hash, stored.prefix)
    assert authenticate_api_key(secret) == stored


def test_create_api_key_for_an_unknown_tenant_fails_clearly(db):
    with pytest.raises(CommandError, match="No tenant 'nope'"):
        call_command("create_api_key", "--tenant", "nope", stdout=io.StringIO())


def test_webhook_secret_prints_and_rotates_the_tenants_signing_secret(db):
    call_command("load_demo", stdout=io.StringIO())
    first, rotated, again = io.StringIO(), io.StringIO(), io.StringIO()

    call_command("webhook_secret", "--tenant", "acme", stdout=first)
    call_command("webhook_secret", "--tenant", "acme", "--rotate", stdout=rotated)
    call_command("webhook_secret", "--tenant", "acme", stdout=again)

    assert first.getvalue().startswith("whsec_")
    assert rotated.getvalue() != first.getvalue()
    assert again.getvalue() == rotated.getvalue()
