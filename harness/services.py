"""State changes of the run API: tenants' keys, starting and executing runs."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.utils import timezone

from harness.agent_registry import get_agent
from harness.errors import UnknownTenant
from harness.loop import claim_run, drive_run
from harness.models import ApiKey, Run, RunMode, Tenant
from traces.services import mask_for_storage

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


def start_run(tenant: Tenant, request: RunRequest) -> tuple[Run, bool]:
    """Create a run and, for sync mode, drive it to its end inline; async runs are queued.

    Returns ``(run, created)``: a repeated ``Idempotency-Key`` returns the first run and
    ``created=False``, never a second run.
    """
    agent = get_agent(request.agent)
    if request.idempotency_key:
        existing = Run.objects.filter(
            tenant=tenant, idempotency_key=request.idempotency_key
        ).first()
        if existing:
            return existing, False
    request_id = uuid.uuid4().hex
    try:
        with transaction.atomic():
            run = Run.objects.create(
                request_id=request_id,
                tenant=tenant,
                agent=agent.name,
                user_id=request.user_id,
                # Stored masked; a sync run hands the clear input to the loop in memory.
                input=mask_for_storage(request_id, tenant.slug, request.input),
                mode=request.mode,
                max_steps=min(request.max_steps or agent.max_steps, agent.max_steps),
                callback_url=request.callback_url,
                idempotency_key=request.idempotency_key,
            )
            if request.mode == RunMode.ASYNC:
                transaction.on_commit(lambda: _enqueue(run.id))
    except IntegrityError:
        # A concurrent request with the same Idempotency-Key won the insert.
        return Run.objects.get(tenant=tenant, idempotency_key=request.idempotency_key), False
    if request.mode == RunMode.SYNC:
        run = execute_run(run.id, input_text=request.input)
    return run, True


def execute_run(run_id: uuid.UUID | str, input_text: str | None = None) -> Run:
    """Claim a queued run and drive it; a run another process claimed is returned as is."""
    if not claim_run(str(run_id)):
        return Run.objects.get(id=run_id)
    return drive_run(str(run_id), input_text)


def _enqueue(run_id: uuid.UUID) -> None:
    from harness.tasks import execute_run_task

    execute_run_task.delay(str(run_id))
