"""Reading traces back, for the API and the admin."""

from typing import Any

from traces.keys import fingerprint_search_keys
from traces.masking import FINGERPRINTED_KINDS, fingerprint, normalize
from traces.models import AuditRecord, Fingerprint, Span


def list_spans(request_id: str) -> list[Span]:
    return list(Span.objects.filter(request_id=request_id).order_by("sequence"))


def get_trace(request_id: str) -> dict[str, Any]:
    """The whole trace of a run: spans in order and the audit records of each span."""
    audit_by_span: dict[str, list[dict[str, Any]]] = {}
    for record in AuditRecord.objects.filter(request_id=request_id).order_by("id"):
        audit_by_span.setdefault(record.span_id, []).append(
            {"kind": record.kind, "payload": record.payload, "created_at": record.created_at}
        )
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


def identifier_digests(value: str) -> dict[str, str]:
    """The fingerprint ``value`` would have as each kind it can be: ``{digest: kind}``."""
    digests = {}
    for kind in FINGERPRINTED_KINDS:
        normalized = normalize(kind, value)
        if normalized:
            for key in fingerprint_search_keys():  # older keys too: rotation keeps search
                digests[fingerprint(key, kind, normalized)] = kind
    return digests


def find_runs_by_identifier(tenant: str, value: str) -> list[str]:
    """Request ids of ``tenant``'s runs that touched ``value`` (a phone number, e-mail, ID…),
    newest first. The value itself is stored nowhere: its keyed fingerprint is compared."""
    digests = identifier_digests(value)
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
    """The request ids of traces that called ``tool`` (a subquery, for filtering runs)."""
    return Span.objects.filter(kind="tool_call", name=tool).values("request_id")
