from rest_framework import serializers

from harness.models import Run, RunMode


class RunCreateSerializer(serializers.Serializer):
    agent = serializers.CharField(max_length=100)
    user = serializers.CharField(max_length=200, help_text="The end user the agent acts for.")
    input = serializers.CharField(max_length=100_000, trim_whitespace=False)
    mode = serializers.ChoiceField(choices=RunMode.choices, default=RunMode.SYNC)
    callback_url = serializers.URLField(required=False, allow_blank=True, max_length=2000)
    max_steps = serializers.IntegerField(required=False, min_value=1, max_value=200)


class RunSerializer(serializers.ModelSerializer):
    user = serializers.CharField(source="user_id")
    usage = serializers.SerializerMethodField()
    links = serializers.SerializerMethodField()

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
            "answer",
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

    def get_usage(self, run: Run) -> dict[str, int]:
        return {
            "prompt_tokens": run.prompt_tokens,
            "completion_tokens": run.completion_tokens,
            "total_tokens": run.total_tokens,
        }

    def get_links(self, run: Run) -> dict[str, str]:
        return {"self": f"/api/v1/runs/{run.id}", "trace": f"/api/v1/runs/{run.id}/trace"}


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
