"""Retention: deleting a tenant's traces once they are older than its retention period.

Audit is deleted by whole runs, oldest first: a *prefix* of the tenant's chain of run links
whose runs all ended before the cutoff (a run's last record is older), with those runs' records,
spans and fingerprints — and only after the prefix and its runs are verified. The hash of the
last deleted link is kept in a signed ``AuditCheckpoint``, where ``verify_audit`` then starts.
A prefix that does not verify is not deleted (that would destroy the evidence of tampering);
the tenant is reported instead. An expired run that was never linked (its driver died before
it paused or ended) is verified and linked first. Other spans and fingerprints older than the
cutoff are deleted in batches.

This module is the one place allowed past the audit rows' append-only guard (the ORM's, and on
PostgreSQL the triggers', which let a transaction with ``harness.audit_retention = 'on'`` delete).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, models, transaction
from django.db.models import Max
from django.dispatch import Signal
from django.utils import timezone

from traces.chain import (
    ChainBreak,
    anchor_run,
    genesis,
    links_by_run,
    run_heads,
    run_link_fault,
    runs_fault,
    sign_link,
)
from traces.models import (
    AuditCheckpoint,
    AuditRecord,
    AuditRunLink,
    Fingerprint,
    RetentionPolicy,
    Span,
)

# Sent inside the batch's transaction with ``tenant`` and ``request_ids``: the runs whose
# audit retention just deleted. Apps that keep copies of runs delete theirs (traces imports
# no app: they connect here).
runs_expired = Signal()


@dataclass
class RetentionReport:
    audit_records: int = 0
    spans: int = 0
    fingerprints: int = 0
    tenants: list[str] = field(default_factory=list)
    # Tenants whose expired audit records were kept because their chain does not verify.
    refused: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "audit_records": self.audit_records,
            "spans": self.spans,
            "fingerprints": self.fingerprints,
            "tenants": self.tenants,
            "refused": self.refused,
        }


def retention_days(tenant: str) -> int:
    policy = RetentionPolicy.objects.filter(tenant=tenant).first()
    return policy.days if policy else settings.HARNESS_TRACE_RETENTION_DAYS


def delete_expired_traces(
    now: datetime | None = None, batch_size: int | None = None
) -> RetentionReport:
    """Delete every tenant's traces older than its retention period, in batches.

    Side effects: rows deleted; expired never-linked runs linked; each tenant's audit
    checkpoint moves to the last deleted link. Idempotent: a second call finds nothing more
    to delete. Each batch is its own transaction, so an interrupted call leaves a consistent
    chain and checkpoint.
    """
    now = now or timezone.now()
    batch = batch_size or settings.HARNESS_TRACE_RETENTION_BATCH
    report = RetentionReport()
    for tenant in _tenants_with_traces():
        cutoff = now - timedelta(days=retention_days(tenant))
        deleted = _delete_expired_runs(tenant, cutoff, batch, report)
        spans = _delete_in_batches(Span.objects.filter(tenant=tenant, ended_at__lt=cutoff), batch)
        fingerprints = _delete_in_batches(
            Fingerprint.objects.filter(tenant=tenant, created_at__lt=cutoff), batch
        )
        report.audit_records += deleted
        report.spans += spans
        report.fingerprints += fingerprints
        if deleted or spans or fingerprints:
            report.tenants.append(tenant)
    return report


def _tenants_with_traces() -> list[str]:
    tenants: set[str] = set()
    for model in (AuditRecord, AuditRunLink, Span, Fingerprint):
        tenants.update(model.objects.values_list("tenant", flat=True).distinct())
    return sorted(tenants)


def _delete_expired_runs(tenant: str, cutoff: datetime, batch: int, report: RetentionReport) -> int:
    _link_abandoned_runs(tenant, cutoff, report)
    if tenant in report.refused:
        return 0
    deleted = 0
    while True:
        with transaction.atomic():
            checkpoint = _locked_checkpoint(tenant)
            prefix = _expired_prefix(tenant, checkpoint.sequence, cutoff, batch)
            if not prefix:
                return deleted
            fault = _prefix_fault(tenant, checkpoint, prefix)
            if fault is not None:
                report.refused[tenant] = fault.describe()
                return deleted
            runs = sorted({link.request_id for link in prefix})
            last = prefix[-1]
            checkpoint.sequence, checkpoint.hash = last.sequence, last.hash
            checkpoint.signature = sign_link("checkpoint", tenant, last.sequence, last.hash)
            checkpoint.deleted_before = cutoff
            checkpoint.save()
            allow_retention_deletes()
            # The sanctioned way past AppendOnlyQuerySet.delete: verified whole runs only.
            count, _ = models.QuerySet.delete(
                AuditRecord.objects.filter(tenant=tenant, request_id__in=runs)
            )
            models.QuerySet.delete(
                AuditRunLink.objects.filter(tenant=tenant, sequence__lte=last.sequence)
            )
            report.spans += Span.objects.filter(request_id__in=runs).delete()[0]
            report.fingerprints += Fingerprint.objects.filter(request_id__in=runs).delete()[0]
            # Copies of these runs kept elsewhere (datasets) go with them, in this batch.
            runs_expired.send(sender=RetentionReport, tenant=tenant, request_ids=runs)
            deleted += count
        if len(prefix) < batch:
            return deleted


def _link_abandoned_runs(tenant: str, cutoff: datetime, report: RetentionReport) -> None:
    """Link expired runs whose records go past their last link (a driver died before it
    paused or ended), after verifying their chains, so they can be deleted as whole runs."""
    heads = run_heads(tenant)
    linked = dict(
        AuditRunLink.objects.filter(tenant=tenant)
        .values("request_id")
        .annotate(last=Max("run_sequence"))
        .values_list("request_id", "last")
    )
    for request_id in sorted(heads):
        last, at = heads[request_id]
        if at >= cutoff or last <= linked.get(request_id, 0):
            continue
        with transaction.atomic():
            records = list(
                AuditRecord.objects.filter(tenant=tenant, request_id=request_id).order_by(
                    "sequence"
                )
            )
            fault, _, _ = runs_fault(records, {})
            if fault is not None:
                report.refused[tenant] = fault.describe()
                return
            anchor_run(request_id, tenant, (records[-1].sequence, records[-1].hash))


def _expired_prefix(tenant: str, after: int, cutoff: datetime, batch: int) -> list[AuditRunLink]:
    """The longest prefix (of about ``batch`` links) of the links after ``after`` that names
    whole expired runs only: every run in it ended before ``cutoff``, is linked at its last
    record, and has all its links in the prefix."""
    limit = batch
    while True:
        links = list(
            AuditRunLink.objects.filter(tenant=tenant, sequence__gt=after).order_by("sequence")[
                :limit
            ]
        )
        if not links:
            return []
        runs = {link.request_id for link in links}
        last_link = dict(
            AuditRunLink.objects.filter(tenant=tenant, request_id__in=runs)
            .values("request_id")
            .annotate(last=Max("sequence"))
            .values_list("request_id", "last")
        )
        last_linked = dict(
            AuditRunLink.objects.filter(tenant=tenant, request_id__in=runs)
            .values("request_id")
            .annotate(last=Max("run_sequence"))
            .values_list("request_id", "last")
        )
        heads = {
            row["request_id"]: (row["last"], row["at"])
            for row in AuditRecord.objects.filter(tenant=tenant, request_id__in=runs)
            .values("request_id")
            .annotate(last=Max("sequence"), at=Max("created_at"))
        }
        end, needed, stopped = 0, 0, False
        for index, link in enumerate(links):
            run = link.request_id
            if run in heads:  # a named run without records is refused by the verification
                last, at = heads[run]
                if at >= cutoff or last != last_linked[run]:
                    stopped = True
                    break
            needed = max(needed, last_link[run])
            if needed <= link.sequence:
                end = index + 1
        if end or stopped or len(links) < limit:
            return links[:end]
        limit *= 2


def _prefix_fault(
    tenant: str, checkpoint: AuditCheckpoint, prefix: list[AuditRunLink]
) -> ChainBreak | None:
    expected, prev_hash = checkpoint.sequence + 1, checkpoint.hash
    for link in prefix:
        fault = run_link_fault(link, expected, prev_hash)
        if fault is not None:
            return fault
        expected, prev_hash = expected + 1, link.hash
    runs = {link.request_id for link in prefix}
    records = AuditRecord.objects.filter(tenant=tenant, request_id__in=runs).order_by(
        "request_id", "sequence"
    )
    fault, _, _ = runs_fault(records.iterator(chunk_size=1000), links_by_run(prefix))
    return fault


def allow_retention_deletes() -> None:
    """Inside retention's transaction: let the PostgreSQL triggers pass its deletes."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL harness.audit_retention = 'on'")


def _locked_checkpoint(tenant: str) -> AuditCheckpoint:
    AuditCheckpoint.objects.get_or_create(
        tenant=tenant,
        defaults=genesis("checkpoint", tenant),
    )
    return AuditCheckpoint.objects.select_for_update().get(tenant=tenant)


def _delete_in_batches(queryset: models.QuerySet, batch: int) -> int:
    deleted = 0
    while True:
        ids = list(queryset.order_by("pk").values_list("pk", flat=True)[:batch])
        if not ids:
            return deleted
        count, _ = queryset.model.objects.filter(pk__in=ids).delete()
        deleted += count
