"""The trace store's public face: other apps record through a ``TraceRecorder``.

Masking for other apps' own storage (a run's input, conversation checkpoint and answer) goes
through ``TraceRecorder.mask`` during a run, or ``mask_for_storage`` before one has started.
"""

from collections.abc import Mapping
from typing import Any

from traces.chain import (
    ChainReport,
    RunChain,
    anchor_run,
    canonical_json,
    finalize_run,
    insert_records,
    normalize_json,
    register_ended_runs,
    verify_chain,
)
from traces.errors import NonFiniteNumber
from traces.keys import fingerprint_search_keys
from traces.masking import under
from traces.models import AuditKind, SpanKind, SpanStatus
from traces.recorder import OpenSpan, TraceRecorder, new_masker, store_fingerprints
from traces.retention import RetentionReport, delete_expired_traces, runs_expired
from traces.rows import insert_rows, new_row, sent_together
from traces.sealing import seal, unseal

__all__ = [
    "AuditKind",
    "ChainReport",
    "NonFiniteNumber",
    "OpenSpan",
    "RetentionReport",
    "RunChain",
    "SpanKind",
    "SpanStatus",
    "TraceRecorder",
    "anchor_run",
    "canonical_json",
    "delete_expired_traces",
    "finalize_run",
    "fingerprint_search_keys",
    "insert_records",
    "insert_rows",
    "mask_for_storage",
    "new_row",
    "normalize_json",
    "register_ended_runs",
    "runs_expired",
    "seal",
    "sent_together",
    "under",
    "unseal",
    "verify_chain",
]


def mask_for_storage(
    request_id: str, tenant: str, value: Any, sensitive: Mapping[str, str] | None = None
) -> Any:
    """A masked copy of ``value`` that may be stored; fingerprints are kept for the trace.

    Side effect: the fingerprints of what was masked are stored under ``request_id``.
    Idempotent: masking a masked value changes nothing.
    """
    masker = new_masker(tenant)
    masked = masker.mask(value, sensitive)
    store_fingerprints(request_id, tenant, masker)
    return masked
