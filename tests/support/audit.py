"""The audit chain as tests see it: runs that end (or not), verification, and tampering done
the way an attacker with database access would (raw SQL; on PostgreSQL as a superuser who
bypasses the append-only triggers)."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

from django.core.management import CommandError, call_command
from django.db import connection

from harness.models import Run
from tests import runs
from tests.runs import QUESTION
from traces.chain import RunChain, anchor_run
from traces.models import AuditRecord


def demo_run(client, user: str = "bob", end: bool = True, question: str = QUESTION) -> str:
    """A sync run of the demo agent through the API, by its request id; ``end``: its head is
    linked into the tenant's chain, as the engine does when a run ends (a no-op when the
    engine already did; without: as if its driver died before)."""
    request_id = runs.demo_run(client, user, question)["request_id"]
    if end:
        tenant = AuditRecord.objects.filter(request_id=request_id).first().tenant
        anchor_run(request_id, tenant, RunChain(request_id, tenant).head, final=True)
    return request_id


def still_going(request_id: str, status: str = "awaiting_approval") -> None:
    """The run's row as for a run that has not ended (its driver died, or it waits)."""
    Run.objects.filter(request_id=request_id).update(status=status)


def paused_run(client, monkeypatch) -> str:
    """A run whose engine linked its head without ending it, as when a run pauses: the link is
    not final and the run has not ended."""
    with monkeypatch.context() as patch:
        patch.setattr(
            "harness.engine.driver.anchor_run",
            lambda request_id, tenant, head, final=False: anchor_run(request_id, tenant, head),
        )
        request_id = demo_run(client, end=False)
    still_going(request_id)
    return request_id


def verify(*tenants: str, expect_head: Path | None = None) -> tuple[bool, str]:
    """Run ``manage.py verify_audit``; (exited cleanly, its output)."""
    out = StringIO()
    args = [arg for tenant in tenants for arg in ("--tenant", tenant)]
    if expect_head is not None:
        args += ["--expect-head", str(expect_head)]
    try:
        call_command("verify_audit", *args, stdout=out)
    except CommandError as exc:
        return False, out.getvalue() + str(exc)
    return True, out.getvalue()


def tamper(statement: str, *params) -> None:
    """Raw SQL; on PostgreSQL as a superuser switching the triggers off for the statement."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET session_replication_role = replica")
        try:
            cursor.execute(statement, params)
        finally:
            if connection.vendor == "postgresql":
                cursor.execute("SET session_replication_role = origin")


def record(request_id: str, sequence: int) -> AuditRecord:
    return AuditRecord.objects.get(request_id=request_id, sequence=sequence)
