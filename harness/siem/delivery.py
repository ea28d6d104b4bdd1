"""Delivery of the SIEM streams to each sink: at least once, in order, after the fact.

For each (sink, stream) a ``SiemCursor`` row holds the id of the last record the sink
accepted. A delivery claims the cursor (a lease, so that two workers never send the same
stream to the same sink at once), reads the settled rows after it, sends them in id order in
batches, and moves the cursor only after the sink accepted a batch: a worker that dies
mid-batch leaves the cursor where it was and the batch is sent again (duplicates, never
gaps). A sink that is unavailable is tried again after a back-off that doubles up to
``HARNESS_SIEM_RETRY_MAX_S``; a record it refuses for good goes to ``SiemDeadLetter`` and
the cursor moves on. Runs never wait for any of this: delivery reads what they wrote, on the
worker's beat (``harness.deliver_siem``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from harness.siem.models import SiemCursor, SiemDeadLetter
from harness.siem.sinks import Sink, SinkRefused, SinkUnavailable, parse_sinks, send
from harness.siem.sources import STREAMS, Stream, settled

logger = logging.getLogger(__name__)

LEASE = timedelta(minutes=5)
MAX_BATCHES_PER_ATTEMPT = 20


@dataclass
class Delivered:
    sink: str
    stream: str
    records: int = 0
    dead_letters: int = 0
    error: str = ""


def configured_sinks() -> list[Sink]:
    return parse_sinks(settings.HARNESS_SIEM_SINKS, settings.HARNESS_SIEM_SECRETS)


def deliver_to_sinks() -> list[Delivered]:
    """One delivery attempt for every configured sink and stream whose back-off has passed."""
    return [
        deliver_stream(sink, STREAMS[name]) for sink in configured_sinks() for name in sink.streams
    ]


def deliver_stream(sink: Sink, stream: Stream) -> Delivered:
    """Send what ``sink`` has not accepted yet of ``stream``; see the module's docstring."""
    result = Delivered(sink.name, stream.name)
    cursor = _claim(sink.name, stream.name)
    if cursor is None:
        # Held by another attempt, or backing off: the lag still grows, and is shown.
        held = SiemCursor.objects.get(sink=sink.name, stream=stream.name)
        _measure_lag(held, stream)
        SiemCursor.objects.filter(pk=held.pk).update(
            lag_records=held.lag_records, lag_seconds=held.lag_seconds
        )
        return result
    try:
        for _ in range(MAX_BATCHES_PER_ATTEMPT):
            rows = stream.read_after(cursor.position, sink.batch)
            ready = settled(rows, cursor.position, _settle(), stream)
            if not ready:
                break
            batch = [(row.id, stream.to_record(row)) for row in ready if stream.keep(row)]
            try:
                dead = _send_batch(sink, stream.name, batch)
            except SinkUnavailable as exc:
                result.error = str(exc)
                _back_off(cursor, result.error)
                break
            cursor.position = ready[-1].id
            result.dead_letters += dead
            cursor.delivered += len(batch) - dead
            cursor.failures, cursor.next_attempt_at, cursor.last_error = 0, None, ""
            cursor.last_delivered_at = timezone.now()
            result.records += len(batch)
            cursor.save(
                update_fields=["position", "delivered", "failures", "next_attempt_at",
                               "last_error", "last_delivered_at", "updated_at"]
            )  # fmt: skip
            if len(rows) < sink.batch:
                break
    finally:
        _measure_lag(cursor, stream)
        SiemCursor.objects.filter(pk=cursor.pk).update(
            lease_until=None,
            lag_records=cursor.lag_records,
            lag_seconds=cursor.lag_seconds,
        )
    return result


def _send_batch(sink: Sink, stream: str, batch: list[tuple[int, dict[str, Any]]]) -> int:
    """Send ``batch``; when the sink refuses it for good, each record alone, so that only the
    records it refuses become dead letters. Returns how many did."""
    try:
        send(sink, [record for _, record in batch])
        return 0
    except SinkRefused as exc:
        if len(batch) == 1:
            _dead_letter(sink.name, stream, batch[0], str(exc))
            return 1
    dead = 0
    for item in batch:
        try:
            send(sink, [item[1]])
        except SinkRefused as exc:
            _dead_letter(sink.name, stream, item, str(exc))
            dead += 1
    return dead


def _dead_letter(sink: str, stream: str, item: tuple[int, dict[str, Any]], error: str) -> None:
    logger.warning("SIEM sink %s refused %s record %s: %s", sink, stream, item[0], error)
    SiemDeadLetter.objects.create(
        sink=sink, stream=stream, position=item[0], record=item[1], error=error
    )


def redeliver_dead_letter(letter: SiemDeadLetter) -> bool:
    """Send one dead letter again (the console's action); ``True`` when the sink took it."""
    sink = next((s for s in configured_sinks() if s.name == letter.sink), None)
    if sink is None:
        return False
    try:
        send(sink, [letter.record])
    except (SinkRefused, SinkUnavailable) as exc:
        letter.error = str(exc)
        letter.save(update_fields=["error"])
        return False
    letter.redelivered_at = timezone.now()
    letter.save(update_fields=["redelivered_at"])
    return True


def _claim(sink: str, stream: str) -> SiemCursor | None:
    """The cursor, leased to this attempt; ``None`` while another attempt holds it or its
    back-off runs."""
    cursor, _ = SiemCursor.objects.get_or_create(sink=sink, stream=stream)
    now = timezone.now()
    claimed = (
        SiemCursor.objects.filter(pk=cursor.pk)
        .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now))
        .filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now))
        .update(lease_until=now + LEASE)
    )
    if claimed != 1:
        return None
    cursor.refresh_from_db()
    return cursor


def _back_off(cursor: SiemCursor, error: str) -> None:
    cursor.failures += 1
    wait = min(
        settings.HARNESS_SIEM_RETRY_BASE_S * 2 ** (cursor.failures - 1),
        settings.HARNESS_SIEM_RETRY_MAX_S,
    )
    cursor.next_attempt_at = timezone.now() + timedelta(seconds=wait)
    cursor.last_error = error[:2000]
    cursor.save(update_fields=["failures", "next_attempt_at", "last_error", "updated_at"])
    logger.warning(
        "SIEM sink %s unavailable for %s (failure %d, next try in %.1f s): %s",
        cursor.sink, cursor.stream, cursor.failures, wait, error,
    )  # fmt: skip


def _measure_lag(cursor: SiemCursor, stream: Stream) -> None:
    """Records after the cursor (by id), and the age of the oldest of them."""
    cursor.lag_records = stream.count_after(cursor.position)
    following = stream.read_after(cursor.position, 1) if cursor.lag_records else []
    if not following:
        cursor.lag_records, cursor.lag_seconds = 0, 0.0
        return
    age = timezone.now() - stream.timestamp(following[0])
    cursor.lag_seconds = max(0.0, age.total_seconds())


def _settle() -> timedelta:
    return timedelta(seconds=settings.HARNESS_SIEM_SETTLE_S)


def siem_status() -> list[dict[str, Any]]:
    """Each cursor's position and lag (the console's figures and ``manage.py siem_status``)."""
    return [
        {
            "sink": c.sink,
            "stream": c.stream,
            "position": c.position,
            "delivered": c.delivered,
            "lag_records": c.lag_records,
            "lag_seconds": round(c.lag_seconds, 1),
            "failures": c.failures,
            "next_attempt_at": c.next_attempt_at.isoformat() if c.next_attempt_at else None,
            "last_error": c.last_error,
        }
        for c in SiemCursor.objects.order_by("sink", "stream")
    ]
