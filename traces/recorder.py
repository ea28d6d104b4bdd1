"""Recording one run's trace: spans with parents, timings and attributes, plus audit records.

A span is written when it ends, so a crash leaves no half-written span; the sequence number
orders a trace's spans by start, as the admin and the API show them.

Nothing reaches the database unmasked: span attributes and audit payloads go through the run's
``Masker`` (declared sensitive fields, then detectors), the fingerprints of what it masked are
stored beside the trace, and audit records are appended to the run's own hash chain
(``traces.chain.RunChain``). With an OpenTelemetry exporter configured, each stored span is
exported too (masked, as stored), once its rows are committed.

A recorder is either immediate (each span and record written as it ends, for one-off writers)
or buffered (``buffered=True``): rows wait in memory until the owner calls ``flush`` inside
its own transaction — the run engine writes a whole step's rows in one fenced transaction.

Model requests are recorded append-only: each ``model_request`` record holds the messages
added since the run's previous request (and how many of that request's messages it kept),
plus the previous record's hash, so per-step audit stays flat in the run's length.
``traces.queries.get_trace`` rebuilds the full context of each request from the chain.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from traces import otel
from traces.chain import RunChain, insert_records, to_json_value
from traces.masking import Masker
from traces.models import AuditKind, AuditRecord, Fingerprint, Span, SpanStatus
from traces.rows import insert_rows, new_row


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


@dataclass
class _RequestContext:
    """The last model request of this recorder, masked: what the next one is compared to."""

    record_hash: str
    messages: list[Any]
    tools: list[Any]


class TraceRecorder:
    """Writes the spans and audit records of the trace ``request_id``."""

    def __init__(
        self, request_id: str, tenant: str, *, buffered: bool = False, new: bool = False
    ) -> None:
        """``new``: a trace nothing was written to yet (a run's first drive): not read."""
        self.request_id = request_id
        self.tenant = tenant
        self.buffered = buffered
        last = None
        if not new:
            last = Span.objects.filter(request_id=request_id).aggregate(last=Max("sequence"))
            last = last["last"]
        self._next_sequence = (last or 0) + 1
        self.masker = new_masker(tenant)
        self.chain = RunChain(request_id, tenant, new=new)
        self._spans: list[tuple[Span, OpenSpan]] = []
        self._records: list[AuditRecord] = []
        self._fingerprints: set[tuple[str, str]] = set()
        self._last_request: _RequestContext | None = None
        self._masked_messages: dict[int, tuple[Any, Any]] = {}

    # --- masking -------------------------------------------------------------------------

    def mask(self, value: Any, sensitive: Mapping[str, str] | None = None) -> Any:
        """A masked copy of ``value`` for storage outside the trace (the run's own fields).

        Uses this run's masker, so values learnt from declared fields earlier in the run are
        masked too. Side effect: fingerprints of what was masked are stored (with the next
        flush when buffered).
        """
        masked = self.masker.mask(value, sensitive)
        self._collect_fingerprints()
        self._write_now()
        return masked

    def mask_message(self, message: Any) -> Any:
        """``message.to_dict()`` masked for the audit, once per message: a run's context is
        recorded at every step and its messages do not change, so per-step masking stays flat
        in the run's length. Keyed by identity: the entry keeps the (immutable) message alive,
        so its id cannot be reused while this recorder lives."""
        cached = self._masked_messages.get(id(message))
        if cached is not None and cached[0] is message:
            return cached[1]
        masked = to_json_value(self.masker.mask(message.to_dict()))
        self._collect_fingerprints()
        self._masked_messages[id(message)] = (message, masked)
        return masked

    # --- spans ---------------------------------------------------------------------------

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
        row = new_row(
            Span,
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
        self._spans.append((row, span))
        self._collect_fingerprints()
        self._write_now()
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

    # --- audit ---------------------------------------------------------------------------

    def audit(
        self,
        span: OpenSpan,
        kind: str,
        payload: dict[str, Any],
        sensitive: Mapping[str, str] | None = None,
    ) -> None:
        """Append a masked audit record to the run's chain.

        ``sensitive`` maps JSON pointers into ``payload`` to declared kinds (a tool file's
        ``sensitive`` fields, re-rooted with ``traces.services.under``).
        """
        self._append(span, kind, self.masker.mask(payload, sensitive))

    def audit_model_request(
        self,
        span: OpenSpan,
        route: str,
        messages: list[Any],
        tools: list[dict],
        masked: bool = False,
    ) -> None:
        """Record what the model is sent: only what is new since this recorder's previous
        request (``kept_messages`` of its messages, then ``messages_added``; tools only when
        they changed), linked to that request's record by hash. ``masked``: the caller
        already masked the messages (with ``mask_message``, which masks each one once)."""
        masked_messages = messages if masked else to_json_value(self.masker.mask(messages))
        masked_tools = to_json_value(self.masker.mask(tools))
        previous = self._last_request
        payload: dict[str, Any] = {"route": route, "previous_request": None, "kept_messages": 0}
        if previous is not None:
            kept = _common_prefix(previous.messages, masked_messages)
            payload |= {"previous_request": previous.record_hash, "kept_messages": kept}
            payload["messages_added"] = masked_messages[kept:]
            if masked_tools == previous.tools:
                payload["tools_unchanged"] = True
            else:
                payload["tools"] = masked_tools
        else:
            payload |= {"messages_added": masked_messages, "tools": masked_tools}
        record = self._append(span, AuditKind.MODEL_REQUEST, payload)
        self._last_request = _RequestContext(record.hash, masked_messages, masked_tools)
        # The export shows the whole context, as the GenAI conventions expect.
        span.audit[-1] = (
            AuditKind.MODEL_REQUEST,
            {"route": route, "messages": masked_messages, "tools": masked_tools},
        )

    def _append(self, span: OpenSpan, kind: str, masked: Any) -> AuditRecord:
        record = self.chain.link(span.span_id, kind, masked)
        record.request_id = self.request_id
        self._records.append(record)
        self._collect_fingerprints()
        span.audit.append((kind, record.payload))
        self._write_now()
        return record

    # --- writing -------------------------------------------------------------------------

    @property
    def pending(self) -> bool:
        return bool(self._spans or self._records or self._fingerprints)

    def flush(self) -> Callable[[], None]:
        """Write every pending row (call inside the owner's transaction); returns what to do
        once that transaction commits (the OpenTelemetry export)."""
        spans, self._spans = self._spans, []
        records, self._records = self._records, []
        found, self._fingerprints = self._fingerprints, set()
        insert_records(records)
        insert_rows([row for row, _ in spans])
        _store(self.request_id, self.tenant, found)
        return lambda: _export(spans)

    def hold(self) -> Callable[[], None]:
        """What is pending now, and where the run's chain and spans stand, kept: the returned
        function puts it back — after the transaction that was to write it rolled back, so
        that a retry writes the very same rows (no audit record linked twice, none lost)."""
        spans, records, found = list(self._spans), list(self._records), set(self._fingerprints)
        head, next_sequence = self.chain._head, self._next_sequence
        last_request = self._last_request

        def restore() -> None:
            for record in records:  # not inserted after all: the chain's own, to insert again
                record._chained = True  # type: ignore[attr-defined]
            self._spans, self._records, self._fingerprints = list(spans), list(records), set(found)
            self.chain._head, self._next_sequence = head, next_sequence
            self._last_request = last_request

        return restore

    def discard(self) -> None:
        """Forget every row not written yet, and the run's chain head (reloaded at its next
        use): after a transaction that was to write them rolled back."""
        self._spans, self._records, self._fingerprints = [], [], set()
        self.chain.forget()

    def _write_now(self) -> None:
        if self.buffered:
            return
        with transaction.atomic():
            after = self.flush()
        after()

    def _collect_fingerprints(self) -> None:
        self._fingerprints.update(self.masker.drain())


def _common_prefix(before: list[Any], after: list[Any]) -> int:
    kept = 0
    for old, new in zip(before, after, strict=False):
        if old != new:
            break
        kept += 1
    return kept


def _export(spans: list[tuple[Span, OpenSpan]]) -> None:
    if not spans or not otel.exporting():
        return
    for row, span in spans:
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


def rebuild_model_requests(records: list[dict[str, Any]]) -> None:
    """Give each ``model_request`` payload of one run (records in chain order) its full
    ``messages`` and ``tools`` again, from the append-only form. In place."""
    last_messages: list[Any] = []
    last_tools: list[Any] = []
    for record in records:
        if record["kind"] != AuditKind.MODEL_REQUEST:
            continue
        payload = record["payload"]
        if "messages_added" not in payload:
            continue  # recorded whole, before requests were recorded append-only
        kept = payload.get("kept_messages") or 0
        base = last_messages[:kept] if payload.get("previous_request") else []
        messages = [*base, *payload["messages_added"]]
        tools = last_tools if payload.get("tools_unchanged") else payload.get("tools", [])
        record["payload"] = {**payload, "messages": messages, "tools": tools}
        last_messages, last_tools = messages, tools


def new_masker(tenant: str | None = None) -> Masker:
    return Masker(settings.HARNESS_FINGERPRINT_KEY.encode(), tenant=tenant)


def store_fingerprints(request_id: str, tenant: str, masker: Masker) -> None:
    _store(request_id, tenant, set(masker.drain()))


def _store(request_id: str, tenant: str, found: set[tuple[str, str]]) -> None:
    insert_rows(
        [
            new_row(Fingerprint, request_id=request_id, tenant=tenant, kind=kind, digest=digest)
            for kind, digest in sorted(found)
        ],
        ignore_conflicts=True,
    )
