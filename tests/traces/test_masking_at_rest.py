"""No personal data or secret a run carries is stored in clear, yet auditors can find the run.

The runs go through the API with a scripted model; the personal data enters through the
user's input (so the messages sent to the model), the model's tool arguments, the tools'
results (declared sensitive fields and free text) and the model's answer.
"""

from __future__ import annotations

import pytest
from django.apps import apps
from django.db import connection

from harness.models import Run
from tests.traces import pii
from tests.traces.conftest import PII_INPUT, start_pii_run
from tools.demo.models import Notification
from traces.models import AuditRecord, Span
from traces.queries import find_runs_by_identifier

# The demo's business systems (customers, tickets, outbox) are what the tools act on, not
# what the harness stores: they hold customer data in clear by design.
BUSINESS_SYSTEM_APPS = {"demo"}


def stored_text_by_table() -> dict[str, str]:
    """Every row of every harness table, as the database returns it (raw SQL, no ORM)."""
    skipped = {
        model._meta.db_table
        for label in BUSINESS_SYSTEM_APPS
        for model in apps.get_app_config(label).get_models()
    }
    texts = {}
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            if table in skipped:
                continue
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")  # noqa: S608
            texts[table] = "\n".join(" | ".join(map(str, row)) for row in cursor.fetchall())
    return texts


def clear_values_found() -> list[tuple[str, str]]:
    texts = stored_text_by_table()
    return [
        (value, table)
        for value in pii.forbidden()
        for table, text in texts.items()
        if value in text
    ]


@pytest.fixture
def pii_run(acme, pii_agent):
    response = start_pii_run(acme, pii_agent)
    assert response.status_code == 200
    run = response.json()
    assert run["status"] == "succeeded"
    return run


def test_the_run_really_carried_the_personal_data_to_the_tools(pii_run):
    # Guards the scan below against passing vacuously: the tools got clear values.
    spans = Span.objects.filter(request_id=pii_run["request_id"], kind="tool_call")
    assert [(s.name, s.status) for s in spans] == [
        ("get_customer", "ok"),
        ("lookup_payment", "ok"),
        ("notify_user", "ok"),
    ]
    message = Notification.objects.get(tenant="acme").message
    assert pii.PHONE_CN in message
    assert pii.EMAIL in message


def test_a_scan_of_every_stored_table_finds_no_personal_data_or_secret_in_clear(pii_run):
    assert clear_values_found() == []


def test_ticket_order_and_invoice_numbers_stay_readable(pii_run):
    run = Run.objects.get(request_id=pii_run["request_id"])
    for number in pii.READABLE:
        assert number in run.input
    assert "T-20250318-007" in run.answer
    assert "ORD-55213" in run.answer
    io = AuditRecord.objects.filter(request_id=run.request_id, kind="tool_io")
    assert any(r.payload["result"].get("order_id") == "ORD-55213" for r in io)


def test_the_stored_forms_still_say_what_kind_of_value_was_there(pii_run):
    run = Run.objects.get(request_id=pii_run["request_id"])

    assert "139****5678" in run.input
    assert "****1111" in run.input
    assert "[national_id:" in run.input
    assert "Bearer [bearer_token removed]" in run.input
    assert "password=[secret removed]" in run.input
    assert run.answer.startswith("Z**** W** (138****5678, z***@example.com)")
    assert "DE****3000" in run.answer
    records = AuditRecord.objects.filter(request_id=run.request_id, kind="tool_io")
    customer, payment, _ = (r.payload for r in records.order_by("sequence"))
    assert customer["result"] == {
        "customer_id": "C-1001",
        "name": "Z**** W**",
        "phone": "138****5678",
        "email": "z***@example.com",
    }
    assert payment["arguments"]["holder"] == "张*"
    assert payment["arguments"]["note"] == "or call +34*****5678; my key is [api_key removed]"
    assert payment["result"]["card"] == "****1111"
    assert "[jwt removed]" in payment["result"]["statement"]
    assert "[private_key removed]" in payment["result"]["statement"]


def test_the_conversation_checkpoint_is_stored_masked(pii_run):
    messages = Run.objects.get(request_id=pii_run["request_id"]).messages

    assert [m["role"] for m in messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert '"name": "Z**** W**"' in messages[2]["content"]
    assert messages[3]["tool_calls"][0]["arguments"]["holder"] == "张*"


def test_the_tenants_client_gets_the_clear_answer_while_the_stored_answer_is_masked(acme, pii_run):
    assert pii_run["answer"].startswith(f"{pii.NAME} ({pii.PHONE_CN}, {pii.EMAIL})")

    fetched = acme.get(pii_run["links"]["self"]).json()
    row = Run.objects.get(request_id=pii_run["request_id"])

    # The API reads the clear answer from the sealed (encrypted) working copy...
    assert fetched["answer"] == pii_run["answer"]
    # ...while the readable column holds the masked one and the sealed one no clear text.
    assert row.answer.startswith("Z**** W** (138****5678, z***@example.com)")
    assert pii.PHONE_CN not in row.sealed
    assert pii.EMAIL not in row.sealed


@pytest.mark.parametrize(
    "typed",
    [
        "13812345678",
        "+86 138-1234-5678",
        "139 1234 5678",
        "+34612345678",
        "ZHANG.WEI@example.com",
        "11010519491231002x",
        "4111-1111-1111-1111",
        "de89370400440532013000",
        "zhang  wei",
        "张伟",
        "+1 718-951-1807",  # stored from "(718) 951-1807": one E.164 fingerprint
        "7189511807",
        "+81 90 1234 5678",
        "536 90 4399",
        "ab123456c",
        "gb82west12345698765432",
        "39053344705",
    ],
)
def test_an_auditor_finds_the_run_by_any_identifier_it_touched(acme, pii_agent, typed):
    other = acme.post(
        "/api/v1/runs",
        {"agent": "ticket-assistant", "user": "bob", "input": "Why is T-20250318-007 stuck?"},
    ).json()
    run = start_pii_run(acme, pii_agent).json()

    found = find_runs_by_identifier("acme", typed)

    assert found == [run["request_id"]]
    assert other["request_id"] not in found


def test_fingerprint_search_stays_within_the_tenant(acme, pii_agent):
    start_pii_run(acme, pii_agent)

    assert find_runs_by_identifier("globex", pii.PHONE_CN) == []


def test_fingerprints_are_keyed_so_another_key_finds_nothing(acme, pii_agent, settings):
    run = start_pii_run(acme, pii_agent).json()
    assert find_runs_by_identifier("acme", pii.EMAIL) == [run["request_id"]]

    # A replacement key (the old one no longer listed; rotation would keep it listed).
    settings.HARNESS_FINGERPRINT_KEY = "another-key"
    settings.HARNESS_FINGERPRINT_KEYS = ["another-key-of-at-least-thirty-two-characters"]

    assert find_runs_by_identifier("acme", pii.EMAIL) == []


def test_new_kinds_are_stored_masked_and_look_alikes_stay_readable(pii_run):
    run = Run.objects.get(request_id=pii_run["request_id"])

    assert "718***1807" in run.input
    assert "503***4660" in run.input
    assert "[national_id:" in run.input
    for value in pii.LOOKALIKES:
        assert value in run.input
    assert "GB****5432" in run.answer
    assert pii.LOOKALIKES[0] in run.answer


def test_a_tenants_custom_pattern_masks_its_identifier_everywhere(acme, pii_agent, admin_user):
    from traces.masking.patterns import save_pattern
    from traces.models import MaskingPatternChange

    save_pattern("acme", "customer_number", r"CUST-\d{6}", "see CUST-000001", admin_user.username)
    response = acme.post(
        "/api/v1/runs",
        {
            "agent": pii_agent["name"],
            "user": "alice",
            "input": f"Customer {pii.CUSTOMER_NUMBER} again. {PII_INPUT}",
        },
    )
    assert response.status_code == 200

    texts = stored_text_by_table()
    assert [t for t, text in texts.items() if pii.CUSTOMER_NUMBER in text] == []
    run = Run.objects.get(request_id=response.json()["request_id"])
    assert run.input.startswith("Customer [customer_number:")
    assert find_runs_by_identifier("acme", pii.CUSTOMER_NUMBER) == [run.request_id]
    assert MaskingPatternChange.objects.filter(tenant="acme", kind="customer_number").count() == 1


def test_another_tenants_custom_pattern_does_not_apply(acme, pii_agent, admin_user):
    from traces.masking.patterns import save_pattern

    save_pattern("globex", "customer_number", r"CUST-\d{6}", "CUST-000001", admin_user.username)
    response = acme.post(
        "/api/v1/runs",
        {
            "agent": pii_agent["name"],
            "user": "alice",
            "input": f"{pii.CUSTOMER_NUMBER} {PII_INPUT}",
        },
    )

    run = Run.objects.get(request_id=response.json()["request_id"])
    assert run.input.startswith(pii.CUSTOMER_NUMBER)
