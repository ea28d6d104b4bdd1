"""Retention deletes a tenant's expired traces in batches and the audit chain still verifies,
from a signed checkpoint of the last deleted link."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from harness.celery import app as celery_app
from traces.chain import verify_chain
from traces.models import AuditCheckpoint, AuditRecord, Fingerprint, RetentionPolicy, Span
from traces.services import delete_expired_traces

QUESTION = "Why has ticket T-20250318-007 not been handled? Call me on 13812345678."


def demo_run(client, user="bob"):
    response = client.post(
        "/api/v1/runs", {"agent": "ticket-assistant", "user": user, "input": QUESTION}
    )
    assert response.status_code == 200
    return response.json()["request_id"]


def trace_rows(request_id: str) -> tuple[int, int, int]:
    return (
        AuditRecord.objects.filter(request_id=request_id).count(),
        Span.objects.filter(request_id=request_id).count(),
        Fingerprint.objects.filter(request_id=request_id).count(),
    )


def verify_output(tenant: str) -> str:
    out = StringIO()
    call_command("verify_audit", "--tenant", tenant, stdout=out)
    return out.getvalue()


@pytest.mark.parametrize("batch_size", [2, 500])
def test_expired_traces_are_deleted_and_the_chain_still_verifies(acme, batch_size):
    old = demo_run(acme)
    old_records = AuditRecord.objects.filter(tenant="acme", request_id=old).count()
    assert all(trace_rows(old))
    cutoff_moment = timezone.now()
    kept = demo_run(acme)
    days = settings.HARNESS_TRACE_RETENTION_DAYS

    report = delete_expired_traces(now=cutoff_moment + timedelta(days=days), batch_size=batch_size)

    assert trace_rows(old) == (0, 0, 0)
    assert all(trace_rows(kept))
    assert report.audit_records == old_records
    assert report.tenants == ["acme"]
    checkpoint = AuditCheckpoint.objects.get(tenant="acme")
    assert checkpoint.sequence == old_records
    first_kept = AuditRecord.objects.filter(tenant="acme").order_by("sequence").first()
    assert first_kept.prev_hash == checkpoint.hash
    kept_records = AuditRecord.objects.filter(tenant="acme").count()
    assert f"acme: ok, {kept_records} records verified after checkpoint {old_records}" in (
        verify_output("acme")
    )


def test_a_second_pass_deletes_nothing_more(acme):
    demo_run(acme)
    later = timezone.now() + timedelta(days=settings.HARNESS_TRACE_RETENTION_DAYS + 1)
    delete_expired_traces(now=later)

    again = delete_expired_traces(now=later)

    assert (again.audit_records, again.spans, again.fingerprints) == (0, 0, 0)
    assert verify_chain("acme").ok


def test_retention_is_per_tenant(acme, globex):
    acme_run = demo_run(acme)
    globex_run = demo_run(globex, user="charlie")
    RetentionPolicy.objects.create(tenant="globex", days=1)

    delete_expired_traces(now=timezone.now() + timedelta(days=2))

    assert trace_rows(globex_run) == (0, 0, 0)
    assert all(trace_rows(acme_run))
    assert verify_chain("globex").ok
    assert verify_chain("acme").ok


def test_a_tampered_prefix_is_kept_as_evidence_instead_of_deleted(acme):
    run = demo_run(acme)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE traces_auditrecord SET payload = '{}' WHERE tenant = 'acme' AND sequence = 2"
        )

    report = delete_expired_traces(now=timezone.now() + timedelta(days=400))

    assert "sequence 2" in report.refused["acme"]
    assert AuditRecord.objects.filter(request_id=run).count() > 0
    with pytest.raises(CommandError):
        verify_output("acme")


def test_a_forged_checkpoint_is_noticed(acme):
    demo_run(acme)
    delete_expired_traces(now=timezone.now() + timedelta(days=400))
    checkpoint = AuditCheckpoint.objects.get(tenant="acme")
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE traces_auditcheckpoint SET sequence = %s WHERE tenant = 'acme'",
            [checkpoint.sequence - 1],
        )

    report = verify_chain("acme")

    assert not report.ok
    assert "checkpoint's signature does not match" in report.broken.reason


def test_beat_runs_the_registered_retention_task():
    entry = settings.CELERY_BEAT_SCHEDULE["traces.delete_expired_traces"]
    celery_app.loader.import_default_modules()

    assert entry["task"] == "traces.delete_expired_traces"
    assert "traces.delete_expired_traces" in celery_app.tasks
