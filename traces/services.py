"""The trace store's public face: other apps record through a ``TraceRecorder``."""

from traces.models import AuditKind, SpanKind, SpanStatus
from traces.recorder import OpenSpan, TraceRecorder

__all__ = ["AuditKind", "OpenSpan", "SpanKind", "SpanStatus", "TraceRecorder"]
