"""Permission-checked reads of runs."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from harness.errors import RunNotFound
from harness.models import Run, Tenant


def access_run_by_id(tenant: Tenant, run_id: str) -> Run:
    """The tenant's run with this id; another tenant's run is reported as not found."""
    try:
        key = uuid.UUID(str(run_id))
    except ValueError as exc:
        raise RunNotFound(str(run_id)) from exc
    run = Run.objects.filter(id=key, tenant=tenant).first()
    if run is None:
        raise RunNotFound(str(run_id))
    return run


def list_runs(
    tenant: Tenant,
    limit: int = 50,
    cursor: datetime | None = None,
    status: str | None = None,
    outcome: str | None = None,
    agent: str | None = None,
    user: str | None = None,
    session_id: uuid.UUID | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
) -> tuple[list[Run], str | None]:
    """A page of the tenant's runs, newest first, and the cursor of the next page."""
    runs = Run.objects.filter(tenant=tenant)
    filters = {
        "status": status,
        "outcome": outcome,
        "agent": agent,
        "user_id": user,
        "session_id": session_id,
        "created_at__gte": created_after,
        "created_at__lt": created_before,
    }
    runs = runs.filter(**{k: v for k, v in filters.items() if v is not None})
    if cursor is not None:
        runs = runs.filter(created_at__lt=cursor)
    page = list(runs.order_by("-created_at")[: limit + 1])
    # UTC with "Z": safe to paste into a query string as it is.
    next_cursor = (
        page[limit - 1].created_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        if len(page) > limit
        else None
    )
    return page[:limit], next_cursor
