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
    # Indexes are few on purpose: every one costs each of a step's inserts. A run's spans are
    # found by the unique (request_id, sequence); the admin and retention filter by tenant
    # (a plain index: Django's ``db_index``/``unique`` on a CharField also adds a LIKE index
    # on PostgreSQL, which nothing here uses).
    request_id = models.CharField(max_length=32)
    tenant = models.CharField(max_length=64)
    span_id = models.CharField(max_length=16)
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
            models.UniqueConstraint(fields=["request_id", "sequence"], name="span_unique_sequence"),
            models.UniqueConstraint(fields=["span_id"], name="span_unique_span_id"),
        ]
        indexes = [models.Index(fields=["tenant"], name="span_tenant")]

    def __str__(self) -> str:
        return f"{self.kind} {self.name} ({self.status})"


class AuditKind(models.TextChoices):
    MODEL_REQUEST = "model_request"
    MODEL_RESPONSE = "model_response"
    TOOL_IO = "tool_io"
    POLICY_DECISION = "policy_decision"
    # Who made or changed what outside a run (a dataset made, an experiment run), each
    # subject's records a chain of their own, linked like a run's (experiments.audit).
    ADMIN_ACTION = "admin_action"


class AppendOnlyQuerySet(models.QuerySet):
    """Audit rows are evidence: the ORM refuses to change or remove them in bulk.

    The one way rows leave is retention (``traces.retention``), which deletes whole expired
    runs — a verified prefix of a tenant's link chain and those runs' records — and leaves a
    signed checkpoint in their place. On PostgreSQL, triggers refuse the same in raw SQL.
    """

    def update(self, **kwargs: Any) -> int:
        raise AuditRecordImmutable("update")

    def delete(self) -> tuple[int, dict[str, int]]:
        raise AuditRecordImmutable("delete")

    def bulk_update(self, objs: Any, fields: Any, batch_size: int | None = None) -> int:
        raise AuditRecordImmutable("update")

    def bulk_create(self, objs: Any, *args: Any, **kwargs: Any) -> list[Any]:
        raise AuditRecordImmutable("insert outside the chain")


# Kept under its old name: other code and tests refer to it.
AuditRecordQuerySet = AppendOnlyQuerySet


class AppendOnlyModel(models.Model):
    """A row that is inserted once, with its hash set, and never saved or deleted again."""

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise AuditRecordImmutable("update")
        if not getattr(self, "hash", ""):
            raise AuditRecordImmutable("insert outside the chain")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise AuditRecordImmutable("delete")


class AuditRecord(AppendOnlyModel):
    """What the model was sent and answered, what each tool received and returned, and which
    policy decision allowed or refused what.

    Append-only and hash-chained per run: ``sequence`` numbers a run's records 1, 2, …,
    ``prev_hash`` is the hash of the run's record before (the genesis hash for the first),
    ``hash`` is SHA-256 over the canonical JSON of this record's content and ``prev_hash``.
    A run's head is linked into its tenant's chain (``AuditRunLink``) when it pauses or ends.
    Written only through ``traces.chain`` (``RunChain.link`` + ``insert_records``).
    """

    # As for spans: the unique (request_id, sequence) serves lookups by run, a plain index
    # those by tenant.
    request_id = models.CharField(max_length=32)
    tenant = models.CharField(max_length=64)
    span_id = models.CharField(max_length=16)
    kind = models.CharField(max_length=20, choices=AuditKind.choices)
    payload = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now)
    sequence = models.PositiveBigIntegerField()
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        ordering = ["request_id", "sequence"]
        constraints = [
            models.UniqueConstraint(
                fields=["request_id", "sequence"], name="audit_unique_run_sequence"
            )
        ]
        indexes = [models.Index(fields=["tenant"], name="audit_tenant")]

    def __str__(self) -> str:
        return f"{self.kind} {self.sequence} in {self.request_id}"


class AuditRunLink(AppendOnlyModel):
    """A run's chain head, linked into its tenant's chain when the run paused or ended.

    ``sequence`` numbers a tenant's links 1, 2, …; ``run_sequence`` and ``run_hash`` name the
    run's last record at that moment; ``prev_hash`` is the tenant's previous link (or the
    retention checkpoint's hash) and ``hash`` covers all of it. A run that pauses and resumes
    has one link per pause or end. Written only by ``traces.chain.anchor_run``.

    ``final``: the link written when the run ended (covered by ``hash``): nothing may follow it
    in the run's chain (a PostgreSQL trigger refuses it; ``verify_audit`` reports it). It may
    name the same record as the run's last pause link (a run cancelled while it waited).
    """

    tenant = models.CharField(max_length=64, db_index=True)
    sequence = models.PositiveBigIntegerField()
    request_id = models.CharField(max_length=32, db_index=True)
    run_sequence = models.PositiveBigIntegerField()
    run_hash = models.CharField(max_length=64)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)
    final = models.BooleanField(default=False)

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        ordering = ["tenant", "sequence"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "sequence"], name="audit_link_unique_sequence"
            ),
            models.UniqueConstraint(
                fields=["request_id", "run_sequence", "final"],
                name="audit_link_unique_run_head_final",
            ),
            models.UniqueConstraint(
                fields=["request_id"],
                condition=models.Q(final=True),
                name="audit_link_one_final_per_run",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tenant} link {self.sequence}: run {self.request_id} at {self.run_sequence}"


class AuditChainHead(models.Model):
    """The last link of a tenant's chain of run links.

    ``anchor_run`` locks this row (``SELECT … FOR UPDATE``) once per run pause or end, so
    concurrent anchors of one tenant take turns and never fork the chain; verification compares
    the chain's end with it, which is how a deleted last link is noticed. ``signature`` is an
    HMAC with the settings key; ``manage.py audit_head`` exports it, so a chain cut back to an
    earlier signed head is caught by ``verify_audit --expect-head``.
    """

    tenant = models.CharField(max_length=64, unique=True)
    sequence = models.PositiveBigIntegerField(default=0)
    hash = models.CharField(max_length=64)
    signature = models.CharField(max_length=64)
    updated_at = models.DateTimeField(auto_now=True)
    # From this link on, an ended run's last link must be final: links before it were written
    # before final links existed (the upgrade set it past each tenant's head then).
    final_links_from = models.PositiveBigIntegerField(default=1)

    def __str__(self) -> str:
        return f"{self.tenant} head at link {self.sequence}"


class AuditCheckpoint(models.Model):
    """The last run link retention deleted: where a tenant's chain verification starts.

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
        return f"{self.tenant} checkpoint at link {self.sequence}"


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
