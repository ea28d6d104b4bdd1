"""Permission-checked reads of runs."""

from __future__ import annotations

import uuid

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
