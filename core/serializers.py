"""Shapes every app's API shares (shape only: the services check meaning).

Here, below every app, so that ``policy`` and ``experiments`` need not import ``harness`` for
them. Their schema (``harness.api.schema``) is documented by drf-spectacular extensions.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from rest_framework import serializers


class StrictSerializer(serializers.Serializer):
    """Refuses fields it does not know (a typo such as ``callback_uri`` must not be ignored),
    and values of another JSON type than the field's (DRF would read ``5`` as ``"5"`` and
    ``"false"`` as false): what the schema calls a string is a JSON string."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            known = {name for name, field in self.fields.items() if not field.read_only}
            unknown = sorted(str(key) for key in data if key not in known)
            if unknown:
                raise serializers.ValidationError(
                    {key: [f"Unknown field; known: {', '.join(sorted(known))}."] for key in unknown}
                )
            wrong = {
                name: [f"Must be {expected}."]
                for name, value in data.items()
                if value is not None
                and (expected := _json_type(self.fields[name]))
                and not _is_json_type(value, expected)
            }
            if wrong:
                raise serializers.ValidationError(wrong)
        return super().to_internal_value(data)


def _json_type(field: serializers.Field) -> str | None:
    if isinstance(field, serializers.BooleanField):
        return "a boolean"
    if isinstance(field, serializers.IntegerField):
        return "an integer"
    if isinstance(field, serializers.FloatField | serializers.DecimalField):
        return "a number"
    if isinstance(field, serializers.CharField | serializers.ChoiceField | serializers.UUIDField):
        return "a string"
    return None


def _is_json_type(value: Any, expected: str) -> bool:
    if isinstance(value, bool):
        return expected == "a boolean"
    if expected == "an integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if expected == "a number":
        return isinstance(value, int | float)
    return isinstance(value, str) if expected == "a string" else False


class PatternField(serializers.CharField):
    """A string that ``pattern`` matches whole, checked untrimmed (what is checked is what is
    stored; Python's ``$`` would also let a trailing newline through). The schema documents it
    as ``^pattern$`` (``harness.api.schema.PatternFieldExtension``)."""

    def __init__(
        self, pattern: str, refusal: Callable[[str], Exception] | None = None, **kwargs: Any
    ) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)
        self.pattern = pattern
        regex = re.compile(pattern)

        def matches_whole(value: str) -> None:
            if not regex.fullmatch(value):
                # A domain's own error where it has one (e.g. 400 invalid_rule for policy).
                raise (
                    refusal(value)
                    if refusal
                    else serializers.ValidationError(f"Must match ^(?:{pattern})$.")
                )

        self.validators.append(matches_whole)


class FewChoices(serializers.ChoiceField):
    """The few values of kind, op or decision one oneOf variant takes: documented inline as a
    pattern (``harness.api.schema.FewChoicesExtension``), not as an enum component of its own."""
