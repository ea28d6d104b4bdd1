from __future__ import annotations

import re
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from rest_framework import serializers

from core.serializers import StrictSerializer

RUN_IDS = serializers.ListField(child=serializers.CharField(max_length=64), max_length=1000)


class DatasetCreateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=200)
    runs = serializers.ListField(
        child=serializers.CharField(max_length=64), max_length=1000, allow_empty=True
    )


class DatasetItemsSerializer(StrictSerializer):
    runs = serializers.ListField(
        child=serializers.CharField(max_length=64), min_length=1, max_length=1000
    )


class AssertionSerializer(StrictSerializer):
    type = serializers.ChoiceField(choices=["contains", "regex", "json_schema"])
    value = serializers.JSONField()

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        kind, value = data["type"], data["value"]
        if kind in ("contains", "regex") and not isinstance(value, str):
            raise serializers.ValidationError({"value": f"A {kind} assertion's value is text."})
        if kind == "regex":
            try:
                re.compile(value)
            except re.error as exc:
                raise serializers.ValidationError({"value": f"Not a regex: {exc}."}) from exc
        if kind == "json_schema":
            try:
                Draft202012Validator.check_schema(value)
            except SchemaError as exc:
                raise serializers.ValidationError(
                    {"value": f"Not a JSON Schema: {exc.message}."}
                ) from exc
        return data


class ExpectationsSerializer(StrictSerializer):
    reference_answer = serializers.CharField(required=False, allow_blank=True, max_length=100_000)
    must_call = serializers.ListField(
        child=serializers.CharField(max_length=64), required=False, max_length=100
    )
    must_not_call = serializers.ListField(
        child=serializers.CharField(max_length=64), required=False, max_length=100
    )
    assertions = AssertionSerializer(many=True, required=False)


class ItemEditSerializer(StrictSerializer):
    expectations = ExpectationsSerializer()


class ExperimentCreateSerializer(StrictSerializer):
    dataset = serializers.CharField(max_length=200)
    candidate = serializers.DictField()
    tools = serializers.CharField(max_length=10, default="recorded")
