"""State changes of the run API: tenants' keys, starting and executing runs."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from harness.agent_registry import AgentSpec, get_agent
from harness.errors import UnknownTenant
from harness.loop import claim_run, drive_run
from harness.models import ApiKey, Run, RunMode, RunStatus, Tenant
from policy import services as policy

API_KEY_PREFIX = "hk_"


@dataclass(frozen=True)
class IssuedKey:
    api_key: ApiKey
    secret: str


def create_api_key(tenant_slug: str, name: str, replace: bool = False) -> IssuedKey:
    """Issue a key for a tenant. Only its digest is stored; the secret is shown once.

    With ``replace``, earlier live keys of the same name are revoked.
    """
    tenant = Tenant.objects.filter(slug=tenant_slug).first()
    if tenant is None:
        raise UnknownTenant(tenant_slug)
    prefix = secrets.token_hex(6)
    secret = f"{API_KEY_PREFIX}{prefix}_{secrets.token_urlsafe(32)}"
    with transaction.atomic():
        if replace:
            tenant.api_keys.filter(name=name, revoked_at__isnull=True).update(
                revoked_at=timezone.now()
            )
        api_key = ApiKey.objects.create(
            tenant=tenant, name=name, prefix=prefix, key_hash=_digest(secret)
        )
    return IssuedKey(api_key=api_key, secret=secret)


def authenticate_api_key(secret: str) -> ApiKey | None:
    """The live key matching ``secret``, or None. Constant-time comparison of digests."""
    if not secret.startswith(API_KEY_PREFIX):
        return None
    prefix = secret[len(API_KEY_PREFIX) :].split("_", 1)[0]
    api_key = (
        ApiKey.objects.select_related("tenant")
        .filter(prefix=prefix, revoked_at__isnull=True)
        .first()
    )
    if api_key is None or not hmac.compare_digest(api_key.key_hash, _digest(secret)):
        return None
    return api_key


def _digest(secret: str) -> str:
    # Keys carry 256 bits of randomness, so a fast hash is enough (no password stretching).
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class RunRequest:
    agent: str
    user_id: str
    input: str
    mode: str = RunMode.SYNC
    callback_url: str = ""
    max_steps: int | None = None
    idempotency_key: str = ""
    budget: dict[str, Any] | None = None


def start_run(tenant: Tenant, request: RunRequest) -> tuple[Run, bool]:
    """Create a run and, for sync mode, drive it to its end inline; async runs are queued.

    Returns ``(run, created)``: a repeated ``Idempotency-Key`` returns the first run and
    ``created=False``, never a second run. Admission (policy) may refuse a new run with a 429
    error (rate, concurrency, daily budget) or a 400 (a budget above the tenant's maximum).
    """
    agent = get_agent(request.agent)
    if request.idempotency_key:
        existing = Run.objects.filter(
            tenant=tenant, idempotency_key=request.idempotency_key
        ).first()
        if existing:
            return existing, False
    run_id = uuid.uuid4()
    run_budget = policy.resolve_run_budget(tenant.slug, _agent_budget(agent), request.budget)
    policy.admit_run(tenant.slug, str(run_id))
    try:
        with transaction.atomic():
            run = Run.objects.create(
                id=run_id,
                request_id=uuid.uuid4().hex,
                tenant=tenant,
                agent=agent.name,
                user_id=request.user_id,
                input=request.input,
                mode=request.mode,
                max_steps=min(request.max_steps or agent.max_steps, agent.max_steps),
                callback_url=request.callback_url,
                idempotency_key=request.idempotency_key,
            )
            policy.open_run_budget(tenant.slug, str(run_id), run_budget)
            if request.mode == RunMode.ASYNC:
                transaction.on_commit(lambda: _enqueue(run.id))
    except IntegrityError:
        # A concurrent request with the same Idempotency-Key won the insert.
        policy.release_run(tenant.slug, str(run_id))
        return Run.objects.get(tenant=tenant, idempotency_key=request.idempotency_key), False
    except BaseException:
        policy.release_run(tenant.slug, str(run_id))
        raise
    if request.mode == RunMode.SYNC:
        run = execute_run(run.id)
    return run, True


def execute_run(run_id: uuid.UUID | str) -> Run:
    """Claim a queued run and drive it; a run another process claimed is returned as is."""
    if not claim_run(str(run_id)):
        return Run.objects.get(id=run_id)
    return drive_run(str(run_id))


def _agent_budget(agent: AgentSpec) -> policy.RunBudget:
    return policy.RunBudget(
        max_tokens=agent.max_tokens_per_run,
        max_cost_micros=policy.usd_to_micros(agent.max_cost_per_run_usd),
        max_tool_calls=agent.max_tool_calls_per_run,
        max_calls_per_tool=agent.max_calls_per_tool,
        deadline_s=agent.deadline_s,
    )


def resume_run(run_id: str) -> Run | None:
    """Continue a run queued again after its approvals were decided (any worker may).

    Claims it (queued → running, exactly one caller), takes its concurrency slot back and
    drives it from its checkpoint: the held calls are executed or refused first.
    """
    run = Run.objects.select_related("tenant").filter(id=run_id).first()
    if run is None:
        return None
    claimed = Run.objects.filter(id=run_id, status=RunStatus.QUEUED).update(
        status=RunStatus.RUNNING, updated_at=timezone.now()
    )
    if not claimed:
        return run
    policy.resume_run_slot(run.tenant.slug, str(run.id))
    return drive_run(str(run.id))


def decide_tool_call(
    tenant: Tenant,
    run_id: str,
    call_id: str,
    approver: str,
    approve: bool,
    arguments_sha256: str,
    comment: str = "",
) -> Run:
    """An approver's decision on a held call of one of the tenant's runs (see policy
    approvals); the run resumes on a worker once none of its calls is pending."""
    from harness.queries import access_run_by_id

    run = access_run_by_id(tenant, run_id)
    policy.decide_approval(
        tenant=tenant.slug,
        run_id=str(run.id),
        call_id=call_id,
        approver=approver,
        approve=approve,
        arguments_sha256=arguments_sha256,
        comment=comment,
    )
    run.refresh_from_db()
    return run


def _enqueue(run_id: uuid.UUID) -> None:
    from harness.tasks import execute_run_task

    execute_run_task.delay(str(run_id))
