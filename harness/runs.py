"""Runs: create, start, drive (inline or on a worker), cancel and recover them, and an
approver's decision on a held call. The engine (``harness.engine``) does the driving; this
module is what the API, the console, the commands, the tasks and experiments call."""

from __future__ import annotations

import contextvars
import functools
import hashlib
import hmac
import json
import threading
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, close_old_connections, connection, transaction
from django.utils import timezone

from harness import webhooks
from harness.agent_registry import AgentSpec, get_agent
from harness.dependencies import unavailable_dependency
from harness.dispatch import enqueue_run
from harness.driver_threads import DriverThreads
from harness.engine import state
from harness.engine.approvals import edit_held_arguments
from harness.engine.drive import Driver
from harness.engine.driver import drive_run
from harness.errors import (
    IdempotencyKeyReused,
    SessionBusy,
    SessionMismatch,
    SessionNotFound,
)
from harness.events import EventType, emit, emit_first
from harness.models import TERMINAL_STATUSES, Run, RunMode, Session, Tenant
from harness.queries import access_run_by_id
from harness.spend_estimates import run_estimate
from policy import services as policy
from traces.services import finalize_run, fingerprint_search_keys, mask_for_storage, seal


@dataclass(frozen=True)
class RunRequest:
    agent: str
    user_id: str
    input: str
    mode: str = RunMode.SYNC
    callback_url: str = ""
    max_steps: int | None = None
    deadline_s: float | None = None
    idempotency_key: str = ""
    session_id: str = ""
    budget: dict[str, Any] | None = None
    experiment: bool = False  # an experiment's run (experiments.services)

    def digests(self) -> list[str]:
        """Keyed digests (HMAC-SHA256, under each fingerprint key, the current one first) of
        everything the request asks for except its Idempotency-Key. Keyed: the request holds
        the clear input, and a stored plain hash could be tested against guesses."""
        fields = asdict(self)
        fields.pop("idempotency_key")
        text = json.dumps(fields, sort_keys=True, default=str, separators=(",", ":")).encode()
        return [
            hmac.new(key, text, hashlib.sha256).hexdigest() for key in fingerprint_search_keys()
        ]


def start_run(tenant: Tenant, request: RunRequest) -> tuple[Run, bool]:
    """Create a run; drive a sync run inline up to the sync deadline, queue an async one.

    Returns ``(run, created)``: a repeated ``Idempotency-Key`` returns the first run and
    ``created=False``, never a second run. A sync run still going at the deadline, or paused
    for an approval, is returned as it stands (the API answers 202). Admission (policy) may
    refuse a new run with a 429 error (rate, concurrency, daily budget) or a 400 (a budget
    above the tenant's maximum).
    """
    run, created = create_run(tenant, request)
    if created and request.mode == RunMode.SYNC:
        run = drive_inline(run.id, settings.HARNESS_SYNC_DEADLINE_S)
    return run, created


def create_run(tenant: Tenant, request: RunRequest) -> tuple[Run, bool]:
    """Record a queued run (and enqueue it if async); the caller decides who drives it."""
    agent = get_agent(request.agent)
    digests = request.digests()
    if request.idempotency_key:
        existing = Run.objects.filter(
            tenant=tenant, idempotency_key=request.idempotency_key
        ).first()
        if existing:
            return _same_request(existing, digests), False
    if request.callback_url:
        webhooks.check_callback_url(request.callback_url)
    deadline_s = request.deadline_s or agent.deadline_s or settings.HARNESS_DEFAULT_DEADLINE_S
    request_id = uuid.uuid4().hex
    run_id = uuid.uuid4()
    limits = policy.tenant_limits(tenant.slug)
    run_budget = policy.resolve_run_budget(_agent_budget(agent), request.budget, limits)
    policy.admit_run(tenant.slug, str(run_id), limits)
    try:
        with transaction.atomic():
            # Inside the transaction: a refused run leaves no new session behind.
            session = _session_for(tenant, agent.name, request)
            run = Run.objects.create(
                id=run_id,
                request_id=request_id,
                tenant=tenant,
                session=session,
                agent=agent.name,
                user_id=request.user_id,
                # Readable copy masked; the clear input only sealed, for the loop.
                input=mask_for_storage(request_id, tenant.slug, request.input),
                sealed=seal({"input": request.input}),
                mode=request.mode,
                max_steps=min(request.max_steps or agent.max_steps, agent.max_steps),
                deadline_at=timezone.now() + timedelta(seconds=deadline_s),
                callback_url=request.callback_url,
                idempotency_key=request.idempotency_key,
                request_digest=digests[0] if request.idempotency_key else "",
                experiment=request.experiment,
            )
            policy.open_run_budget(tenant.slug, str(run_id), run_budget)
            estimate = run_estimate(tenant, agent, run_budget, limits)
            policy.reserve_run(tenant.slug, str(run_id), run_budget, limits, estimate)
            emit_first(run.id, EventType.RUN_QUEUED, {"mode": run.mode})
            if request.mode == RunMode.ASYNC:
                enqueue_run(run.id)
    except IntegrityError:
        # A concurrent request with the same Idempotency-Key won the insert.
        policy.release_run(tenant.slug, str(run_id))
        first = Run.objects.get(tenant=tenant, idempotency_key=request.idempotency_key)
        return _same_request(first, digests), False
    except BaseException:
        policy.release_run(tenant.slug, str(run_id))
        raise
    return run, True


def _same_request(run: Run, digests: list[str]) -> Run:
    """The run an Idempotency-Key created, if this request is the same one (runs created
    before digests were kept are taken as the same)."""
    if run.request_digest and not any(
        hmac.compare_digest(run.request_digest, digest) for digest in digests
    ):
        raise IdempotencyKeyReused(run.idempotency_key, str(run.id))
    return run


def _session_for(tenant: Tenant, agent: str, request: RunRequest) -> Session:
    if not request.session_id:
        return Session.objects.create(tenant=tenant, agent=agent, user_id=request.user_id)
    try:
        session = Session.objects.filter(id=uuid.UUID(request.session_id), tenant=tenant).first()
    except ValueError:
        session = None
    if session is None:
        raise SessionNotFound(request.session_id)
    if session.agent != agent or session.user_id != request.user_id:
        raise SessionMismatch(session, agent, request.user_id)
    if session.runs.exclude(status__in=TERMINAL_STATUSES).exists():
        raise SessionBusy(session)
    return session


def drive_inline(run_id: uuid.UUID, deadline_s: float | None) -> Run:
    """Drive a run in a thread of this process; at the deadline, ask it to hand off.

    The request waits at most ``deadline_s`` (None: until the run ends): past it the driver
    finishes its current step and gives the run to a worker, while the caller gets the run as
    it stands.
    """
    driver = Driver(owner=f"inline:{uuid.uuid4().hex[:12]}")
    try:
        lease = state.claim(str(run_id), driver.owner)
    except Exception as exc:
        if unavailable_dependency(exc) is not None:
            enqueue_run(run_id)  # the run is committed: a worker takes it up once it can
        raise
    if lease is None:
        return Run.objects.get(id=run_id)
    done = threading.Event()

    def drive() -> None:
        try:
            drive_run(str(run_id), driver, lease)
        except Run.DoesNotExist:
            pass  # deleted under us (retention, tests); nothing left to drive
        except state.DriveInterrupted as exc:
            # A dependency stayed down past the step's retries: the web process does not
            # wait for it; a worker takes the run up (it retries until the database is back).
            enqueue_run(run_id, release=(exc.lease.owner, exc.lease.token))
        finally:
            done.set()

    # The caller's context (its OpenTelemetry span among it) goes with the run to the thread.
    _driver_threads.submit(functools.partial(contextvars.copy_context().run, drive))
    # While the request waits its connection is idle: with the pool (CONN_MAX_AGE 0) it goes
    # back now, so that a sync run in flight holds one pooled connection, its driver's, not two.
    if not connection.in_atomic_block:
        close_old_connections()
    if not done.wait(timeout=deadline_s):
        driver.handoff.set()
    return Run.objects.get(id=run_id)


_driver_threads = DriverThreads()


def wait_for_inline_runs(timeout_s: float) -> bool:
    """Wait until this process drives no run inline, then end the idle driver threads and
    close their connections (graceful shutdown, tests)."""
    return _driver_threads.drain(timeout_s)


def execute_run(
    run_id: uuid.UUID | str, owner: str = "", release: tuple[str, int] | None = None
) -> Run | None:
    """Claim a queued (or abandoned) run and drive it; a run driven elsewhere is left alone.
    None if the run is gone. ``release``: the (owner, token) of a lease its driver gave up
    without being able to release it, released first (fenced: nothing happens unless that
    very lease still holds the run). Raises ``state.DriveInterrupted`` when the driver gives
    the run up (a dependency down), and a dependency's connection error met before it drives."""
    if release:
        state.release(state.Lease(run_id=str(run_id), owner=release[0], token=int(release[1])))
    driver = Driver(owner=owner or f"worker:{uuid.uuid4().hex[:12]}")
    lease = state.claim(str(run_id), driver.owner)
    if lease is None:
        return Run.objects.filter(id=run_id).first()
    if lease.first:  # queued until now: the deadline counts from here (docs/runs.md)
        state.start_deadline(lease)
    return drive_run(str(run_id), driver, lease)


def _agent_budget(agent: AgentSpec) -> policy.RunBudget:
    return policy.RunBudget(
        max_tokens=agent.max_tokens_per_run,
        max_cost_micros=policy.usd_to_micros(agent.max_cost_per_run_usd),
        max_tool_calls=agent.max_tool_calls_per_run,
        max_calls_per_tool=agent.max_calls_per_tool,
        deadline_s=agent.deadline_s,
    )


def decide_tool_call(
    tenant: Tenant,
    run_id: str,
    call_id: str,
    approver: str,
    approve: bool,
    arguments_sha256: str,
    comment: str = "",
    arguments_patch: dict[str, Any] | None = None,
) -> Run:
    """An approver's decision on a held call of one of the tenant's runs (see policy
    approvals); with ``arguments_patch`` (a JSON Merge Patch) the call is approved to run with
    the approver's arguments. The run resumes on a worker once none of its calls is pending.

    The approver's authority is checked first (``acting_user_required``,
    ``permission_denied``), then the decision's own checks, and only then the edit: the
    schema, and the policy as it stands on the edited arguments (``approval_edit_refused``,
    409 when a rule refuses them, recorded in the run's trace)."""
    run = access_run_by_id(tenant, run_id)
    edit = None
    if arguments_patch is not None:

        def edit(approval: policy.ToolApproval) -> policy.EditedArguments:
            return edit_held_arguments(run, approval, arguments_patch, approver)

    policy.decide_approval(
        tenant=tenant.slug,
        run_id=str(run.id),
        call_id=call_id,
        approver=approver,
        approve=approve,
        arguments_sha256=arguments_sha256,
        comment=comment,
        edit=edit,
    )
    run.refresh_from_db()
    return run


def cancel_run(run: Run) -> Run:
    """Cancel a run: at once if nobody drives it, else at its driver's next step boundary."""
    state.request_cancel(str(run.id))
    with transaction.atomic():
        idle = state.cancel_idle(str(run.id))
        if idle:  # ended without its driver: close its audit chain here
            finalize_run(run.request_id, run.tenant.slug)
    run.refresh_from_db()
    if idle:
        policy.release_run(run.tenant.slug, str(run.id))
        policy.release_run_budget(run.tenant.slug, str(run.id))
        emit(run.id, EventType.RUN_FINISHED, {"status": run.status, "stop_reason": "cancelled"})
        webhooks.queue_run_event(run, f"run.{run.status}")
    return run


def recover_stalled_runs() -> int:
    """Re-queue runs whose driver died (lease ran out) and queued runs nobody picked up."""
    stalled = state.list_stalled(timezone.now())
    for run_id in stalled:
        enqueue_run(run_id)
    return len(stalled)


def ended_request_ids(tenant: str) -> Iterable[str]:
    """The request ids of ``tenant``'s runs in a terminal status (for audit verification:
    ``traces.chain.register_ended_runs``)."""
    return (
        Run.objects.filter(tenant__slug=tenant, status__in=TERMINAL_STATUSES)
        .values_list("request_id", flat=True)
        .iterator(chunk_size=5000)
    )
