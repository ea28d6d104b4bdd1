"""Recording one run's trace: spans with parents, timings and attributes, plus audit records.

A span is written when it ends, so a crash leaves no half-written span; the sequence number
orders a trace's spans by start, as the admin and the API show them.

Nothing reaches the database unmasked: span attributes and audit payloads go through the run's
``Masker`` (declared sensitive fields, then detectors), the fingerprints of what it masked are
stored beside the trace, and audit records are appended to the tenant's hash chain. With an
OpenTelemetry exporter configured, each stored span is exported too (masked, as stored).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Max
from django.utils import timezone

from traces import otel
from traces.chain import append_audit_record, to_json_value
from traces.masking import Masker
from traces.models import Fingerprint, Span, SpanStatus


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
    # Masked audit payloads of this span, kept for the OpenTelemetry export.
    audit: list[tuple[str, Any]] = field(default_factory=list)

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
        self.masker = new_masker(tenant)

    def mask(self, value: Any, sensitive: Mapping[str, str] | None = None) -> Any:
        """A masked copy of ``value`` for storage outside the trace (the run's own fields).

        Uses this run's masker, so values learnt from declared fields earlier in the run are
        masked too. Side effect: fingerprints of what was masked are stored.
        """
        masked = self.masker.mask(value, sensitive)
        self._store_fingerprints()
        return masked

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
        row = Span.objects.create(
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
            attributes=to_json_value(self.masker.mask(span.attributes)),
        )
        self._store_fingerprints()
        if otel.exporting():
            otel.export_span(
                otel.StoredSpan(
                    request_id=row.request_id,
                    tenant=row.tenant,
                    span_id=row.span_id,
                    parent_span_id=row.parent_span_id,
                    kind=row.kind,
                    name=row.name,
                    status=row.status,
                    started_at=row.started_at,
                    ended_at=row.ended_at,
                    attributes=row.attributes,
                    audit=tuple(span.audit),
                )
            )
        return row

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

    def audit(
        self,
        span: OpenSpan,
        kind: str,
        payload: dict[str, Any],
        sensitive: Mapping[str, str] | None = None,
    ) -> None:
        """Append a masked audit record to the tenant's chain.

        ``sensitive`` maps JSON pointers into ``payload`` to declared kinds (a tool file's
        ``sensitive`` fields, re-rooted with ``traces.services.under``).
        """
        record = append_audit_record(
            self.request_id, self.tenant, span.span_id, kind, self.masker.mask(payload, sensitive)
        )
        self._store_fingerprints()
        span.audit.append((kind, record.payload))

    def _store_fingerprints(self) -> None:
        store_fingerprints(self.request_id, self.tenant, self.masker)


def new_masker(tenant: str | None = None) -> Masker:
    return Masker(settings.HARNESS_FINGERPRINT_KEY.encode(), tenant=tenant)


def store_fingerprints(request_id: str, tenant: str, masker: Masker) -> None:
    found = masker.drain()
    if found:
        Fingerprint.objects.bulk_create(
            [
                Fingerprint(request_id=request_id, tenant=tenant, kind=kind, digest=digest)
                for kind, digest in found
            ],
            ignore_conflicts=True,
        )
