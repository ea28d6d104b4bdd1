"""The per-tenant hash chain of audit records: appending, signing and verifying.

Each record's hash covers its content and the previous record's hash, so editing a record,
deleting one or reordering them breaks a link that ``verify_chain`` names. The chain's head
(and retention's checkpoint, where verification starts after old records were deleted) are
signed with a key from settings, so they cannot be rewritten to hide a truncated tail without
that key.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from traces.keys import checkpoint_verify_keys
from traces.models import AuditChainHead, AuditCheckpoint, AuditRecord

GENESIS_HASH = "0" * 64


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 text: one byte string per JSON value."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def to_json_value(value: Any) -> Any:
    """``value`` as it will read back from a JSON column (tuples → lists, others → str)."""
    return json.loads(json.dumps(value, ensure_ascii=False, default=str))


def record_hash(
    *,
    tenant: str,
    sequence: int,
    prev_hash: str,
    request_id: str,
    span_id: str,
    kind: str,
    payload: Any,
    created_at: datetime,
) -> str:
    content = {
        "tenant": tenant,
        "sequence": sequence,
        "prev_hash": prev_hash,
        "request_id": request_id,
        "span_id": span_id,
        "kind": kind,
        "payload": payload,
        "created_at": created_at.isoformat(),
    }
    return hashlib.sha256(canonical_json(content).encode()).hexdigest()


def hash_of(record: AuditRecord) -> str:
    """The hash ``record`` should carry, recomputed from its stored content."""
    return record_hash(
        tenant=record.tenant,
        sequence=record.sequence,
        prev_hash=record.prev_hash,
        request_id=record.request_id,
        span_id=record.span_id,
        kind=record.kind,
        payload=record.payload,
        created_at=record.created_at,
    )


def sign_link(role: str, tenant: str, sequence: int, link_hash: str, key: bytes = b"") -> str:
    """HMAC of a chain head or checkpoint: ``role`` keeps one from passing for the other."""
    message = canonical_json([role, tenant, sequence, link_hash]).encode()
    return hmac.new(key or _checkpoint_key(), message, hashlib.sha256).hexdigest()


def link_signature_valid(signature: str, role: str, tenant: str, sequence: int, h: str) -> bool:
    """Signed by any listed checkpoint key (rotation: older keys still verify)."""
    return any(
        hmac.compare_digest(signature, sign_link(role, tenant, sequence, h, key))
        for key in checkpoint_verify_keys()
    )


def _checkpoint_key() -> bytes:
    return settings.HARNESS_AUDIT_CHECKPOINT_KEY.encode()


def append_audit_record(
    request_id: str, tenant: str, span_id: str, kind: str, payload: Any
) -> AuditRecord:
    """Append one record to ``tenant``'s chain. Side effect: the chain head moves.

    The head row is locked for the insert, so concurrent writers of a tenant queue up behind
    each other (on SQLite the IMMEDIATE transaction takes the database write lock instead).
    """
    payload = to_json_value(payload)
    with transaction.atomic():
        head = _locked_head(tenant)
        record = AuditRecord(
            request_id=request_id,
            tenant=tenant,
            span_id=span_id,
            kind=kind,
            payload=payload,
            created_at=timezone.now(),
            sequence=head.sequence + 1,
            prev_hash=head.hash,
        )
        record.hash = hash_of(record)
        record.save()
        AuditChainHead.objects.filter(pk=head.pk).update(
            sequence=record.sequence,
            hash=record.hash,
            signature=sign_link("head", tenant, record.sequence, record.hash),
            updated_at=timezone.now(),
        )
    return record


def _locked_head(tenant: str) -> AuditChainHead:
    head = AuditChainHead.objects.select_for_update().filter(tenant=tenant).first()
    if head is None:
        # A tenant's first record: create the head (a concurrent creator may win), then lock.
        AuditChainHead.objects.get_or_create(
            tenant=tenant,
            defaults={
                "sequence": 0,
                "hash": GENESIS_HASH,
                "signature": sign_link("head", tenant, 0, GENESIS_HASH),
            },
        )
        head = AuditChainHead.objects.select_for_update().get(tenant=tenant)
    return head


@dataclass(frozen=True)
class ChainBreak:
    """The first link of a tenant's chain that does not hold, and why."""

    sequence: int
    reason: str
    record_id: int | None = None
    request_id: str = ""

    def describe(self) -> str:
        where = f"sequence {self.sequence}"
        if self.record_id is not None:
            where += f" (record id {self.record_id}, run {self.request_id})"
        return f"{where}: {self.reason}"


@dataclass(frozen=True)
class ChainReport:
    tenant: str
    checked: int
    starts_after: int
    ends_at: int
    broken: ChainBreak | None = None

    @property
    def ok(self) -> bool:
        return self.broken is None


def verify_chain(tenant: str) -> ChainReport:
    """Walk ``tenant``'s audit records in sequence order and name the first broken link."""
    checkpoint = AuditCheckpoint.objects.filter(tenant=tenant).first()
    start, prev_hash = 0, GENESIS_HASH
    if checkpoint is not None:
        start, prev_hash = checkpoint.sequence, checkpoint.hash
        if not link_signature_valid(checkpoint.signature, "checkpoint", tenant, start, prev_hash):
            return ChainReport(
                tenant,
                0,
                start,
                start,
                ChainBreak(start, "the retention checkpoint's signature does not match"),
            )
    records = AuditRecord.objects.filter(tenant=tenant, sequence__gt=start).order_by("sequence")
    checked, expected = 0, start + 1
    for record in records.iterator(chunk_size=1000):
        broken = link_fault(record, expected, prev_hash)
        if broken is not None:
            return ChainReport(tenant, checked, start, expected - 1, broken)
        prev_hash, expected, checked = record.hash, expected + 1, checked + 1
    last = expected - 1
    broken = _head_fault(tenant, last, prev_hash)
    return ChainReport(tenant, checked, start, last, broken)


def link_fault(record: AuditRecord, expected: int, prev_hash: str) -> ChainBreak | None:
    """Why ``record`` is not the valid link number ``expected`` after ``prev_hash``, if so."""
    where = {"record_id": record.pk, "request_id": record.request_id}
    if record.sequence != expected:
        missing = (
            f"record {expected} is missing"
            if record.sequence == expected + 1
            else f"records {expected} to {record.sequence - 1} are missing"
        )
        return ChainBreak(expected, f"{missing} (deleted)", **where)
    if record.prev_hash != prev_hash:
        return ChainBreak(
            expected,
            "it does not link to the record before it "
            "(records were reordered, or the one before was changed)",
            **where,
        )
    if hash_of(record) != record.hash:
        return ChainBreak(expected, "its content does not match its hash (edited)", **where)
    return None


def _head_fault(tenant: str, last: int, last_hash: str) -> ChainBreak | None:
    head = AuditChainHead.objects.filter(tenant=tenant).first()
    if head is None:
        if last == 0:
            return None
        return ChainBreak(last, "the chain has records but no head")
    if not link_signature_valid(head.signature, "head", tenant, head.sequence, head.hash):
        return ChainBreak(head.sequence, "the chain head's signature does not match")
    if head.sequence > last:
        missing = (
            f"record {head.sequence}"
            if head.sequence == last + 1
            else f"records {last + 1} to {head.sequence}"
        )
        return ChainBreak(last + 1, f"{missing} at the end of the chain are missing (deleted)")
    if head.sequence != last or head.hash != last_hash:
        return ChainBreak(last, "the chain's last record is not the one its head names")
    return None


def audited_tenants() -> list[str]:
    """Every tenant with a chain: records, a head or a checkpoint."""
    tenants: set[str] = set(AuditChainHead.objects.values_list("tenant", flat=True))
    tenants.update(AuditCheckpoint.objects.values_list("tenant", flat=True))
    tenants.update(AuditRecord.objects.values_list("tenant", flat=True).distinct())
    return sorted(tenants)


def iter_reports(tenants: list[str] | None = None) -> Iterator[ChainReport]:
    for tenant in tenants if tenants is not None else audited_tenants():
        yield verify_chain(tenant)
