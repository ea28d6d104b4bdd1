"""The run's state machine: the one module that changes a run's status and lease.

Every transition is one conditional UPDATE whose WHERE clause is the transition's
precondition, and the caller learns from the row count whether it happened (so two processes
racing for one run never both win). A driver's transitions are also fenced: they name the
lease token the driver claimed with, and a claim increments it, so a driver that lost the run
(its lease ran out and another claimed it) can change nothing — its UPDATE matches no row and
it stops quietly.

    queued ──claim──▶ running ──pause──▶ awaiting_approval ──resume──▶ queued
      ▲                  │ │ └─hand_off─▶ queued
      └────requeue───────┘ └─finish─▶ succeeded | failed | step_limit | budget_exceeded | …
    queued | awaiting_approval ──cancel_idle──▶ cancelled

Lock order, for every transaction that touches more than one of these rows: the run row first
(the fenced UPDATE opens the step's transaction), then the tenant's budget day row, then the
tenant's audit chain head.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import DateTimeField, DurationField, ExpressionWrapper, F, Q, Value
from django.utils import timezone

from harness.models import TERMINAL_STATUSES, Run, RunStatus
from policy import services as policy


@dataclass(frozen=True)
class Lease:
    """The right to drive one run: held by ``owner`` with fencing ``token``."""

    run_id: str
    owner: str
    token: int

    @property
    def first(self) -> bool:
        """The run's first claim: no driver wrote anything of it before (its messages,
        spans, audit records, approvals and labels are all a driver's), so none is read."""
        return self.token == 1


class LeaseLost(Exception):
    """This driver no longer holds the run: another claimed it, or it was finished."""


class DriveInterrupted(Exception):
    """The driver gave the run up because a dependency (the database, Redis) stayed
    unreachable: its step was not written, nothing of the run was ended. The lease was
    released (``release``) if the database let it; ``lease`` is what a later driver releases
    first when it could not be (``harness.tasks``), so that the run is taken up at once
    rather than when the lease runs out."""

    def __init__(self, lease: Lease) -> None:
        super().__init__(f"run {lease.run_id}: driver {lease.owner} gave the run up")
        self.lease = lease


def lease_duration() -> timedelta:
    return timedelta(seconds=settings.HARNESS_RUN_LEASE_S)


def claim(run_id: str, owner: str) -> Lease | None:
    """Take a queued run, or a running one whose driver's lease ran out (``None`` if neither).

    The claim increments the fencing token: from now on only this lease can write for the run.
    One statement: UPDATE … RETURNING the new token.
    """
    now = timezone.now()
    meta = Run._meta
    quote = connection.ops.quote_name
    stamp = meta.get_field("updated_at").get_db_prep_value(now, connection)
    expires = meta.get_field("lease_expires_at").get_db_prep_value(
        now + lease_duration(), connection
    )
    sql = (
        f"UPDATE {quote(meta.db_table)} SET {quote('status')} = %s, {quote('lease_owner')} = %s, "  # noqa: S608
        f"{quote('lease_token')} = {quote('lease_token')} + 1, {quote('lease_expires_at')} = %s, "
        f"{quote('started_at')} = COALESCE({quote('started_at')}, %s), {quote('updated_at')} = %s "
        f"WHERE {quote('id')} = %s AND ({quote('status')} = %s OR ({quote('status')} = %s AND "
        f"{quote('lease_expires_at')} < %s)) RETURNING {quote('lease_token')}"
    )
    params = [
        RunStatus.RUNNING,
        owner,
        expires,
        stamp,
        stamp,
        meta.pk.get_db_prep_value(run_id, connection),
        RunStatus.QUEUED,
        RunStatus.RUNNING,
        stamp,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return None if row is None else Lease(run_id=str(run_id), owner=owner, token=row[0])


def start_deadline(lease: Lease) -> None:
    """Count the run's deadline from now, its first claim, not from when it was queued: time
    spent waiting for a worker (a backlog, a dead worker, a broker outage) is not the run's.
    ``deadline_at`` moves later by the time queued. Fenced; for the first claim only."""
    now = timezone.now()
    queued = ExpressionWrapper(
        Value(now, output_field=DateTimeField()) - F("created_at"), output_field=DurationField()
    )
    Run.objects.filter(_held(lease), deadline_at__isnull=False).update(
        deadline_at=ExpressionWrapper(F("deadline_at") + queued, output_field=DateTimeField())
    )


def _held(lease: Lease) -> Q:
    return Q(id=lease.run_id, lease_token=lease.token, status=RunStatus.RUNNING)


def renew(lease: Lease) -> bool:
    """Push the lease's expiry on (the heartbeat); False once the lease is lost."""
    now = timezone.now()
    return bool(Run.objects.filter(_held(lease)).update(lease_expires_at=now + lease_duration()))


# The columns a step's checkpoint may write, fenced, in the same statement that checks the lease.
_STEP_FIELDS = frozenset(
    {
        "steps",
        "model_route",
        "prompt_tokens",
        "completion_tokens",
        "cost_usd",
        "unpriced_calls",
        "tool_call_counts",
        "plans",
        "outcome",
        "outcome_counts",
        "sealed_plans",
    }
)


@dataclass(frozen=True)
class Fence:
    """What the fenced checkpoint statement read back in passing: whether a cancellation was
    asked for, and the run's tenant's policy version (number, stamp)."""

    cancel_requested: bool
    policy_version: tuple[int, str] = (0, "")


def checkpoint(
    lease: Lease, fields: dict[str, Any], tenant: str = "", now: datetime | None = None
) -> Fence:
    """The first statement of a step's transaction: check the lease, renew it and write the
    run's counters, in one UPDATE … RETURNING, which also reads ``tenant``'s policy version
    (so a driver learns whether the policy moved without a query of its own). Raises
    ``LeaseLost`` (roll the step back). ``now`` is the stamp written as ``updated_at``: a
    driver that did not hear back from its COMMIT asks ``landed`` whether it is there."""
    unknown = set(fields) - _STEP_FIELDS
    if unknown:
        raise ValueError(f"not a step field: {', '.join(sorted(unknown))}")
    now = now or timezone.now()
    values = {**fields, "lease_expires_at": now + lease_duration(), "updated_at": now}
    version_sql, stamp_sql = policy.version_key_sql()
    row = _update_returning(
        lease,
        values,
        f"{connection.ops.quote_name('cancel_requested_at')}, {version_sql}, {stamp_sql}",
        [tenant, tenant],
    )
    if row is None:
        raise LeaseLost(lease.run_id)
    return Fence(cancel_requested=row[0] is not None, policy_version=(row[1] or 0, row[2] or ""))


def _update_returning(
    lease: Lease, values: dict[str, Any], returning: str, returning_params: list[Any]
) -> tuple | None:
    """``UPDATE harness_run SET … WHERE <lease held> RETURNING <returning>`` (PostgreSQL and
    SQLite both have RETURNING; the ORM's ``update`` would need a second query to read)."""
    meta = Run._meta
    quote = connection.ops.quote_name
    assignments, params = [], []
    for name, value in values.items():
        field = meta.get_field(name)
        assignments.append(f"{quote(field.column)} = %s")
        params.append(field.get_db_prep_save(value, connection))
    table = quote(meta.db_table)
    sql = (
        f"UPDATE {table} SET {', '.join(assignments)} "  # noqa: S608 (names from the model)
        f"WHERE {quote('id')} = %s AND {quote('lease_token')} = %s AND {quote('status')} = %s "
        f"RETURNING {returning}"
    )
    run_id = meta.pk.get_db_prep_value(lease.run_id, connection)
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, run_id, lease.token, RunStatus.RUNNING, *returning_params])
        return cursor.fetchone()


def landed(lease: Lease, stamp: datetime, transition: bool) -> bool:
    """Whether a step whose COMMIT went unanswered (the connection dropped) was committed
    all the same. Only this lease can have written the run since it was claimed (the fence),
    so the run row says it: a checkpoint left its ``stamp`` as ``updated_at``; a transition
    (pause, hand-off, finish) took the run out of ``running``. Raises ``LeaseLost`` if another
    driver claimed the run meanwhile (its token is no longer this lease's)."""
    row = Run.objects.filter(id=lease.run_id).values_list("status", "lease_token", "updated_at")
    found = row.first()
    if found is None or found[1] != lease.token:
        raise LeaseLost(lease.run_id)
    status, _, updated_at = found
    if transition:
        return status != RunStatus.RUNNING
    return status == RunStatus.RUNNING and updated_at == stamp


def release(lease: Lease) -> bool:
    """Give the lease up now (fenced): the run stays ``running`` with a lease that has run
    out, which any driver may claim at once and the next sweep sends to a worker — what a
    driver that died leaves, without the wait. For a driver that cannot write its step (a
    dependency down). True if this lease still held the run."""
    now = timezone.now()
    return bool(
        Run.objects.filter(_held(lease)).update(
            lease_owner="", lease_expires_at=now, updated_at=now
        )
    )


def pause(lease: Lease, detail: str) -> None:
    """running → awaiting_approval (fenced); the lease is given up. Raises ``LeaseLost``."""
    moved = Run.objects.filter(_held(lease)).update(
        status=RunStatus.AWAITING_APPROVAL,
        status_detail=detail,
        lease_owner="",
        lease_expires_at=None,
        updated_at=timezone.now(),
    )
    if not moved:
        raise LeaseLost(lease.run_id)


def resume(run_id: str) -> bool:
    """awaiting_approval → queued, once every held call is decided; True for one caller.

    Waiting for a human does not count against the run's deadline: ``deadline_at`` moves
    later by the wait (``updated_at`` was set when the run paused, and nothing writes a run
    while it waits). The budget's wall time counts driven segments only."""
    now = timezone.now()
    waited = ExpressionWrapper(
        Value(now, output_field=DateTimeField()) - F("updated_at"), output_field=DurationField()
    )
    return bool(
        Run.objects.filter(id=run_id, status=RunStatus.AWAITING_APPROVAL).update(
            status=RunStatus.QUEUED,
            updated_at=now,
            deadline_at=ExpressionWrapper(F("deadline_at") + waited, output_field=DateTimeField()),
        )
    )


def hand_off(lease: Lease) -> bool:
    """running → queued for a worker (the sync deadline passed); fenced."""
    return bool(
        Run.objects.filter(_held(lease)).update(
            status=RunStatus.QUEUED,
            lease_owner="",
            lease_expires_at=None,
            updated_at=timezone.now(),
        )
    )


def finish(lease: Lease, status: str, fields: dict[str, Any]) -> None:
    """running → a terminal status (fenced), with the run's outcome. Raises ``LeaseLost``:
    a run finished by one driver is never rewritten by another."""
    if status not in TERMINAL_STATUSES:
        raise ValueError(f"{status} is not a terminal status")
    now = timezone.now()
    moved = Run.objects.filter(_held(lease)).update(
        **fields,
        status=status,
        finished_at=now,
        updated_at=now,
        lease_owner="",
        lease_expires_at=None,
    )
    if not moved:
        raise LeaseLost(lease.run_id)


def request_cancel(run_id: str) -> None:
    """Ask the run's driver to stop at its next step boundary (the first request counts)."""
    Run.objects.filter(id=run_id, cancel_requested_at__isnull=True).update(
        cancel_requested_at=timezone.now()
    )


def cancel_idle(run_id: str) -> bool:
    """queued | awaiting_approval → cancelled, when nobody drives the run; True if it moved."""
    now = timezone.now()
    return bool(
        Run.objects.filter(
            id=run_id, status__in=[RunStatus.QUEUED, RunStatus.AWAITING_APPROVAL]
        ).update(
            status=RunStatus.CANCELLED,
            stop_reason="cancelled",
            status_detail="The run was cancelled.",
            answer="The run was cancelled before it finished.",
            finished_at=now,
            updated_at=now,
        )
    )


def list_stalled(now: datetime) -> list[Any]:
    """Runs to hand to a worker again: running ones whose lease ran out (their driver died)
    and queued ones nobody picked up for a lease's length (their message was lost).
    The claim, not this list, decides who drives: listing twice is harmless."""
    expired = Run.objects.filter(status=RunStatus.RUNNING, lease_expires_at__lt=now)
    forgotten = Run.objects.filter(status=RunStatus.QUEUED, updated_at__lt=now - lease_duration())
    return [*expired.values_list("id", flat=True), *forgotten.values_list("id", flat=True)]
