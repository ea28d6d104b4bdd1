"""Recording one run's trace: spans with parents, timings and attributes, plus audit records.

A span is written when it ends, so a crash leaves no half-written span; the sequence number
orders a trace's spans by start, as the admin and the API show them.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Max
from django.utils import timezone

from traces.models import AuditRecord, Span, SpanStatus


@dataclass
class OpenSpan:
    span_id: str
    parent_span_id: str
    sequence: int
    kind: str
    name: str
    started_at: datetime
    started_clock: float
    attributes: dict[str, Any] = field(default_factory=dict)
    status: str = SpanStatus.OK

    def set(self, **attributes: Any) -> None:
        self.attributes.update(attributes)

    def fail(self, status: str = SpanStatus.ERROR, **attributes: Any) -> None:
        self.status = status
        self.attributes.update(attributes)


class TraceRecorder:
    """Writes the spans and audit records of the trace ``request_id``."""

    def __init__(self, request_id: str, tenant: str) -> None:
        self.request_id = request_id
        self.tenant = tenant
        last = Span.objects.filter(request_id=request_id).aggregate(last=Max("sequence"))["last"]
        self._next_sequence = (last or 0) + 1

    def start(self, kind: str, name: str, parent: OpenSpan | None = None, **attrs: Any) -> OpenSpan:
        span = OpenSpan(
            span_id=secrets.token_hex(8),
            parent_span_id=parent.span_id if parent else "",
            sequence=self._next_sequence,
            kind=kind,
            name=name,
            started_at=timezone.now(),
            started_clock=time.perf_counter(),
            attributes=dict(attrs),
        )
        self._next_sequence += 1
        return span

    def end(self, span: OpenSpan) -> Span:
        duration_ms = (time.perf_counter() - span.started_clock) * 1000
        return Span.objects.create(
            request_id=self.request_id,
            tenant=self.tenant,
            span_id=span.span_id,
            parent_span_id=span.parent_span_id,
            sequence=span.sequence,
            kind=span.kind,
            name=span.name,
            status=span.status,
            started_at=span.started_at,
            ended_at=span.started_at + timedelta(milliseconds=duration_ms),
            duration_ms=round(duration_ms, 3),
            attributes=span.attributes,
        )

    @contextmanager
    def span(
        self, kind: str, name: str, parent: OpenSpan | None = None, **attrs: Any
    ) -> Iterator[OpenSpan]:
        opened = self.start(kind, name, parent, **attrs)
        try:
            yield opened
        except BaseException as exc:
            opened.fail(error=f"{type(exc).__name__}: {exc}")
            raise
        finally:
            self.end(opened)

    def audit(self, span: OpenSpan, kind: str, payload: dict[str, Any]) -> None:
        AuditRecord.objects.create(
            request_id=self.request_id,
            tenant=self.tenant,
            span_id=span.span_id,
            kind=kind,
            payload=payload,
        )
