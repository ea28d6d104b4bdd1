"""Reading traces back, for the API and the admin."""

from collections.abc import Collection
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Q

from traces.keys import fingerprint_search_keys
from traces.masking import FINGERPRINTED_KINDS, fingerprint
from traces.masking.kinds import search_forms
from traces.masking.plugins import configured_detectors, searchable_kinds, tenant_detectors
from traces.models import AuditRecord, AuditRunLink, Fingerprint, Span, SpanKind, SpanStatus
from traces.recorder import rebuild_model_requests


def list_spans(request_id: str) -> list[Span]:
    return list(Span.objects.filter(request_id=request_id).order_by("sequence"))


def get_trace(request_id: str) -> dict[str, Any]:
    """The whole trace of a run: spans in order and the audit records of each span (each
    model request with the full context it sent, rebuilt from the append-only records).

    Each record carries its place in the run's chain (``sequence``, ``prev_hash``, ``hash``);
    a rebuilt model request also its payload as recorded and hashed (``recorded_payload``), so
    the exported trace can be checked against the chain (``scripts/harness_verify.py``)."""
    records = [
        {
            "span_id": record.span_id,
            "sequence": record.sequence,
            "kind": record.kind,
            "payload": record.payload,
            "created_at": record.created_at,
            "prev_hash": record.prev_hash,
            "hash": record.hash,
        }
        for record in list_audit_records(request_id)
    ]
    recorded = [record["payload"] for record in records]
    rebuild_model_requests(records)
    for record, payload in zip(records, recorded, strict=True):
        if record["payload"] is not payload:
            record["recorded_payload"] = payload
    audit_by_span: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        span_id = record.pop("span_id")
        audit_by_span.setdefault(span_id, []).append(record)
    return {
        "request_id": request_id,
        "spans": [
            {
                "span_id": span.span_id,
                "parent_span_id": span.parent_span_id or None,
                "sequence": span.sequence,
                "kind": span.kind,
                "name": span.name,
                "status": span.status,
                "started_at": span.started_at,
                "ended_at": span.ended_at,
                "duration_ms": span.duration_ms,
                "attributes": span.attributes,
                "audit": audit_by_span.get(span.span_id, []),
            }
            for span in list_spans(request_id)
        ],
    }


def list_audit_records(request_id: str) -> list[AuditRecord]:
    """The run's audit records in chain order, as stored (model requests append-only)."""
    return list(AuditRecord.objects.filter(request_id=request_id).order_by("sequence", "id"))


def get_run_link(request_id: str) -> AuditRunLink | None:
    """The link of the run's chain into its tenant's: the final one if the run ended, else
    the latest (a run paused for approval); None if never linked."""
    return (
        AuditRunLink.objects.filter(request_id=request_id).order_by("-final", "-sequence").first()
    )


def identifier_digests(value: str, tenant: str | None = None) -> dict[str, str]:
    """The fingerprint ``value`` would have as each kind it can be: ``{digest: kind}``
    (built-in kinds, kinds of configured detectors and of ``tenant``'s custom patterns),
    under every listed fingerprint key: older keys too, so rotation keeps search working."""
    digests = {}
    configured_detectors(settings.HARNESS_MASKING_DETECTORS)
    tenant_detectors(tenant)  # registers the tenant's kinds in this process
    for key in fingerprint_search_keys():
        for kind in FINGERPRINTED_KINDS:
            for normalized in search_forms(kind, value):
                digests[fingerprint(key, kind, normalized)] = kind
        for rules in searchable_kinds():
            digests[fingerprint(key, rules.kind, rules.normalize(value))] = rules.kind
    return digests


def find_runs_by_identifier(tenant: str, value: str) -> list[str]:
    """Request ids of ``tenant``'s runs that touched ``value`` (a phone number, e-mail, ID…),
    newest first. The value itself is stored nowhere: its keyed fingerprint is compared."""
    digests = identifier_digests(value, tenant)
    if not digests:
        return []
    rows = (
        Fingerprint.objects.filter(tenant=tenant, digest__in=list(digests))
        .order_by("-created_at")
        .values_list("request_id", flat=True)
    )
    return list(dict.fromkeys(rows))


def list_tool_names(tenants: list[str] | None = None) -> list[str]:
    """Names of the tools called in the traces of ``tenants`` (``None``: all), sorted."""
    spans = Span.objects.filter(kind="tool_call")
    if tenants is not None:
        spans = spans.filter(tenant__in=tenants)
    return sorted(set(spans.values_list("name", flat=True)))


def request_ids_calling(tool: str) -> Any:
    """The request ids of traces where the model called ``tool``: it ran, or the policy
    refused it (a subquery, for filtering runs)."""
    return Span.objects.filter(
        Q(kind=SpanKind.TOOL_CALL, name=tool)
        | Q(kind=SpanKind.POLICY_CHECK, status=SpanStatus.REFUSED, attributes__tool=tool)
    ).values("request_id")


def list_problem_spans(
    tenants: Collection[str] | None, since: datetime, limit: int
) -> list[dict[str, Any]]:
    """The newest ``limit`` refused policy checks and failed tool calls since ``since``, in
    ``tenants`` (``None``: every tenant): kind, name, status and attributes of each."""
    spans = Span.objects.filter(started_at__gte=since).filter(
        Q(kind=SpanKind.POLICY_CHECK, status=SpanStatus.REFUSED)
        | Q(kind=SpanKind.TOOL_CALL, status=SpanStatus.ERROR)
    )
    if tenants is not None:
        spans = spans.filter(tenant__in=sorted(tenants))
    return list(
        spans.order_by("-started_at").values("kind", "name", "status", "attributes")[:limit]
    )


def last_call_failures(
    code: str, tenants: Collection[str] | None, limit: int = 1000
) -> dict[str, dict[str, Any]]:
    """Per tool, the newest of the last ``limit`` tool calls in ``tenants`` (``None``: every
    tenant) that failed with the error ``code`` (e.g. ``tool_drifted``): when, the tenant and
    the run's request id."""
    spans = Span.objects.filter(
        kind=SpanKind.TOOL_CALL, status=SpanStatus.ERROR, attributes__error_code=code
    )
    if tenants is not None:
        spans = spans.filter(tenant__in=sorted(tenants))
    newest: dict[str, dict[str, Any]] = {}
    for row in spans.order_by("-started_at").values("name", "started_at", "tenant", "request_id")[
        :limit
    ]:
        newest.setdefault(row["name"], row)
    return newest


def list_audit_records_after(after_id: int, limit: int) -> list[AuditRecord]:
    """Audit records by insertion (``id``) after ``after_id``: what a reader that keeps its
    own cursor (the SIEM delivery) has not read yet. Stored, masked, rows."""
    return list(AuditRecord.objects.filter(id__gt=after_id).order_by("id")[:limit])


def list_spans_after(after_id: int, limit: int) -> list[Span]:
    """Spans by insertion (``id``) after ``after_id`` (every kind: a reader filters, so that
    its cursor sees every id and can tell a gap from a filtered row)."""
    return list(Span.objects.filter(id__gt=after_id).order_by("id")[:limit])


def count_audit_records_after(after_id: int) -> int:
    return AuditRecord.objects.filter(id__gt=after_id).count()


def count_spans_after(after_id: int, kind: str) -> int:
    return Span.objects.filter(id__gt=after_id, kind=kind).count()
