"""Reading traces back, for the API and the admin."""

from typing import Any

from traces.models import AuditRecord, Span


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
