"""The response shapes of the dataset and experiment API, for the OpenAPI schema only (the
views answer ``experiments.queries``' dicts; the contract test checks they match)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers


class DatasetCreatedSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    items = serializers.IntegerField()


class DatasetSummarySerializer(DatasetCreatedSerializer):
    created_by = serializers.CharField()
    created_at = serializers.DateTimeField()


class DatasetListSerializer(serializers.Serializer):
    datasets = DatasetSummarySerializer(many=True)


class CallStepSerializer(serializers.Serializer):
    step = serializers.IntegerField()
    tool = serializers.CharField()


class DatasetItemSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    run_id = serializers.UUIDField()
    agent = serializers.CharField()
    user = serializers.CharField()
    input = serializers.CharField(help_text="Masked, as the run's.")
    status = serializers.CharField()
    outcome = serializers.CharField()
    answer = serializers.CharField(help_text="Masked, as the run's.")
    tool_calls = CallStepSerializer(many=True)
    expectations = serializers.DictField(help_text="As set (PATCH …/items/{item}).")


class DatasetDetailSerializer(DatasetSummarySerializer):
    item_list = DatasetItemSerializer(many=True)


class LinksSerializer(serializers.Serializer):
    self = serializers.CharField()


class ExperimentAcceptedSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    status = serializers.CharField()
    links = LinksSerializer()


class ProgressSerializer(serializers.Serializer):
    done = serializers.IntegerField()
    total = serializers.IntegerField()


class ExperimentBudgetSerializer(serializers.Serializer):
    tokens = serializers.IntegerField(allow_null=True, help_text="The experiment's own budget.")
    used = serializers.IntegerField()


class SidesIntSerializer(serializers.Serializer):
    baseline = serializers.IntegerField()
    candidate = serializers.IntegerField()


class SidesNumberSerializer(serializers.Serializer):
    baseline = serializers.FloatField(allow_null=True)
    candidate = serializers.FloatField(allow_null=True)


class JudgeCountsSerializer(serializers.Serializer):
    pass_ = serializers.IntegerField()
    fail = serializers.IntegerField()
    other = serializers.IntegerField()

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        fields["pass"] = fields.pop("pass_")
        return fields


class SummarySerializer(serializers.Serializer):
    items = serializers.IntegerField()
    same = serializers.IntegerField()
    diverged = serializers.IntegerField()
    regressions = serializers.IntegerField()
    improved = serializers.IntegerField()
    errors = serializers.IntegerField()
    off_record = serializers.IntegerField()
    executed = serializers.IntegerField()
    tokens = SidesIntSerializer()
    cost_usd = SidesNumberSerializer()
    latency_ms = SidesNumberSerializer(help_text="Medians.")
    judge = JudgeCountsSerializer(allow_null=True)


class DivergenceSerializer(serializers.Serializer):
    step = serializers.IntegerField()
    baseline = serializers.CharField(allow_null=True)
    candidate = serializers.CharField(allow_null=True)


class AnswerSerializer(serializers.Serializer):
    baseline = serializers.CharField()
    candidate = serializers.CharField()
    changed = serializers.BooleanField()


class StatusOutcomeSerializer(serializers.Serializer):
    status = serializers.CharField()
    outcome = serializers.CharField()


class OutcomesSerializer(serializers.Serializer):
    baseline = StatusOutcomeSerializer()
    candidate = StatusOutcomeSerializer()


class ToolCallCountsSerializer(serializers.Serializer):
    executed = serializers.IntegerField()
    from_record = serializers.IntegerField()
    off_record = serializers.IntegerField()


@extend_schema_field({})
class AnyField(serializers.JSONField):
    pass


class CheckSerializer(serializers.Serializer):
    type = serializers.CharField()
    value = AnyField()
    passed = serializers.BooleanField()


class JudgeVerdictSerializer(serializers.Serializer):
    model = serializers.CharField()
    verdict = serializers.CharField(help_text="pass, fail, unreadable or error.")
    reasoning = serializers.CharField()
    tokens = serializers.IntegerField()


class ItemResultSerializer(serializers.Serializer):
    item = serializers.UUIDField()
    run_id = serializers.UUIDField()
    experiment_run_id = serializers.UUIDField(allow_null=True)
    status = serializers.CharField()
    verdict = serializers.CharField(allow_null=True)
    error = serializers.CharField(allow_null=True)
    trajectory = serializers.CharField(allow_null=True)
    first_divergence = DivergenceSerializer(allow_null=True)
    answer = AnswerSerializer(allow_null=True)
    outcome = OutcomesSerializer(allow_null=True)
    tool_calls = ToolCallCountsSerializer(allow_null=True)
    assertions = CheckSerializer(many=True, allow_null=True)
    tokens = SidesIntSerializer(allow_null=True)
    cost_usd = SidesNumberSerializer(allow_null=True)
    latency_ms = SidesNumberSerializer(allow_null=True)
    steps = SidesIntSerializer(allow_null=True)
    judge = JudgeVerdictSerializer(allow_null=True)


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "enum": ["recorded"]},
            {
                "type": "object",
                "properties": {"live": {"type": "array", "items": {"type": "string"}}},
                "required": ["live"],
            },
        ]
    }
)
class ToolsModeField(serializers.JSONField):
    pass


class JudgeConfigSerializer(serializers.Serializer):
    model = serializers.CharField()
    rubric = serializers.CharField()


class ExperimentSummarySerializer(serializers.Serializer):
    id = serializers.UUIDField()
    dataset = serializers.UUIDField()
    candidate = serializers.DictField()
    tools = ToolsModeField()
    status = serializers.CharField(
        help_text="queued, running, succeeded, cancelled, failed or budget_exceeded."
    )
    progress = ProgressSerializer()
    budget = ExperimentBudgetSerializer()
    judge = JudgeConfigSerializer(allow_null=True)
    created_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


class ExperimentListSerializer(serializers.Serializer):
    experiments = ExperimentSummarySerializer(many=True)


class ExperimentDetailSerializer(ExperimentSummarySerializer):
    summary = SummarySerializer()
    items = ItemResultSerializer(many=True)
