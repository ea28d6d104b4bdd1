"""The idempotency store: one row per executed tool call, keyed by its idempotency key.

The key is the run id and the call id, so a call executed again (a resumed run, a redelivered
task) finds its row and gets the stored result back instead of acting twice.
"""

from django.db import models
from django.utils import timezone


class ExecutionStatus(models.TextChoices):
    STARTED = "started"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class ToolExecution(models.Model):
    # Unique by a constraint, not ``unique=True``: that would add a LIKE index on PostgreSQL
    # that nothing uses, to every tool call's insert.
    idempotency_key = models.CharField(max_length=200)
    tenant = models.CharField(max_length=64)
    tool = models.CharField(max_length=64)
    status = models.CharField(
        max_length=10, choices=ExecutionStatus.choices, default=ExecutionStatus.STARTED
    )
    # The result and error as the handler gave them, encrypted (traces.services.seal): a
    # replayed call needs them in clear, and they may carry personal data.
    sealed_outcome = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=0)
    # Set by the writer: the row may be written only when the execution ends.
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["tenant", "started_at"])]
        constraints = [
            models.UniqueConstraint(fields=["idempotency_key"], name="tool_execution_unique_key")
        ]

    def __str__(self) -> str:
        return f"{self.tool} {self.idempotency_key} ({self.status})"
