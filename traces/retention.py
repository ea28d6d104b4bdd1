"""Retention: deleting a tenant's traces once they are older than its retention period.

Spans and fingerprints older than the cutoff are deleted in batches. Audit records are deleted
as a *prefix* of the tenant's chain, oldest first, and only after that prefix is verified:
the hash of the last deleted record is kept in a signed ``AuditCheckpoint``, where
``verify_audit`` then starts. A prefix that does not verify is not deleted (that would destroy
the evidence of tampering); the tenant is reported instead.

This module is the one place allowed past the audit records' append-only guard.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import takewhile
from typing import Any

from django.conf import settings
from django.db import models, transaction
from django.utils import timezone

from traces.chain import GENESIS_HASH, link_fault, sign_link
from traces.models import AuditCheckpoint, AuditRecord, Fingerprint, RetentionPolicy, Span


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

    Side effects: rows deleted; each tenant's audit checkpoint moves to the last deleted
    record. Idempotent: a second call finds nothing more to delete. Each batch is its own
    transaction, so an interrupted call leaves a consistent chain and checkpoint.
    """
    now = now or timezone.now()
    batch = batch_size or settings.HARNESS_TRACE_RETENTION_BATCH
    report = RetentionReport()
    for tenant in _tenants_with_traces():
        cutoff = now - timedelta(days=retention_days(tenant))
        deleted = _delete_audit_prefix(tenant, cutoff, batch, report)
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
    for model in (AuditRecord, Span, Fingerprint):
        tenants.update(model.objects.values_list("tenant", flat=True).distinct())
    return sorted(tenants)


def _delete_audit_prefix(tenant: str, cutoff: datetime, batch: int, report: RetentionReport) -> int:
    deleted = 0
    while True:
        with transaction.atomic():
            checkpoint = _locked_checkpoint(tenant)
            rows = list(
                AuditRecord.objects.filter(
                    tenant=tenant, sequence__gt=checkpoint.sequence
                ).order_by("sequence")[:batch]
            )
            expired = list(takewhile(lambda r: r.created_at < cutoff, rows))
            if not expired:
                return deleted
            expected, prev_hash = checkpoint.sequence + 1, checkpoint.hash
            for record in expired:
                fault = link_fault(record, expected, prev_hash)
                if fault is not None:
                    report.refused[tenant] = fault.describe()
                    return deleted
                expected, prev_hash = expected + 1, record.hash
            first, last = checkpoint.sequence, expired[-1]
            checkpoint.sequence, checkpoint.hash = last.sequence, last.hash
            checkpoint.signature = sign_link("checkpoint", tenant, last.sequence, last.hash)
            checkpoint.deleted_before = cutoff
            checkpoint.save()
            prefix = AuditRecord.objects.filter(
                tenant=tenant, sequence__gt=first, sequence__lte=last.sequence
            )
            # The sanctioned way past AuditRecordQuerySet.delete: a verified prefix only.
            count, _ = models.QuerySet.delete(prefix)
            deleted += count
        if len(expired) < batch:
            return deleted


def _locked_checkpoint(tenant: str) -> AuditCheckpoint:
    AuditCheckpoint.objects.get_or_create(
        tenant=tenant,
        defaults={
            "sequence": 0,
            "hash": GENESIS_HASH,
            "signature": sign_link("checkpoint", tenant, 0, GENESIS_HASH),
        },
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
