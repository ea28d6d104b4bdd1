"""Request shapes of the dataset and experiment API (checked here: shape only), and the
response shapes the schema documents (experiments.api.responses)."""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from rest_framework import serializers

from core.serializers import StrictSerializer
from experiments.candidate import STRATEGIES
from experiments.errors import ExperimentError
from experiments.errors import ExperimentErrorCode as Code
from harness.models import RunOutcome, RunStatus


def text(**kwargs: Any) -> serializers.CharField:
    """Text taken as it is sent (not trimmed: a non-empty string is never made blank)."""
    return serializers.CharField(trim_whitespace=False, **kwargs)


def run_ids() -> serializers.ListField:
    return serializers.ListField(
        child=text(max_length=64),
        max_length=1000,
        default=list,
    )


class RunFilterSerializer(StrictSerializer):
    """Which ended production runs of the tenant to take (newest first, at most ``limit``)."""

    agent = text(max_length=100, required=False)
    status = serializers.ListField(
        child=serializers.ChoiceField(choices=RunStatus.choices), required=False, max_length=20
    )
    outcome = serializers.ListField(
        child=serializers.ChoiceField(choices=RunOutcome.choices), required=False, max_length=20
    )
    created_after = serializers.DateTimeField(required=False)
    created_before = serializers.DateTimeField(required=False)
    label = text(max_length=64, required=False)
    limit = serializers.IntegerField(min_value=1, max_value=1000, default=100)


class DatasetCreateSerializer(StrictSerializer):
    name = text(max_length=200)
    runs = run_ids()
    filter = RunFilterSerializer(required=False)


class DatasetItemsSerializer(StrictSerializer):
    """Runs by id, or a filter, or both (neither: 422 nothing_to_add)."""

    runs = run_ids()
    filter = RunFilterSerializer(required=False)


class InlineChoice(serializers.ChoiceField):
    """The kind of one oneOf variant, documented inline as an enum (see InlineChoiceExtension
    below): quick for a generator, where a pattern is slow."""


class InlineChoiceExtension(OpenApiSerializerFieldExtension):
    target_class = "experiments.api.serializers.InlineChoice"

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        return {"type": "string", "enum": list(self.target.choices)}


def _refused(message: str) -> ExperimentError:
    # Well formed, refused for its meaning (a regex that does not compile, a schema that is
    # not one): 422, which no schema can express.
    return ExperimentError(Code.INVALID_ASSERTION, message)


class TextAssertionSerializer(StrictSerializer):
    """``contains``: the answer contains the text; ``regex``: the pattern (Python syntax)
    is found in the answer. The value is text."""

    type = InlineChoice(choices=["contains", "regex"])
    value = text(max_length=10_000)

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if data["type"] == "regex":
            try:
                re.compile(data["value"])
            except (re.error, RecursionError, OverflowError) as exc:
                raise _refused(f"Not a regex: {exc}.") from exc
        return data


class SchemaAssertionSerializer(StrictSerializer):
    """The answer, read as JSON, is valid under this JSON Schema (2020-12)."""

    type = InlineChoice(choices=["json_schema"])
    value = serializers.DictField()

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        try:
            Draft202012Validator.check_schema(data["value"])
        except SchemaError as exc:
            raise _refused(f"Not a JSON Schema: {exc.message}.") from exc
        return data


@extend_schema_field(
    PolymorphicProxySerializer(
        component_name="Assertion",
        serializers=[TextAssertionSerializer, SchemaAssertionSerializer],
        resource_type_field_name=None,
    )
)
class AssertionField(serializers.Field):
    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, dict):
            raise serializers.ValidationError("An assertion is an object.")
        shape = SchemaAssertionSerializer if data.get("type") == "json_schema" else None
        body = (shape or TextAssertionSerializer)(data=data)
        body.is_valid(raise_exception=True)
        return dict(body.validated_data)

    def to_representation(self, value: Any) -> Any:
        return value


class ExpectationsSerializer(StrictSerializer):
    reference_answer = serializers.CharField(
        required=False, allow_blank=True, max_length=20_000, trim_whitespace=False
    )
    must_call = serializers.ListField(
        child=text(max_length=64),
        required=False,
        max_length=100,
    )
    must_not_call = serializers.ListField(
        child=text(max_length=64),
        required=False,
        max_length=100,
    )
    assertions = serializers.ListField(child=AssertionField(), required=False, max_length=100)


class ItemEditSerializer(StrictSerializer):
    """A PATCH: what is not given is left as it is."""

    expectations = ExpectationsSerializer(required=False)


class CandidateSerializer(StrictSerializer):
    """At least one of these (an empty candidate is refused, 422)."""

    model = text(max_length=200, required=False)
    system_prompt = text(max_length=100_000, required=False)
    agent = serializers.DictField(
        required=False, help_text="An agent file (README 'Agent file'); checked as one (422)."
    )
    policy_changes = serializers.ListField(
        child=serializers.DictField(),
        min_length=1,
        max_length=100,
        required=False,
        help_text="Edits in the what-if format (PolicyChange); checked by the policy (422).",
    )
    strategy = serializers.ChoiceField(choices=STRATEGIES, required=False)


class LiveToolsSerializer(StrictSerializer):
    live = serializers.ListField(child=text(max_length=64), max_length=100)


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "enum": ["recorded", "live"]},
            {
                "type": "object",
                "properties": {
                    "live": {
                        "type": "array",
                        "items": {
                            "type": "string",
                            "minLength": 1,
                            "maxLength": 64,
                            "pattern": "^[^\\x00]*$",
                        },
                        "maxItems": 100,
                    }
                },
                "required": ["live"],
                "additionalProperties": False,
            },
        ],
        "default": "recorded",
    }
)
class ToolsField(serializers.Field):
    """``"recorded"`` (default), ``"live"`` or ``{"live": ["<tool>", ...]}``."""

    def to_internal_value(self, data: Any) -> Any:
        if data in ("recorded", "live"):
            return data
        if isinstance(data, dict):
            body = LiveToolsSerializer(data=data)
            body.is_valid(raise_exception=True)
            return {"live": list(body.validated_data["live"])}
        raise serializers.ValidationError('"recorded", "live" or {"live": ["<tool>", ...]}.')

    def to_representation(self, value: Any) -> Any:
        return value


class JudgeSerializer(StrictSerializer):
    model = text(max_length=200)
    rubric = text(max_length=20_000)


class ExperimentCreateSerializer(StrictSerializer):
    dataset = text(max_length=200)
    candidate = CandidateSerializer()
    tools = ToolsField(default="recorded")
    token_budget = serializers.IntegerField(min_value=1, max_value=10**12, required=False)
    concurrency = serializers.IntegerField(min_value=1, max_value=32, required=False)
    judge = JudgeSerializer(required=False)
