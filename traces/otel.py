"""OpenTelemetry export of run traces, with the GenAI semantic conventions.

When an OTLP endpoint is configured (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``), every span the ``TraceRecorder`` stores is also
exported: the OTel trace id is the run's request id and the OTel span id is the stored span's
id, so a trace found in a tracing backend is the run found in the admin and vice versa.
Attributes are the already-masked ones; content (messages sent to the model, tool arguments
and results) is exported only in its masked form, and only with
``HARNESS_OTEL_CAPTURE_CONTENT`` on.

Django requests and Celery tasks are instrumented too; a run's root span links to the request
or task span that drove it (they are separate traces: a run outlives the request that
started it and can be resumed by another worker).
"""

from __future__ import annotations

import contextvars
import json
import logging
import random
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from traces.span_records import (
    AgentSession,
    ModelCall,
    PolicyCheck,
    SpanRecord,
    ToolCallSpan,
    record_of,
)

_pinned_ids: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar(
    "harness_pinned_otel_ids", default=None
)
_lock = threading.Lock()
logger = logging.getLogger(__name__)


class RunIdGenerator(IdGenerator):
    """Random ids, except while a stored span is exported: then the ids it already has."""

    def generate_span_id(self) -> int:
        pinned = _pinned_ids.get()
        return pinned[1] if pinned else random.getrandbits(64)

    def generate_trace_id(self) -> int:
        pinned = _pinned_ids.get()
        return pinned[0] if pinned else random.getrandbits(128)

    def is_trace_id_random(self) -> bool:
        return True  # request ids are uuid4: their low 56 bits are random


@dataclass
class Telemetry:
    provider: TracerProvider
    tracer: trace.Tracer
    instrumented: tuple[Any, ...] = ()


_telemetry: Telemetry | None = None


def configure_tracing(
    exporter: SpanExporter, *, batch: bool = True, instrument: bool = False
) -> Telemetry:
    """Start exporting run spans to ``exporter`` (replacing any earlier configuration).

    ``batch`` exports from a background thread (production); without it each span is exported
    as it ends (tests). ``instrument`` also instruments Django and Celery.
    """
    global _telemetry
    with _lock:
        _shutdown_locked()
        provider = TracerProvider(
            resource=Resource.create({"service.name": settings.HARNESS_OTEL_SERVICE_NAME}),
            id_generator=RunIdGenerator(),
        )
        processor = BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
        provider.add_span_processor(processor)
        instrumented = _instrument(provider) if instrument else ()
        _telemetry = Telemetry(provider, provider.get_tracer("harness.traces"), instrumented)
        return _telemetry


def configure_from_settings() -> Telemetry | None:
    """Export to the configured OTLP endpoint, if one is; called once per process at start."""
    endpoint = settings.HARNESS_OTEL_TRACES_ENDPOINT
    if not endpoint or _telemetry is not None:
        return _telemetry
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return configure_tracing(OTLPSpanExporter(endpoint=endpoint), batch=True, instrument=True)


def shutdown_tracing() -> None:
    """Flush and stop exporting; undo the Django and Celery instrumentation."""
    with _lock:
        _shutdown_locked()


def _shutdown_locked() -> None:
    global _telemetry
    if _telemetry is None:
        return
    for instrumentor in _telemetry.instrumented:
        instrumentor.uninstrument()
    _telemetry.provider.shutdown()
    _telemetry = None


def _instrument(provider: TracerProvider) -> tuple[Any, ...]:
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.instrumentation.django import DjangoInstrumentor

    instrumented = []
    for instrumentor in (DjangoInstrumentor(), CeleryInstrumentor()):
        if not instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.instrument(tracer_provider=provider)
            instrumented.append(instrumentor)
    return tuple(instrumented)


def exporting() -> bool:
    return _telemetry is not None


@dataclass(frozen=True)
class StoredSpan:
    """What the recorder hands over of a span it stored (all of it already masked)."""

    request_id: str
    tenant: str
    span_id: str
    parent_span_id: str
    kind: str
    name: str
    status: str
    started_at: datetime
    ended_at: datetime
    attributes: dict[str, Any]
    audit: tuple[tuple[str, Any], ...] = ()


def export_span(stored: StoredSpan) -> None:
    """Emit ``stored`` as an OTel span with its own ids. Never raises into the caller: the
    span is already stored, and telemetry must not fail a run."""
    telemetry = _telemetry
    if telemetry is None:
        return
    try:
        _export(telemetry, stored)
    except Exception:
        logger.exception("could not export span %s of %s", stored.span_id, stored.request_id)


def _export(telemetry: Telemetry, stored: StoredSpan) -> None:
    trace_id = int(stored.request_id, 16)
    # A root span starts a trace of its own even inside a request or task span.
    context = Context()
    if stored.parent_span_id:
        parent = trace.SpanContext(
            trace_id,
            int(stored.parent_span_id, 16),
            is_remote=False,
            trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
        )
        context = trace.set_span_in_context(trace.NonRecordingSpan(parent))
    name, kind, attributes = genai_attributes(stored)
    links = []
    current = trace.get_current_span().get_span_context()
    if not stored.parent_span_id and current.is_valid and current.trace_id != trace_id:
        links.append(Link(current, {"harness.link": "driven_by"}))
    token = _pinned_ids.set((trace_id, int(stored.span_id, 16)))
    try:
        span = telemetry.tracer.start_span(
            name,
            context=context,
            kind=kind,
            attributes=attributes,
            links=links,
            start_time=_nanos(stored.started_at),
        )
    finally:
        _pinned_ids.reset(token)
    if stored.status != "ok":
        description = str(_error(record_of(stored.kind, stored.attributes)) or stored.status)
        span.set_status(Status(StatusCode.ERROR, description[:500]))
    span.end(end_time=_nanos(stored.ended_at))


def genai_attributes(stored: StoredSpan) -> tuple[str, SpanKind, dict[str, Any]]:
    """The span's OTel name, kind and attributes under the GenAI semantic conventions."""
    attrs = stored.attributes
    record = record_of(stored.kind, attrs)
    out: dict[str, Any] = {
        "harness.request_id": stored.request_id,
        "harness.tenant": stored.tenant,
        "harness.span.kind": stored.kind,
        "harness.span.name": stored.name,
        "harness.status": stored.status,
    }
    for key, value in attrs.items():
        converted = _attribute_value(value)
        if converted is not None:
            out[f"harness.{key}"] = converted
    error_code = record.error_code if isinstance(record, ModelCall | ToolCallSpan) else None
    if error_code:
        out["error.type"] = str(error_code)
    elif stored.status != "ok":
        out["error.type"] = stored.status
    audit = dict(stored.audit)
    capture = settings.HARNESS_OTEL_CAPTURE_CONTENT
    name, kind = f"{stored.kind} {stored.name}", SpanKind.INTERNAL
    if isinstance(record, AgentSession):
        name = f"invoke_agent {stored.name}"
        out |= {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": stored.name}
        _set(out, "gen_ai.usage.input_tokens", record.prompt_tokens)
        _set(out, "gen_ai.usage.output_tokens", record.completion_tokens)
        # The run's outcome beside its status, and its counts as numbers a backend can sum
        # (``harness.outcome_counts`` is the same as one JSON string).
        counts = record.outcome_counts
        for kind, count in counts.items() if isinstance(counts, dict) else ():
            if isinstance(count, int):
                out[f"harness.outcome_count.{kind}"] = count
    elif isinstance(record, ModelCall):
        route = str(record.route or "")
        provider, _, model = route.partition(":")
        name, kind = f"chat {model or stored.name}", SpanKind.CLIENT
        out["gen_ai.operation.name"] = "chat"
        _set(out, "gen_ai.provider.name", provider or None)
        _set(out, "gen_ai.request.model", model or None)
        _set(out, "gen_ai.response.model", record.model)
        _set(out, "gen_ai.usage.input_tokens", record.prompt_tokens)
        _set(out, "gen_ai.usage.output_tokens", record.completion_tokens)
        if record.finish_reason:
            out["gen_ai.response.finish_reasons"] = [str(record.finish_reason)]
        request, response = audit.get("model_request"), audit.get("model_response")
        if capture and request:
            out["gen_ai.input.messages"] = _json(request.get("messages", []))
            out["gen_ai.tool.definitions"] = _json(request.get("tools", []))
        if capture and response:
            out["gen_ai.output.messages"] = _json([response])
    elif isinstance(record, ToolCallSpan):
        name = f"execute_tool {record.tool or stored.name}"
        out |= {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.type": "function"}
        _set(out, "gen_ai.tool.name", record.tool or stored.name)
        _set(out, "gen_ai.tool.call.id", record.call_id)
        io = audit.get("tool_io")
        if capture and io:
            out["gen_ai.tool.call.arguments"] = _json(io.get("arguments"))
            out["gen_ai.tool.call.result"] = _json(
                io.get("result") if io.get("error") is None else {"error": io.get("error")}
            )
    elif isinstance(record, PolicyCheck):
        _set(out, "gen_ai.tool.name", record.tool)
        _set(out, "gen_ai.tool.call.id", record.call_id)
    return name, kind, out


def _error(record: SpanRecord | None) -> Any:
    """What a failed span says went wrong (text, or a refusal's structured error)."""
    if isinstance(record, ModelCall | AgentSession | PolicyCheck):
        return record.error
    return None


def _set(out: dict[str, Any], key: str, value: Any) -> None:
    if value is not None and value != "":
        out[key] = value


def _attribute_value(value: Any) -> Any:
    """OTel attribute values are primitives or flat lists of one primitive type."""
    if value is None:
        return None
    if isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple) and value and all(isinstance(v, str) for v in value):
        return list(value)
    return _json(value)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))


def _nanos(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000_000)


def get_provider() -> TracerProvider | None:
    return _telemetry.provider if _telemetry else None
