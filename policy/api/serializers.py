"""Shapes of the policy API (shape only; the services check meaning)."""

from collections.abc import Mapping
from typing import Any

from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
from rest_framework import serializers

from core.serializers import FewChoices, PatternField, StrictSerializer
from policy.errors import InvalidRule
from tools.services import get_tool_registry


class RuleRefused(InvalidRule):
    """A well-formed rule whose meaning the policy refuses, which no schema can say: an
    exclusive rule naming one label twice. Status 422."""

    http_status = 422


def refuse_one_label_twice(rule: Mapping[str, Any]) -> None:
    label = rule.get("label")
    if rule.get("kind") == "exclusive" and label and label == rule.get("other_label"):
        raise RuleRefused("an exclusive rule needs two different labels", {"field": "other_label"})


def refuse_rules_that_never_fire(rule: dict[str, Any]) -> None:
    """A call rule requiring approval for a tool whose file says ``approval: "never"`` would
    be accepted and never fire (the tool's own setting wins): refuse it, naming the tool."""
    if rule.get("kind") != "call" or rule.get("effect") != "require_approval":
        return
    tool = get_tool_registry().get(str(rule.get("tool") or ""))
    if tool is not None and tool.approval == "never":
        raise InvalidRule(
            f'{tool.name}\'s tool file says approval: "never", so this rule would never '
            'hold a call; change the tool file\'s approval to "policy", or use effect '
            '"refuse".',
            {"field": "tool", "tool": tool.name},
        )


# The shapes the policy services check (policy/acl.py, policy/rules.py), documented in the
# schema so that a request the schema allows is one the services take.
NAME = r"[A-Za-z0-9_.@-]{1,200}"
ROLE = rf"(?:role:)?{NAME}"
SCOPE = r"(?:[a-z0-9_-]+|\*):(?:[a-z0-9_-]+|\*)"
LABEL = r"[a-z0-9_-]{1,64}"
SINK = rf"{LABEL}|\*"
TOOL = r"[a-zA-Z0-9_-]{1,64}|\*"
RULE_NAME = r"[a-z0-9][a-z0-9_-]{0,99}"
NEW_RULE_NAME = rf"(?!default-){RULE_NAME}"  # names starting "default-" are the shipped ones


def _checked(pattern: str, field: str, what: str, **kwargs: Any) -> PatternField:
    """A policy field matched whole, refused as the policy services refuse it: 400
    invalid_rule naming the field."""

    def refusal(value: str) -> InvalidRule:
        return InvalidRule(f"{field} {value!r} must be {what}", {"field": field, field: value})

    return PatternField(pattern, refusal=refusal, **kwargs)


def _new_rule_name() -> PatternField:
    """A new rule's name (a field of its own for each serializer that takes one)."""
    return _checked(
        NEW_RULE_NAME,
        "name",
        "a rule name not starting 'default-' (the shipped rules)",
        max_length=100,
    )


class PermissionSerializer(StrictSerializer):
    subject = _checked(
        ROLE,
        "subject",
        "a user or role:<name>",
        max_length=200,
        help_text="A user, or a role (role:<name>).",
    )
    scope = _checked(
        SCOPE,
        "scope",
        "of the form object:action",
        max_length=200,
        help_text="object:action, e.g. ticket:write",
    )
    effect = serializers.ChoiceField(choices=["allow", "deny"], default="allow")


class RoleSerializer(StrictSerializer):
    user = _checked(NAME, "user", "a user name", max_length=200)
    role = _checked(ROLE, "role", "a role name", max_length=200)


@extend_schema_field(
    {
        "type": "object",
        "additionalProperties": {
            "nullable": True,
            "anyOf": [{"type": "string"}, {"type": "number"}, {"type": "boolean"}],
        },
        "description": "Argument values the call must have (call rules only).",
    }
)
class MatchField(serializers.DictField):
    pass


class RuleSerializer(StrictSerializer):
    name = _checked(
        RULE_NAME, "name", "1-100 lower-case letters, digits, '_' or '-'", max_length=100
    )
    kind = serializers.ChoiceField(choices=["flow", "exclusive", "call"])
    effect = serializers.ChoiceField(choices=["refuse", "require_approval"])
    label = _checked(
        LABEL, "label", "a label such as 'pii'", required=False, allow_blank=True, max_length=64
    )
    other_label = _checked(
        LABEL,
        "other_label",
        "a label such as 'pii'",
        required=False,
        allow_blank=True,
        max_length=64,
    )
    sink = _checked(
        SINK,
        "sink",
        "a sink kind such as 'external', or '*'",
        required=False,
        allow_blank=True,
        max_length=64,
    )
    tool = _checked(
        TOOL, "tool", "a tool name, or '*'", required=False, allow_blank=True, max_length=64
    )
    match = MatchField(required=False)
    description = serializers.CharField(required=False, allow_blank=True, max_length=2000)
    enabled = serializers.BooleanField(required=False, default=True)
    default = serializers.BooleanField(read_only=True)


class RuleUpdateSerializer(RuleSerializer):
    name = serializers.CharField(read_only=True)
    kind = serializers.ChoiceField(choices=["flow", "exclusive", "call"], required=False)
    effect = serializers.ChoiceField(choices=["refuse", "require_approval"], required=False)
    enabled = serializers.BooleanField(required=False)


def _choice(*values: str) -> FewChoices:
    return FewChoices(choices=list(values))


class _NewRule(StrictSerializer):
    """The request body of one kind of rule (the schema's ``oneOf`` on ``kind``): exactly the
    fields that kind takes."""

    name = _new_rule_name()
    effect = serializers.ChoiceField(choices=["refuse", "require_approval"])
    description = serializers.CharField(required=False, allow_blank=True, max_length=2000)
    enabled = serializers.BooleanField(required=False, default=True)


class FlowRuleSerializer(_NewRule):
    """Refuse (or hold) a call to a ``sink`` once the run has read data labelled ``label``."""

    kind = _choice("flow")
    label = _checked(LABEL, "label", "a label such as 'pii'", max_length=64)
    sink = _checked(SINK, "sink", "a sink kind such as 'external', or '*'", max_length=64)


class ExclusiveRuleSerializer(_NewRule):
    """Refuse (or hold) a run that would hold both labels (two different ones)."""

    kind = _choice("exclusive")
    label = _checked(LABEL, "label", "a label such as 'pii'", max_length=64)
    other_label = _checked(LABEL, "other_label", "a label such as 'pii'", max_length=64)


class CallRuleSerializer(_NewRule):
    """Refuse (or hold for approval) calls of ``tool`` whose arguments have ``match``."""

    kind = _choice("call")
    tool = _checked(TOOL, "tool", "a tool name, or '*'", max_length=64)
    match = MatchField(required=False)


NEW_RULE = PolymorphicProxySerializer(
    component_name="NewRule",
    serializers={
        "flow": FlowRuleSerializer,
        "exclusive": ExclusiveRuleSerializer,
        "call": CallRuleSerializer,
    },
    resource_type_field_name="kind",
)


class ChangeSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    actor = serializers.CharField()
    action = serializers.CharField()
    rule = serializers.JSONField()
    before = serializers.JSONField()
    after = serializers.JSONField()
    created_at = serializers.DateTimeField()


# --- Responses -------------------------------------------------------------------------------


class PolicySerializer(serializers.Serializer):
    policy_version = serializers.IntegerField()
    permissions = PermissionSerializer(many=True)
    roles = RoleSerializer(many=True)
    rules = RuleSerializer(many=True)


class PolicyVersionSerializer(serializers.Serializer):
    policy_version = serializers.IntegerField(help_text="The policy version the edit produced.")


class PermissionEditSerializer(PolicyVersionSerializer):
    permission = PermissionSerializer()


class RoleEditSerializer(PolicyVersionSerializer):
    role = RoleSerializer()


class RuleEditSerializer(PolicyVersionSerializer):
    rule = RuleSerializer()


class BudgetSerializer(serializers.Serializer):
    today = serializers.DictField(help_text="Today's spend of the tenant (UTC day).")
    limits = serializers.DictField(help_text="The tenant's limits (null: the default).")


# --- What-if (POST /api/v1/policies/what-if) ---------------------------------------------------


class PermissionChange(StrictSerializer):
    """Add or remove a permission line."""

    op = _choice("add", "remove")
    permission = PermissionSerializer()


class RoleChange(StrictSerializer):
    """Give or take back a role."""

    op = _choice("add", "remove")
    role = RoleSerializer()


class _RuleBodyField(serializers.DictField):
    """A new rule's body, checked as the rules API checks it."""

    def to_internal_value(self, data: Any) -> Any:
        body = RuleSerializer(data=data)
        body.is_valid(raise_exception=True)
        kinds = {"flow": FlowRuleSerializer, "exclusive": ExclusiveRuleSerializer}
        variant = kinds.get(data["kind"], CallRuleSerializer)(data=data)
        if not variant.is_valid():  # exactly the fields its kind takes, as NewRule says
            field = next(iter(variant.errors))
            raise InvalidRule(f"a {data['kind']} rule: {field}", {"field": field})
        refuse_one_label_twice(data)
        return data


class RuleAddChange(StrictSerializer):
    """Add a rule."""

    op = _choice("add")
    rule = extend_schema_field(NEW_RULE)(_RuleBodyField)()


class RuleNameSerializer(StrictSerializer):
    """A rule of the tenant, by name."""

    name = _new_rule_name()


class RuleRemoveChange(StrictSerializer):
    """Remove a rule of the tenant."""

    op = _choice("remove")
    rule = RuleNameSerializer()


class RuleEditFieldsSerializer(RuleUpdateSerializer):
    """A rule of the tenant by name, and the fields to change."""

    name = _new_rule_name()


class RuleUpdateChange(StrictSerializer):
    """Change fields of a rule of the tenant."""

    op = _choice("update")
    rule = RuleEditFieldsSerializer()


CHANGE_SHAPES: dict[tuple[str, str], type[serializers.Serializer]] = {
    ("add", "permission"): PermissionChange,
    ("remove", "permission"): PermissionChange,
    ("add", "role"): RoleChange,
    ("remove", "role"): RoleChange,
    ("add", "rule"): RuleAddChange,
    ("remove", "rule"): RuleRemoveChange,
    ("update", "rule"): RuleUpdateChange,
}


@extend_schema_field(
    PolymorphicProxySerializer(
        component_name="PolicyChange",
        serializers=[
            PermissionChange,
            RoleChange,
            RuleAddChange,
            RuleRemoveChange,
            RuleUpdateChange,
        ],
        resource_type_field_name=None,
    )
)
class ChangeField(serializers.Field):
    """One proposed edit: ``op`` and exactly one of permission, role or rule, each shaped as
    the policy API's own bodies. Its meaning (a line that exists, a rule name) is the
    service's to check."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, Mapping):
            raise serializers.ValidationError("A change is an object.")
        targets = [key for key in ("permission", "role", "rule") if key in data]
        shape = CHANGE_SHAPES.get((str(data.get("op")), targets[0])) if len(targets) == 1 else None
        if shape is None:
            raise InvalidRule(
                'a change is {"op": "add" | "remove" | "update", and one of "permission", "role" '
                'or "rule"}',
                {"op": data.get("op")},
            )
        body = shape(data=data)
        body.is_valid(raise_exception=True)
        return dict(data)

    def to_representation(self, value: Any) -> Any:
        return value


class WhatIfSerializer(StrictSerializer):
    """A proposed policy change (each edit shaped like the policy API's bodies; the policy
    service checks their meaning) and how many of the latest runs to examine."""

    changes = serializers.ListField(child=ChangeField(), min_length=1, max_length=100)
    limit = serializers.IntegerField(min_value=1, max_value=200, default=20)
