"""Spans and audit records of runs. This app stores what others hand it and imports no
other app of ours: runs are referred to by their request id and tenant slug."""

from typing import Any

from django.core.validators import MinValueValidator
from django.db import models
from django.utils import timezone

from traces.errors import AuditRecordImmutable


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
    POLICY_DECISION = "policy_decision"


class AuditRecordQuerySet(models.QuerySet):
    """Audit records are evidence: the ORM refuses to change or remove them in bulk.

    The one way rows leave is retention (``traces.retention``), which deletes a verified
    prefix of a tenant's chain and leaves a signed checkpoint in its place.
    """

    def update(self, **kwargs: Any) -> int:
        raise AuditRecordImmutable("update")

    def delete(self) -> tuple[int, dict[str, int]]:
        raise AuditRecordImmutable("delete")

    def bulk_update(self, objs: Any, fields: Any, batch_size: int | None = None) -> int:
        raise AuditRecordImmutable("update")

    def bulk_create(self, objs: Any, *args: Any, **kwargs: Any) -> list[Any]:
        raise AuditRecordImmutable("insert outside the chain")


class AuditRecord(models.Model):
    """What the model was sent and answered, and what each tool received and returned.

    Append-only and hash-chained per tenant: ``sequence`` numbers a tenant's records 1, 2, …,
    ``prev_hash`` is the hash of the record before (or of the retention checkpoint), ``hash``
    is SHA-256 over the canonical JSON of this record's content and ``prev_hash``.
    Written only by ``traces.chain.append_audit_record``.
    """

    request_id = models.CharField(max_length=32, db_index=True)
    tenant = models.CharField(max_length=64, db_index=True)
    span_id = models.CharField(max_length=16)
    kind = models.CharField(max_length=20, choices=AuditKind.choices)
    payload = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now)
    sequence = models.PositiveBigIntegerField()
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)

    objects = AuditRecordQuerySet.as_manager()

    class Meta:
        ordering = ["request_id", "id"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "sequence"], name="audit_unique_sequence")
        ]

    def __str__(self) -> str:
        return f"{self.kind} in {self.request_id}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise AuditRecordImmutable("update")
        if not self.hash:
            raise AuditRecordImmutable("insert outside the chain")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise AuditRecordImmutable("delete")


class AuditChainHead(models.Model):
    """The last link of a tenant's audit chain.

    Appenders lock this row (``SELECT … FOR UPDATE``), so concurrent writers of one tenant
    take turns and never fork the chain; verification compares the chain's end with it, which
    is how a deleted last record is noticed. ``signature`` is an HMAC with the settings key.
    """

    tenant = models.CharField(max_length=64, unique=True)
    sequence = models.PositiveBigIntegerField(default=0)
    hash = models.CharField(max_length=64)
    signature = models.CharField(max_length=64)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.tenant} head at {self.sequence}"


class AuditCheckpoint(models.Model):
    """The last link retention deleted: where a tenant's chain verification starts.

    ``signature`` is an HMAC (``HARNESS_AUDIT_CHECKPOINT_KEY``) over tenant, sequence and hash,
    so a forged checkpoint cannot hide records removed by someone else.
    """

    tenant = models.CharField(max_length=64, unique=True)
    sequence = models.PositiveBigIntegerField(default=0)
    hash = models.CharField(max_length=64)
    signature = models.CharField(max_length=64)
    deleted_before = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.tenant} checkpoint at {self.sequence}"


class Fingerprint(models.Model):
    """A keyed digest of a personal identifier a run touched; the identifier is stored nowhere."""

    request_id = models.CharField(max_length=32)
    tenant = models.CharField(max_length=64)
    kind = models.CharField(max_length=20)
    digest = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["request_id", "kind", "digest"], name="fingerprint_unique_per_trace"
            )
        ]
        indexes = [
            models.Index(fields=["tenant", "digest"], name="fingerprint_tenant_digest"),
            models.Index(fields=["tenant", "created_at"], name="fingerprint_tenant_created"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.digest[:8]} in {self.request_id}"


class RetentionPolicy(models.Model):
    """How long a tenant's traces are kept; tenants without one get the settings default."""

    tenant = models.CharField(max_length=64, unique=True)
    days = models.PositiveIntegerField(validators=[MinValueValidator(1)])

    class Meta:
        verbose_name_plural = "retention policies"

    def __str__(self) -> str:
        return f"{self.tenant}: {self.days} days"


class MaskingPattern(models.Model):
    """A tenant's own detector: a regular expression for an identifier of theirs (an internal
    customer number, say), masked as ``[<kind>:1a2b3c4d]`` and fingerprinted. Saved only
    through ``traces.masking.patterns.save_pattern``, which tests it against ``sample``."""

    tenant = models.CharField(max_length=64)
    kind = models.CharField(max_length=40)
    pattern = models.TextField()
    sample = models.TextField(help_text="Text with at least one value the pattern must find.")
    enabled = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "kind"], name="masking_pattern_unique_kind")
        ]

    def __str__(self) -> str:
        return f"{self.tenant}: {self.kind}"


class MaskingPatternChange(models.Model):
    """An audited edit of a tenant's custom patterns: who, when, before and after."""

    tenant = models.CharField(max_length=64)
    actor = models.CharField(max_length=200)
    action = models.CharField(max_length=16)  # "add", "update" or "remove"
    kind = models.CharField(max_length=40)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["tenant", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.action} {self.kind} by {self.actor}"
