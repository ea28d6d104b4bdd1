"""Policy state: the version row, audited edits, flow/approval rules, tenant limits, the budget
ledger, pending approvals, the labels a run holds, and the database fallback of the limiter.

Runs and tenants belong to the harness app, which this app never imports: they are referred
to by run id (a UUID string) and tenant slug.
"""

from django.db import models


class TenantPolicyVersion(models.Model):
    """One row per tenant: bumped in the same transaction as any edit of that tenant's policy.

    Every process compares it, on each decision, with the version its caches of that tenant
    were filled at, so an edit reaches every web and worker process on its next decision
    without a restart, and an edit of one tenant never invalidates another tenant's caches.
    """

    tenant = models.CharField(max_length=64, unique=True)
    version = models.PositiveBigIntegerField(default=0)
    # Changes with every bump: caches compare (version, stamp), so a version number seen again
    # (a restored or re-created database) is never mistaken for the rules cached under it.
    stamp = models.CharField(max_length=32, blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["tenant"]

    def __str__(self) -> str:
        return f"{self.tenant}: policy v{self.version}"


class PolicyChange(models.Model):
    """An audited edit: who, when, what before, what after, and the version it produced."""

    tenant = models.CharField(max_length=64)
    actor = models.CharField(max_length=200)
    action = models.CharField(max_length=16)  # "add", "remove" or "update"
    rule = models.JSONField()
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    version = models.PositiveBigIntegerField(db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["tenant", "-created_at"])]

    def __str__(self) -> str:
        return f"v{self.version} {self.action} {self.rule} by {self.actor}"


class RuleKind(models.TextChoices):
    FLOW = "flow", "once a run holds a label, a sink kind is refused or needs approval"
    EXCLUSIVE = "exclusive", "never both labels in one run"
    CALL = "call", "calls of a tool with matching arguments are refused or need approval"


class RuleEffect(models.TextChoices):
    REFUSE = "refuse"
    REQUIRE_APPROVAL = "require_approval"


class PolicyRule(models.Model):
    """A tenant's chain or approval rule. The shipped defaults (policy/defaults.py) always
    apply in addition to these."""

    tenant = models.CharField(max_length=64)
    name = models.SlugField(max_length=100)
    kind = models.CharField(max_length=16, choices=RuleKind.choices)
    label = models.CharField(
        max_length=64, blank=True, help_text="flow: the label held; exclusive: label A"
    )
    other_label = models.CharField(max_length=64, blank=True, help_text="exclusive: label B")
    sink = models.CharField(max_length=64, blank=True, help_text="flow: sink kind, or * for any")
    tool = models.CharField(max_length=64, blank=True, help_text="call: tool name, or *")
    match = models.JSONField(
        default=dict,
        blank=True,
        help_text='call: argument values that must all be equal, e.g. {"action": "escalate"}',
    )
    effect = models.CharField(max_length=20, choices=RuleEffect.choices)
    description = models.TextField(blank=True)
    enabled = models.BooleanField(default=True)
    updated_by = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["tenant", "name"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="policy_rule_unique_name")
        ]

    def __str__(self) -> str:
        return f"{self.tenant}/{self.name}"


class TenantLimits(models.Model):
    """A tenant's limits and ceilings. An empty field means the deployment default
    (``HARNESS_TENANT_*`` settings); an empty daily budget there means unlimited."""

    tenant = models.CharField(max_length=64, unique=True)
    runs_per_second = models.PositiveIntegerField(null=True, blank=True)
    max_concurrent_runs = models.PositiveIntegerField(null=True, blank=True)
    model_calls_per_minute = models.PositiveIntegerField(null=True, blank=True)
    max_tokens_per_run = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="ceiling a request may raise a run's token budget to"
    )
    max_cost_per_run_usd = models.DecimalField(
        max_digits=12, decimal_places=6, null=True, blank=True
    )
    max_tool_calls_per_run = models.PositiveIntegerField(null=True, blank=True)
    daily_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    daily_cost_usd = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    daily_tool_calls = models.PositiveIntegerField(null=True, blank=True)
    # Budget alerts: percentages of the day's and of each run's token and cost budgets
    # (empty: HARNESS_BUDGET_ALERT_THRESHOLDS), and where the day's alerts are POSTed.
    alert_thresholds = models.JSONField(
        null=True, blank=True, help_text="e.g. [50, 80, 100]: percent of a budget"
    )
    alert_url = models.URLField(
        max_length=2000, blank=True, help_text="receives the day's budget.threshold webhooks"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "tenant limits"

    def __str__(self) -> str:
        return f"limits of {self.tenant}"


class BudgetAlert(models.Model):
    """A budget threshold that was crossed: each is announced once per period (a tenant's
    day, or one run), whatever the number of runs and processes that cross it."""

    tenant = models.CharField(max_length=64, db_index=True)
    period = models.CharField(max_length=120, help_text="day:<YYYY-MM-DD> or run:<id>")
    measure = models.CharField(max_length=10)  # tokens | cost
    threshold = models.PositiveSmallIntegerField()
    used = models.BigIntegerField()
    limit = models.BigIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "period", "measure", "threshold"], name="budget_alert_once"
            )
        ]

    def __str__(self) -> str:
        return f"{self.tenant} {self.period} {self.measure} {self.threshold}%"


class BudgetLedger(models.Model):
    """Spend against one budget: a run (``run:<id>``) or a tenant's day
    (``tenant:<slug>:<YYYY-MM-DD>``). Reservations and settlements are conditional UPDATEs."""

    key = models.CharField(max_length=120, unique=True)
    tenant = models.CharField(max_length=64, db_index=True)
    run_id = models.CharField(max_length=36, blank=True)
    day = models.DateField(null=True, blank=True)
    tokens_limit = models.PositiveBigIntegerField(null=True, blank=True)
    tokens_used = models.BigIntegerField(default=0)
    tokens_reserved = models.BigIntegerField(default=0)
    cost_limit_micros = models.BigIntegerField(null=True, blank=True)
    cost_used_micros = models.BigIntegerField(default=0)
    cost_reserved_micros = models.BigIntegerField(default=0)
    tool_calls_limit = models.PositiveIntegerField(null=True, blank=True)
    tool_calls_used = models.PositiveIntegerField(default=0)
    calls_per_tool_limit = models.PositiveIntegerField(null=True, blank=True)
    model_calls = models.PositiveIntegerField(default=0)
    wall_time_limit_ms = models.BigIntegerField(null=True, blank=True)
    wall_time_ms = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.key


class ApprovalStatus(models.TextChoices):
    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"


class ToolApproval(models.Model):
    """A tool call held for a human decision, with its exact arguments and their hash."""

    tenant = models.CharField(max_length=64, db_index=True)
    run_id = models.CharField(max_length=36)
    call_id = models.CharField(max_length=100)
    tool = models.CharField(max_length=64)
    user_id = models.CharField(max_length=200, help_text="the end user the run acts for")
    arguments = models.JSONField()
    arguments_sha256 = models.CharField(max_length=64)
    rule = models.CharField(max_length=100)
    reason = models.TextField()
    policy_version = models.PositiveBigIntegerField()
    self_approval = models.BooleanField(
        default=False,
        help_text="the tool file lets the run's own end user approve this call",
    )
    status = models.CharField(
        max_length=10, choices=ApprovalStatus.choices, default=ApprovalStatus.PENDING
    )
    expires_at = models.DateTimeField()
    decided_by = models.CharField(max_length=200, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    comment = models.TextField(blank=True)
    # Approved with edits: the arguments the call runs with instead (as shown: masked), their
    # hash, and the clear ones sealed by the caller (opaque here: this app seals nothing).
    edited_arguments = models.JSONField(null=True, blank=True)
    edited_arguments_sha256 = models.CharField(max_length=64, blank=True)
    sealed_edited_arguments = models.TextField(blank=True)
    # An edit is a new proposal: when an approver's arguments match a require_approval rule
    # the held ones did not, the call is held again (the next round) for those arguments,
    # sealed here in clear (round 1 holds the model's own, read from the conversation).
    round = models.PositiveSmallIntegerField(default=1)
    sealed_arguments = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["run_id", "call_id", "round"], name="approval_unique_call_round"
            )
        ]
        indexes = [models.Index(fields=["status", "expires_at"])]

    def __str__(self) -> str:
        return f"{self.tool} ({self.call_id}) in run {self.run_id}: {self.status}"


class RunLabel(models.Model):
    """A label a run holds, and the call that brought it in first."""

    run_id = models.CharField(max_length=36)
    label = models.CharField(max_length=64)
    call_id = models.CharField(max_length=100)
    tool = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [models.UniqueConstraint(fields=["run_id", "label"], name="run_label_unique")]

    def __str__(self) -> str:
        return f"{self.label} in {self.run_id} (from {self.tool} {self.call_id})"


class LimitBucket(models.Model):
    """Database fallback of the shared limiter (no Redis): a capped counter, and the row
    locked while a key's slots are counted."""

    key = models.CharField(max_length=200, unique=True)
    count = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.key}={self.count}"


class LimitSlot(models.Model):
    """Database fallback of the shared limiter: one held concurrency slot or one hit of a
    rate, with a lease (the rate's window)."""

    key = models.CharField(max_length=200)
    member = models.CharField(max_length=100)
    expires_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["key", "member"], name="limit_slot_unique")]

    def __str__(self) -> str:
        return f"{self.key}:{self.member}"
