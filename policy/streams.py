"""How many live event streams a tenant may hold open: a concurrency limit shared by every
web process (the limiter of ``policy.limiter``: Redis, or the database without it).

Each open stream holds one slot with a lease a little longer than a stream may last, so a
slot of a process that died frees itself.
"""

from __future__ import annotations

from django.conf import settings

from policy.errors import TooManyEventStreams
from policy.limiter import get_limiter

# A stream lasts at most this long (the client then reconnects with Last-Event-ID).
MAX_STREAM_S = 600
STREAM_LEASE_S = MAX_STREAM_S + 60
RETRY_AFTER_S = 5


def open_event_stream(tenant: str, stream_id: str) -> None:
    """Take one of the tenant's stream slots for ``stream_id``, or raise
    ``TooManyEventStreams`` (429, ``Retry-After``)."""
    limit = settings.HARNESS_EVENT_STREAMS_PER_TENANT
    limiter = get_limiter()
    if not limiter.acquire_slot(_key(tenant), stream_id, limit, STREAM_LEASE_S):
        raise TooManyEventStreams(
            f"Tenant {tenant} already has {limit} live event streams open; close one or poll "
            "GET /api/v1/runs/{id} instead.",
            RETRY_AFTER_S,
            {"limit": limit, "limiter": limiter.name},
        )


def close_event_stream(tenant: str, stream_id: str) -> None:
    """Free the stream's slot. Idempotent."""
    get_limiter().release_slot(_key(tenant), stream_id)


def _key(tenant: str) -> str:
    return f"streams:{tenant}"
