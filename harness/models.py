import base64
import secrets
import uuid
from decimal import Decimal

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone


def new_webhook_secret() -> str:
    """A Standard Webhooks signing secret: ``whsec_`` + base64 of 32 random bytes."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


class Tenant(models.Model):
    """A customer organisation: the Casbin domain, the owner of runs, keys and budgets."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    # Signs the tenant's webhooks (Standard Webhooks); receivers verify with it.
    webhook_secret = models.CharField(max_length=100, default=new_webhook_secret)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class ApiKey(models.Model):
    """A tenant's client credential. Only a SHA-256 digest of the secret is stored.

    ``scopes``: the key scopes (``policy.key_scopes``) its client may call; ``expires_at``:
    when it stops authenticating (none: never); ``replaced_by``: the key a rotation issued in
    its place."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100)
    owner = models.CharField(
        max_length=200, blank=True, default="", help_text="Who answers for the key."
    )
    prefix = models.CharField(max_length=16, unique=True)
    key_hash = models.CharField(max_length=64)
    scopes = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    replaced_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="replaces"
    )

    class Meta:
        ordering = ["tenant", "name"]

    def __str__(self) -> str:
        return f"{self.tenant.slug}/{self.name} ({self.prefix}…)"


class RunStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    AWAITING_APPROVAL = "awaiting_approval"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    BUDGET_EXCEEDED = "budget_exceeded"
    STEP_LIMIT = "step_limit"
    DEADLINE_EXCEEDED = "deadline_exceeded"


TERMINAL_STATUSES = frozenset(
    {
        RunStatus.SUCCEEDED,
        RunStatus.FAILED,
        RunStatus.CANCELLED,
        RunStatus.BUDGET_EXCEEDED,
        RunStatus.STEP_LIMIT,
        RunStatus.DEADLINE_EXCEEDED,
    }
)


class RunOutcome(models.TextChoices):
    """What happened inside a run (``harness.engine.outcome``): the worst kind it met."""

    CLEAN = "clean"
    CORRECTED = "corrected"
    REFUSED = "refused"
    DENIED = "denied"
    TOOL_FAILED = "tool_failed"


class RunMode(models.TextChoices):
    SYNC = "sync"
    ASYNC = "async"


class Session(models.Model):
    """A conversation with one agent for one end user; each run adds a turn to it."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="sessions")
    agent = models.CharField(max_length=100)
    user_id = models.CharField(max_length=200)
    # The conversation so far (system prompt excluded), in the gateway's message format:
    # masked here, clear only in ``sealed_messages`` (encrypted).
    messages = models.JSONField(default=list)
    sealed_messages = models.TextField(blank=True)
    # A summary of the first ``summary_covers`` messages, made when the context grew too long.
    summary = models.TextField(blank=True)
    summary_covers = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]

    def __str__(self) -> str:
        return f"session {self.id} ({self.agent}, {self.user_id})"


class Run(models.Model):
    """One agent run: its request, its conversation checkpoint and its outcome."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    request_id = models.CharField(max_length=32, unique=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="runs")
    session = models.ForeignKey(
        Session, on_delete=models.PROTECT, related_name="runs", null=True, blank=True
    )
    agent = models.CharField(max_length=100)
    user_id = models.CharField(max_length=200)
    input = models.TextField()
    mode = models.CharField(max_length=8, choices=RunMode.choices, default=RunMode.SYNC)
    status = models.CharField(max_length=20, choices=RunStatus.choices, default=RunStatus.QUEUED)
    status_detail = models.TextField(blank=True)
    # Beside the status: the worst of what happened inside the run (refused, denied or failed
    # calls, an answer the honesty guard corrected), and how many of each kind.
    outcome = models.CharField(max_length=20, choices=RunOutcome.choices, default=RunOutcome.CLEAN)
    outcome_counts = models.JSONField(default=dict, blank=True)
    stop_reason = models.CharField(max_length=40, blank=True)
    answer = models.TextField(blank=True)
    model_route = models.CharField(max_length=200, blank=True)
    max_steps = models.PositiveIntegerField()
    steps = models.PositiveIntegerField(default=0)
    # The conversation in the gateway's internal message format, masked (for people). The
    # checkpoint a worker resumes from is ``sealed``: the clear input, messages and answer,
    # encrypted (harness.sealing).
    messages = models.JSONField(default=list)
    sealed = models.TextField(blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    # What the model calls cost, as the gateway priced them (gateway.pricing); the calls it
    # had no price for add nothing here and are counted in ``unpriced_calls`` instead, so a
    # cost of 0 is never mistaken for a free run.
    cost_usd = models.DecimalField(max_digits=16, decimal_places=8, default=Decimal(0))
    unpriced_calls = models.PositiveIntegerField(default=0)
    callback_url = models.URLField(max_length=2000, blank=True)
    idempotency_key = models.CharField(max_length=200, blank=True, default="")
    # HMAC-SHA256 (fingerprint key) of the request that created the run under its
    # Idempotency-Key: the same key with another request is refused (idempotency_key_reused).
    request_digest = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    deadline_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    # Whoever drives the run holds a lease, kept alive by a heartbeat; a run whose lease ran
    # out (its worker died) is taken over by another worker. ``lease_token`` grows at every
    # claim: each write of a driver is fenced on the token it claimed with
    # (``harness.engine.state``), so a driver that lost the run can write nothing.
    lease_owner = models.CharField(max_length=100, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    lease_token = models.PositiveBigIntegerField(default=0)
    # Executed tool calls per tool name: the per-run tool-call limits, carried across drivers.
    tool_call_counts = models.JSONField(default=dict, blank=True)
    # Plan, then act (agents with "strategy": "plan_execute"): the plans written, in order
    # ({"steps": [...], "reason": "first plan" | why it was revised}); the last one is followed.
    # Masked, like the run's other readable fields; the clear copy is sealed.
    plans = models.JSONField(default=list, blank=True)
    sealed_plans = models.TextField(blank=True, default="")
    # A run of an experiment (experiments app): its tools are answered from a recording and
    # it is left out of the tenant's production figures (cost reports).
    experiment = models.BooleanField(default=False)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "idempotency_key"],
                condition=~Q(idempotency_key=""),
                name="run_unique_idempotency_key_per_tenant",
            )
        ]
        indexes = [
            models.Index(fields=["tenant", "status", "created_at"]),
            # GET /api/v1/runs?outcome=… and the admin's outcome filter, newest first.
            models.Index(fields=["tenant", "outcome", "created_at"], name="run_tenant_outcome"),
        ]

    def __str__(self) -> str:
        return f"{self.agent} {self.request_id} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class RunMessage(models.Model):
    """One message of a run's own conversation (from its input on), appended as it happens.

    A checkpoint inserts only the messages added since the previous one, so a step costs the
    same at step 80 as at step 2. ``data`` is masked, for people; ``sealed`` is the clear
    message, encrypted, from which a resuming driver continues.
    """

    # No index of its own: the unique (run, index) serves every lookup by run.
    run = models.ForeignKey(
        Run, on_delete=models.CASCADE, related_name="conversation", db_index=False
    )
    index = models.PositiveIntegerField()
    data = models.JSONField()
    sealed = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["run", "index"]
        constraints = [
            models.UniqueConstraint(fields=["run", "index"], name="run_message_unique_index")
        ]

    def __str__(self) -> str:
        return f"message {self.index} of {self.run_id}"


class RunEvent(models.Model):
    """One event of a run's live stream (SSE); ``sequence`` is the SSE event id."""

    # No index of its own: the unique (run, sequence) serves every lookup by run.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events", db_index=False)
    sequence = models.PositiveIntegerField()
    type = models.CharField(max_length=40)
    data = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "sequence"]
        constraints = [
            models.UniqueConstraint(fields=["run", "sequence"], name="run_event_unique_sequence")
        ]

    def __str__(self) -> str:
        return f"{self.sequence} {self.type}"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending"
    SENDING = "sending"
    DELIVERED = "delivered"
    FAILED = "failed"


class WebhookDelivery(models.Model):
    """One event to deliver to a run's callback URL, retried with backoff until delivered."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="deliveries")
    event_type = models.CharField(max_length=60)
    url = models.URLField(max_length=2000)
    payload = models.JSONField()  # masked, for people; what is sent is ``sealed_payload``
    sealed_payload = models.TextField(blank=True)
    status = models.CharField(
        max_length=12, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True, db_index=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "webhook deliveries"

    def __str__(self) -> str:
        return f"{self.event_type} to {self.url} ({self.status})"


class WebhookAttempt(models.Model):
    delivery = models.ForeignKey(
        WebhookDelivery, on_delete=models.CASCADE, related_name="attempt_log"
    )
    number = models.PositiveIntegerField()
    attempted_at = models.DateTimeField(auto_now_add=True)
    status_code = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    duration_ms = models.FloatField(default=0)

    class Meta:
        ordering = ["delivery", "number"]

    def __str__(self) -> str:
        return f"attempt {self.number}: {self.status_code or self.error[:40]}"


class CostReport(Run):
    """Runs seen as costs: the admin's cost report page (a proxy, no table of its own)."""

    class Meta:
        proxy = True
        verbose_name = "cost report"
        verbose_name_plural = "cost reports"


class StaffTenantGrant(models.Model):
    """Lets a staff user see one tenant's runs, traces and policy in the admin console.

    Superusers see every tenant; a staff user without grants sees nothing.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tenant_grants"
    )
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="staff_grants")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["user", "tenant"]
        constraints = [
            models.UniqueConstraint(fields=["user", "tenant"], name="staff_grant_unique")
        ]

    def __str__(self) -> str:
        return f"{self.user} may see {self.tenant}"


class OidcIdentity(models.Model):
    """The console user a single sign-on identity (issuer + subject) signs in as.

    Created at the identity's first sign-in; a user without one is a local account, which
    single sign-on never signs into (the break-glass superuser stays local).
    """

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oidc_identity"
    )
    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    # What the last sign-in's ID token said, for the console page of the user.
    groups = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_login_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="oidc_identity_unique")
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"


# The SIEM wing's rows (harness/siem/models.py), in this app.
from harness.siem.models import (  # noqa: E402, F401
    SecurityEvent,
    SiemCursor,
    SiemDeadLetter,
)
