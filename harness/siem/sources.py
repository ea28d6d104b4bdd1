"""What the SIEM delivery reads: four streams, each a table read by insertion order (``id``)
after a sink's cursor, each row turned into a SIEM record (``harness.siem.records``).

A cursor is an id, so a row whose transaction commits after a later id was read could be
passed over. ``settled`` keeps that from happening: it hands on the rows after the cursor up
to the first gap in the ids, and passes a gap only once the row after it is older than
``HARNESS_SIEM_SETTLE_S`` (a rolled-back insert leaves a gap for good; an open transaction
fills it within that time).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from harness.siem import records
from harness.siem.models import SecurityEvent
from policy import services as policy
from traces import queries as traces


@dataclass(frozen=True)
class Stream:
    name: str
    read_after: Callable[[int, int], list[Any]]  # (after id, limit) -> rows by id
    count_after: Callable[[int], int]  # records of this stream after an id
    timestamp: Callable[[Any], datetime]
    to_record: Callable[[Any], dict[str, Any]]
    # Rows of the table that are not this stream's (read, so the cursor passes them).
    keep: Callable[[Any], bool] = lambda row: True


def _security_after(after_id: int, limit: int) -> list[SecurityEvent]:
    return list(SecurityEvent.objects.filter(id__gt=after_id).order_by("id")[:limit])


def _count_security_after(after_id: int) -> int:
    return SecurityEvent.objects.filter(id__gt=after_id).count()


STREAMS: dict[str, Stream] = {
    stream.name: stream
    for stream in (
        Stream(
            "audit",
            traces.list_audit_records_after,
            traces.count_audit_records_after,
            lambda row: row.created_at,
            records.audit_record,
        ),
        Stream(
            "approval",
            traces.list_spans_after,
            lambda after_id: traces.count_spans_after(after_id, "approval"),
            lambda span: span.started_at,
            records.approval_record,
            keep=lambda span: span.kind == "approval",
        ),
        Stream(
            "policy_change",
            policy.list_changes_after,
            policy.count_changes_after,
            lambda change: change.created_at,
            records.policy_change_record,
        ),
        Stream(
            "security",
            _security_after,
            _count_security_after,
            lambda event: event.created_at,
            records.security_event_record,
        ),
    )
}


def settled(rows: list[Any], after_id: int, settle: timedelta, stream: Stream) -> list[Any]:
    """The rows that may be handed on now: in id order, up to a gap younger than ``settle``."""
    kept = []
    expected = after_id + 1
    horizon = timezone.now() - settle
    for row in rows:
        if row.id != expected and stream.timestamp(row) > horizon:
            break
        kept.append(row)
        expected = row.id + 1
    return kept
