from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from rest_framework import serializers

from core.serializers import FewChoices, PatternField, StrictSerializer
from harness.models import Run, RunMode, RunOutcome, RunStatus
from policy import services as policy
from traces.services import unseal

# Budgets and counters are stored as 32-bit integers (and compared with 64-bit ones).
MAX_INT32 = 2_147_483_647


class UsdField(serializers.DecimalField):
    """An amount in USD, a JSON number as the README shows: rounded to the stored 6 decimal
    places rather than refused (a binary float such as 0.1 has more digits than it says)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_digits=12, decimal_places=6, rounding=ROUND_HALF_UP, **kwargs)

    def validate_precision(self, value: Decimal) -> Decimal:
        # Round without a precision context first: too many digits is then a 400, not a 500.
        return super().validate_precision(value.quantize(Decimal("0.000001"), ROUND_HALF_UP))


# A callback URL as documented: http(s); a host name (up to six labels of up to 30 characters
# and a TLD: never past DNS's 253), localhost or an IPv4 address; an optional port, then a
# path, query or fragment in printable ASCII (percent-encode the rest).
# Each one Django's URLValidator also takes.
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,28}[A-Za-z0-9])?"
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
CALLBACK_URL = (
    rf"(?:https?://(?:(?:{_LABEL}\.){{1,6}}[A-Za-z]{{2,63}}|localhost|{_OCTET}(?:\.{_OCTET}){{3}})"
    r"(?::(?:[0-9]{1,4}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?"
    r"(?:[/?#][!-~]*)?)?"
)


class RunBudgetSerializer(StrictSerializer):
    """Per-request budget: lowers or raises the agent's, up to the tenant's maximum."""

    max_tokens = serializers.IntegerField(required=False, min_value=1, max_value=MAX_INT32)
    max_cost_usd = UsdField(
        required=False,
        min_value=Decimal("0.000001"),
        max_value=Decimal("999999.999999"),
        help_text="USD; rounded to 6 decimal places.",
    )
    max_tool_calls = serializers.IntegerField(required=False, min_value=1, max_value=MAX_INT32)
    max_calls_per_tool = serializers.IntegerField(required=False, min_value=1, max_value=MAX_INT32)


class RunCreateSerializer(StrictSerializer):
    agent = serializers.CharField(max_length=100)
    user = serializers.CharField(max_length=200, help_text="The end user the agent acts for.")
    input = serializers.CharField(max_length=100_000, trim_whitespace=False)
    mode = serializers.ChoiceField(choices=RunMode.choices, default=RunMode.SYNC)
    callback_url = PatternField(CALLBACK_URL, required=False, allow_blank=True, max_length=2000)
    max_steps = serializers.IntegerField(required=False, min_value=1, max_value=200)
    deadline_s = serializers.FloatField(required=False, min_value=0.1, max_value=86_400)
    session_id = serializers.UUIDField(
        required=False, help_text="Continue this session (multi-turn) instead of starting one."
    )
    budget = RunBudgetSerializer(required=False)


class RunSerializer(serializers.ModelSerializer):
    user = serializers.CharField(source="user_id")
    answer = serializers.SerializerMethodField()
    usage = serializers.SerializerMethodField()
    links = serializers.SerializerMethodField()
    outcome = serializers.ChoiceField(
        choices=RunOutcome.choices,
        read_only=True,
        help_text="What happened inside the run: clean, or the worst of corrected, tool_failed, "
        "denied, refused (worst first).",
    )
    outcome_counts = serializers.DictField(
        child=serializers.IntegerField(min_value=1),
        read_only=True,
        help_text='How many of each kind, e.g. {"refused": 2, "corrected": 1}; {} when clean.',
    )

    class Meta:
        model = Run
        fields = [
            "id",
            "request_id",
            "agent",
            "user",
            "mode",
            "status",
            "status_detail",
            "stop_reason",
            "outcome",
            "outcome_counts",
            "answer",
            "session_id",
            "steps",
            "max_steps",
            "model_route",
            "usage",
            "created_at",
            "started_at",
            "finished_at",
            "links",
        ]
        read_only_fields = fields

    def get_answer(self, run: Run) -> str:
        """The tenant's own client gets the clear answer (stored sealed); people see it masked."""
        return unseal(run.sealed, {}).get("answer", run.answer)

    def get_usage(self, run: Run) -> dict[str, Any]:
        usage: dict[str, Any] = {
            "prompt_tokens": run.prompt_tokens,
            "completion_tokens": run.completion_tokens,
            "total_tokens": run.total_tokens,
        }
        ledger = policy.run_usage(str(run.id))
        if ledger:
            usage["budget"] = ledger
        return usage

    def get_links(self, run: Run) -> dict[str, str]:
        base = f"/api/v1/runs/{run.id}"
        return {
            "self": base,
            "trace": f"{base}/trace",
            "events": f"{base}/events",
            "cancel": f"{base}/cancel",
            "approvals": f"{base}/approvals",
        }


class QueryFilters(serializers.Serializer):
    """Query filters as the schema says: an empty value (``?user=``) is refused, not read as no
    filter (DRF would skip it); a present value is taken untrimmed."""

    def to_internal_value(self, data: Any) -> Any:
        blank = {
            name: ["This field may not be blank."]
            for name in self.fields
            if hasattr(data, "getlist") and "" in data.getlist(name)
        }
        if blank:
            raise serializers.ValidationError(blank)
        return super().to_internal_value(data)


class RunFilterSerializer(QueryFilters):
    status = serializers.ChoiceField(choices=RunStatus.choices, required=False)
    outcome = serializers.ChoiceField(
        choices=RunOutcome.choices,
        required=False,
        help_text="Runs whose outcome (their worst kind) is this one.",
    )
    agent = serializers.CharField(required=False, trim_whitespace=False)
    user = serializers.CharField(required=False, trim_whitespace=False)
    session_id = serializers.UUIDField(required=False)
    created_after = serializers.DateTimeField(required=False)
    created_before = serializers.DateTimeField(required=False)
    limit = serializers.IntegerField(required=False, min_value=1, max_value=200, default=50)
    cursor = serializers.DateTimeField(
        required=False,
        help_text="Return runs created before this time (the previous page's next_cursor).",
    )


class RunPageSerializer(serializers.Serializer):
    results = RunSerializer(many=True)
    next_cursor = serializers.CharField(
        allow_null=True,
        help_text="A time (UTC): pass it as cursor for the next page; null on the last page.",
    )


class ApprovalSerializer(serializers.Serializer):
    call_id = serializers.CharField()
    tool = serializers.CharField()
    user = serializers.CharField(source="user_id")
    arguments = serializers.JSONField()
    arguments_sha256 = serializers.CharField()
    status = serializers.CharField()
    rule = serializers.CharField()
    reason = serializers.CharField()
    policy_version = serializers.IntegerField()
    expires_at = serializers.DateTimeField()
    decided_by = serializers.CharField()
    decided_at = serializers.DateTimeField(allow_null=True)
    comment = serializers.CharField()
    edited_arguments = serializers.JSONField(
        allow_null=True, help_text="Approved with edits: the arguments it runs with (masked)."
    )
    edited_arguments_sha256 = serializers.CharField()
    round = serializers.IntegerField(
        help_text="1, or more when an approver's edit matched another approval rule and the "
        "call was held again for the edited arguments (decide the latest round)."
    )
    created_at = serializers.DateTimeField()


class ApprovalDecisionSerializer(StrictSerializer):
    decision = serializers.ChoiceField(choices=["approve", "deny"])
    arguments_sha256 = serializers.RegexField(
        r"^[0-9a-f]{64}$", help_text="SHA-256 of the arguments you decided on, as listed."
    )
    comment = serializers.CharField(required=False, allow_blank=True, max_length=2000)
    arguments_patch = serializers.DictField(
        required=False,
        help_text="Approve with edits: a JSON Merge Patch (RFC 7386) over the held arguments "
        "(members replace, null removes); validated against the tool's schema.",
    )


class ApproveSerializer(StrictSerializer):
    """Approve the held call as listed, or with edits (``arguments_patch``)."""

    decision = FewChoices(choices=["approve"])
    arguments_sha256 = serializers.RegexField(
        r"^[0-9a-f]{64}$", help_text="SHA-256 of the arguments you decided on, as listed."
    )
    comment = serializers.CharField(required=False, allow_blank=True, max_length=2000)
    arguments_patch = serializers.DictField(
        required=False, help_text="A JSON Merge Patch (RFC 7386) over the held arguments."
    )


class DenySerializer(StrictSerializer):
    """Deny the held call (a denial runs nothing, so it takes no edits)."""

    decision = FewChoices(choices=["deny"])
    arguments_sha256 = serializers.RegexField(
        r"^[0-9a-f]{64}$", help_text="SHA-256 of the arguments you decided on, as listed."
    )
    comment = serializers.CharField(required=False, allow_blank=True, max_length=2000)


class SpanSerializer(serializers.Serializer):
    span_id = serializers.CharField()
    parent_span_id = serializers.CharField(allow_null=True)
    sequence = serializers.IntegerField()
    kind = serializers.CharField()
    name = serializers.CharField()
    status = serializers.CharField()
    started_at = serializers.DateTimeField()
    ended_at = serializers.DateTimeField()
    duration_ms = serializers.FloatField()
    attributes = serializers.DictField()
    audit = serializers.ListField(child=serializers.DictField())


class TraceSerializer(serializers.Serializer):
    request_id = serializers.CharField()
    spans = SpanSerializer(many=True)
