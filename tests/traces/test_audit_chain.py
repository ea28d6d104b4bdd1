"""Audit records are append-only and hash-chained per tenant; verify_audit names the first
broken link. Tampering is done the way an attacker with database access would: raw SQL."""

from __future__ import annotations

import json
import threading

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, connections
from django.test import Client

from traces.chain import append_audit_record, hash_of, verify_chain
from traces.errors import AuditRecordImmutable
from traces.models import AuditRecord

QUESTION = "Why has ticket T-20250318-007 not been handled?"


def demo_run(client):
    response = client.post(
        "/api/v1/runs", {"agent": "ticket-assistant", "user": "bob", "input": QUESTION}
    )
    assert response.status_code == 200
    return response.json()


def verify(*tenants: str) -> tuple[bool, str]:
    """Run ``manage.py verify_audit``; (exited cleanly, its output)."""
    from io import StringIO

    out = StringIO()
    args = [arg for tenant in tenants for arg in ("--tenant", tenant)]
    try:
        call_command("verify_audit", *args, stdout=out)
    except CommandError as exc:
        return False, out.getvalue() + str(exc)
    return True, out.getvalue()


def sql(statement: str, *params) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)


def record(tenant: str, sequence: int) -> AuditRecord:
    return AuditRecord.objects.get(tenant=tenant, sequence=sequence)


def test_records_of_a_tenant_form_one_chain_that_verifies(acme, globex):
    demo_run(acme)
    demo_run(acme)
    demo_run(globex)

    ok, output = verify()

    assert ok
    acme_count = AuditRecord.objects.filter(tenant="acme").count()
    assert f"acme: ok, {acme_count} records verified from genesis" in output
    assert "globex: ok" in output
    sequences = list(
        AuditRecord.objects.filter(tenant="acme").order_by("id").values_list("sequence", flat=True)
    )
    assert sequences == list(range(1, acme_count + 1))
    first, second = record("acme", 1), record("acme", 2)
    assert first.prev_hash == "0" * 64
    assert second.prev_hash == first.hash


def test_an_edited_record_is_named(acme):
    demo_run(acme)
    target = record("acme", 3)
    sql(
        "UPDATE traces_auditrecord SET payload = %s WHERE id = %s",
        '{"tool": "update_ticket", "result": {"status": "resolved"}}',
        target.id,
    )

    ok, output = verify("acme")

    assert not ok
    assert f"acme: BROKEN at sequence 3 (record id {target.id}, run {target.request_id})" in output
    assert "its content does not match its hash (edited)" in output


def test_an_edited_record_with_a_recomputed_hash_breaks_the_next_link(acme):
    demo_run(acme)
    target = record("acme", 3)
    target.payload = {"tool": "update_ticket", "result": {"status": "resolved"}}
    forged = hash_of(target)
    sql(
        "UPDATE traces_auditrecord SET payload = %s, hash = %s WHERE id = %s",
        json.dumps(target.payload),
        forged,
        target.id,
    )
    following = record("acme", 4)

    ok, output = verify("acme")

    assert not ok
    assert f"BROKEN at sequence 4 (record id {following.id}" in output
    assert "the one before was changed" in output


def test_a_deleted_record_is_named(acme):
    demo_run(acme)
    sql("DELETE FROM traces_auditrecord WHERE tenant = 'acme' AND sequence = 4")

    ok, output = verify("acme")

    assert not ok
    assert "BROKEN at sequence 4" in output
    assert "record 4 is missing (deleted)" in output


def test_deleted_records_at_the_end_of_the_chain_are_noticed(acme):
    demo_run(acme)
    last = AuditRecord.objects.filter(tenant="acme").order_by("-sequence").first()
    sql("DELETE FROM traces_auditrecord WHERE id = %s", last.id)

    ok, output = verify("acme")

    assert not ok
    assert f"record {last.sequence} at the end of the chain are missing (deleted)" in output


def test_a_forged_chain_head_is_noticed(acme):
    demo_run(acme)
    last = AuditRecord.objects.filter(tenant="acme").order_by("-sequence").first()
    sql("DELETE FROM traces_auditrecord WHERE id = %s", last.id)
    sql(
        "UPDATE traces_auditchainhead SET sequence = %s, hash = %s WHERE tenant = 'acme'",
        last.sequence - 1,
        record("acme", last.sequence - 1).hash,
    )

    ok, output = verify("acme")

    assert not ok
    assert "the chain head's signature does not match" in output


def test_reordered_records_are_named(acme):
    demo_run(acme)
    sql("UPDATE traces_auditrecord SET sequence = 1000 WHERE tenant = 'acme' AND sequence = 2")
    sql("UPDATE traces_auditrecord SET sequence = 2 WHERE tenant = 'acme' AND sequence = 3")
    sql("UPDATE traces_auditrecord SET sequence = 3 WHERE tenant = 'acme' AND sequence = 1000")

    ok, output = verify("acme")

    assert not ok
    assert "BROKEN at sequence 2" in output
    assert "does not link to the record before it" in output


def test_a_broken_chain_of_one_tenant_leaves_the_others_verified(acme, globex):
    demo_run(acme)
    demo_run(globex)
    sql("DELETE FROM traces_auditrecord WHERE tenant = 'acme' AND sequence = 2")

    ok, output = verify()

    assert not ok
    assert "acme: BROKEN at sequence 2" in output
    assert "globex: ok" in output
    assert "audit chain broken for acme" in output


def test_the_orm_refuses_to_update_or_delete_audit_records(acme):
    demo_run(acme)
    first = record("acme", 1)

    with pytest.raises(AuditRecordImmutable):
        AuditRecord.objects.filter(tenant="acme").update(payload={})
    with pytest.raises(AuditRecordImmutable):
        AuditRecord.objects.filter(tenant="acme").delete()
    with pytest.raises(AuditRecordImmutable):
        first.delete()
    first.payload = {"edited": True}
    with pytest.raises(AuditRecordImmutable):
        first.save()
    with pytest.raises(AuditRecordImmutable):
        AuditRecord.objects.bulk_update([first], ["payload"])
    with pytest.raises(AuditRecordImmutable):
        AuditRecord.objects.bulk_create([AuditRecord(tenant="acme", payload={})])
    with pytest.raises(AuditRecordImmutable):
        AuditRecord.objects.create(tenant="acme", sequence=99, payload={}, kind="tool_io")
    assert verify("acme")[0]


def test_the_admin_refuses_to_delete_an_audit_record(acme):
    demo_run(acme)
    target = record("acme", 1)
    admin = Client()
    admin.login(username="admin", password="test-admin-password")

    response = admin.post(f"/admin/traces/auditrecord/{target.id}/delete/", {"post": "yes"})

    assert response.status_code == 403
    assert AuditRecord.objects.filter(id=target.id).exists()


def test_concurrent_writers_of_one_tenant_do_not_fork_the_chain(demo):
    writers, appends = 4, 10
    errors: list[BaseException] = []

    def write(number: int) -> None:
        try:
            for i in range(appends):
                append_audit_record(f"{number:032x}", "acme", f"{i:016x}", "tool_io", {"i": i})
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    report = verify_chain("acme")
    assert report.ok
    assert report.checked == writers * appends
