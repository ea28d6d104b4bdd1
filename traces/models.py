"""Spans and audit records of runs. This app stores what others hand it and imports no
other app of ours: runs are referred to by their request id and tenant slug."""

from django.db import models


class SpanKind(models.TextChoices):
    AGENT_SESSION = "agent_session"
    MODEL_CALL = "model_call"
    TOOL_CALL = "tool_call"
    POLICY_CHECK = "policy_check"
    APPROVAL = "approval"
    ACTION_RESPONSE = "action_response"
    CALLBACK = "callback"


class SpanStatus(models.TextChoices):
    OK = "ok"
    ERROR = "error"
    REFUSED = "refused"


class Span(models.Model):
    request_id = models.CharField(max_length=32, db_index=True)
    tenant = models.CharField(max_length=64, db_index=True)
    span_id = models.CharField(max_length=16, unique=True)
    parent_span_id = models.CharField(max_length=16, blank=True)
    sequence = models.PositiveIntegerField()
    kind = models.CharField(max_length=20, choices=SpanKind.choices)
    name = models.CharField(max_length=200)
    status = models.CharField(max_length=10, choices=SpanStatus.choices, default=SpanStatus.OK)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField()
    duration_ms = models.FloatField()
    attributes = models.JSONField(default=dict)

    class Meta:
        ordering = ["request_id", "sequence"]
        constraints = [
            models.UniqueConstraint(fields=["request_id", "sequence"], name="span_unique_sequence")
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.name} ({self.status})"


class AuditKind(models.TextChoices):
    MODEL_REQUEST = "model_request"
    MODEL_RESPONSE = "model_response"
    TOOL_IO = "tool_io"


class AuditRecord(models.Model):
    """What the model was sent and answered, and what each tool received and returned."""

    request_id = models.CharField(max_length=32, db_index=True)
    tenant = models.CharField(max_length=64, db_index=True)
    span_id = models.CharField(max_length=16)
    kind = models.CharField(max_length=20, choices=AuditKind.choices)
    payload = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["request_id", "id"]

    def __str__(self) -> str:
        return f"{self.kind} in {self.request_id}"
