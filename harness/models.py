import uuid

from django.db import models
from django.db.models import Q


class Tenant(models.Model):
    """A customer organisation: the Casbin domain, the owner of runs, keys and budgets."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class ApiKey(models.Model):
    """A tenant's client credential. Only a SHA-256 digest of the secret is stored."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True)
    key_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

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


class RunMode(models.TextChoices):
    SYNC = "sync"
    ASYNC = "async"


class Run(models.Model):
    """One agent run: its request, its conversation checkpoint and its outcome."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    request_id = models.CharField(max_length=32, unique=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="runs")
    agent = models.CharField(max_length=100)
    user_id = models.CharField(max_length=200)
    input = models.TextField()
    mode = models.CharField(max_length=8, choices=RunMode.choices, default=RunMode.SYNC)
    status = models.CharField(max_length=20, choices=RunStatus.choices, default=RunStatus.QUEUED)
    status_detail = models.TextField(blank=True)
    answer = models.TextField(blank=True)
    model_route = models.CharField(max_length=200, blank=True)
    max_steps = models.PositiveIntegerField()
    steps = models.PositiveIntegerField(default=0)
    # The conversation in the gateway's internal message format: the checkpoint a worker
    # resumes from after another one died.
    messages = models.JSONField(default=list)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    callback_url = models.URLField(max_length=2000, blank=True)
    idempotency_key = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "idempotency_key"],
                condition=~Q(idempotency_key=""),
                name="run_unique_idempotency_key_per_tenant",
            )
        ]
        indexes = [models.Index(fields=["tenant", "status", "created_at"])]

    def __str__(self) -> str:
        return f"{self.agent} {self.request_id} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens
