"""Retention deletes a tenant's expired traces in batches — audit by whole runs, a verified
prefix of the tenant's run links — and the audit chain still verifies, from a signed checkpoint
of the last deleted link."""

from __future__ import annotations

import functools
from datetime import timedelta
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from harness.celery import app as celery_app
from tests.support import audit
from tests.support.audit import paused_run, still_going, tamper
from traces.chain import RunChain, anchor_run, insert_records, verify_chain
from traces.models import (
    AuditCheckpoint,
    AuditRecord,
    AuditRunLink,
    Fingerprint,
    RetentionPolicy,
    Span,
)
from traces.services import delete_expired_traces

QUESTION = "Why has ticket T-20250318-007 not been handled? Call me on 13812345678."


# A run asking with a phone number in its question (fingerprinted).
demo_run = functools.partial(audit.demo_run, question=QUESTION)


def resume(request_id: str, tenant: str = "acme", end: bool = True) -> None:
    """The run goes on: one more record, and (``end``) ends, linked again (final)."""
    chain = RunChain(request_id, tenant)
    insert_records([chain.link("0" * 16, "tool_io", {"resumed": True})])
    if end:
        anchor_run(request_id, tenant, chain.head, final=True)


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


@pytest.mark.parametrize("ended", [True, False], ids=["ended", "driver-died"])
@pytest.mark.parametrize("batch_size", [2, 500])
def test_expired_traces_are_deleted_and_the_chain_still_verifies(
    acme, batch_size, ended, monkeypatch
):
    if not ended:  # the drivers died before the runs ended: the engine never linked them
        monkeypatch.setattr("harness.engine.driver.anchor_run", lambda *args, **kwargs: None)
    old = demo_run(acme, end=ended)
    if not ended:
        still_going(old, "running")
    old_records = AuditRecord.objects.filter(tenant="acme", request_id=old).count()
    assert all(trace_rows(old))
    cutoff_moment = timezone.now()
    kept = demo_run(acme, end=ended)
    if not ended:
        still_going(kept, "running")
    days = settings.HARNESS_TRACE_RETENTION_DAYS

    report = delete_expired_traces(now=cutoff_moment + timedelta(days=days), batch_size=batch_size)

    assert trace_rows(old) == (0, 0, 0)
    assert all(trace_rows(kept))
    assert report.audit_records == old_records
    assert report.tenants == ["acme"]
    checkpoint = AuditCheckpoint.objects.get(tenant="acme")
    assert checkpoint.sequence == 1  # the old run's link
    assert not AuditRunLink.objects.filter(request_id=old).exists()
    kept_links = AuditRunLink.objects.filter(tenant="acme")
    assert [(link.sequence, link.prev_hash) for link in kept_links] == (
        [(2, checkpoint.hash)] if ended else []
    )
    kept_records = AuditRecord.objects.filter(tenant="acme").count()
    assert f"acme: ok, {kept_records} records verified after checkpoint 1" in (
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
    tamper(
        "UPDATE traces_auditrecord SET payload = '{}' WHERE request_id = %s AND sequence = 2", run
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


def test_a_run_paused_and_ended_is_deleted_whole(acme, monkeypatch):
    run = paused_run(acme, monkeypatch)  # paused: linked once
    resume(run)  # and ended: linked again
    later = demo_run(acme)
    records = AuditRecord.objects.filter(request_id__in=[run, later]).count()

    # One link per batch: the run's two links still go together.
    report = delete_expired_traces(now=timezone.now() + timedelta(days=400), batch_size=1)

    assert report.audit_records == records
    assert AuditCheckpoint.objects.get(tenant="acme").sequence == 3
    assert not AuditRecord.objects.filter(tenant="acme").exists()
    assert verify_chain("acme").ok


def test_a_run_still_going_is_kept_with_every_run_linked_after_it(acme, monkeypatch):
    first = demo_run(acme)
    going = paused_run(acme, monkeypatch)  # paused and linked, then goes on after the cutoff
    after = demo_run(acme)
    cutoff_moment = timezone.now()
    resume(going, end=False)  # its last record is newer than the cutoff
    days = settings.HARNESS_TRACE_RETENTION_DAYS

    report = delete_expired_traces(now=cutoff_moment + timedelta(days=days))

    assert trace_rows(first) == (0, 0, 0)
    assert AuditRecord.objects.filter(request_id=going).exists()
    assert AuditRecord.objects.filter(request_id=after).exists()  # the prefix stops at `going`
    assert report.refused == {}
    assert AuditCheckpoint.objects.get(tenant="acme").sequence == 1
    assert verify_chain("acme").ok


def test_a_deleted_run_is_kept_as_evidence_instead_of_the_prefix_deleted(acme):
    gone, kept = demo_run(acme), demo_run(acme)
    tamper("DELETE FROM traces_auditrecord WHERE request_id = %s", gone)

    report = delete_expired_traces(now=timezone.now() + timedelta(days=400))

    assert "the whole run was deleted" in report.refused["acme"]
    assert AuditRunLink.objects.filter(request_id=gone).exists()
    assert AuditRecord.objects.filter(request_id=kept).exists()


def test_beat_runs_the_registered_retention_task():
    entry = settings.CELERY_BEAT_SCHEDULE["traces.delete_expired_traces"]
    celery_app.loader.import_default_modules()

    assert entry["task"] == "traces.delete_expired_traces"
    assert "traces.delete_expired_traces" in celery_app.tasks
