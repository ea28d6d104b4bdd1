"""Shapes of the policy API (shape only; the services check meaning)."""

from collections.abc import Mapping
from typing import Any

from rest_framework import serializers


class StrictSerializer(serializers.Serializer):
    """Refuses fields it does not know (a typo such as ``callback_uri`` must not be ignored)."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            known = {name for name, field in self.fields.items() if not field.read_only}
            unknown = sorted(str(key) for key in data if key not in known)
            if unknown:
                raise serializers.ValidationError(
                    {key: [f"Unknown field; known: {', '.join(sorted(known))}."] for key in unknown}
                )
        return super().to_internal_value(data)


class PermissionSerializer(StrictSerializer):
    subject = serializers.CharField(max_length=200, help_text="A user or a role.")
    scope = serializers.CharField(max_length=200, help_text="object:action, e.g. ticket:write")
    effect = serializers.ChoiceField(choices=["allow", "deny"], default="allow")


class RoleSerializer(StrictSerializer):
    user = serializers.CharField(max_length=200)
    role = serializers.CharField(max_length=200)


class RuleSerializer(StrictSerializer):
    name = serializers.CharField(max_length=100)
    kind = serializers.ChoiceField(choices=["flow", "exclusive", "call"])
    effect = serializers.ChoiceField(choices=["refuse", "require_approval"])
    label = serializers.CharField(required=False, allow_blank=True, max_length=64)
    other_label = serializers.CharField(required=False, allow_blank=True, max_length=64)
    sink = serializers.CharField(required=False, allow_blank=True, max_length=64)
    tool = serializers.CharField(required=False, allow_blank=True, max_length=64)
    match = serializers.DictField(required=False)
    description = serializers.CharField(required=False, allow_blank=True, max_length=2000)
    enabled = serializers.BooleanField(required=False, default=True)
    default = serializers.BooleanField(read_only=True)


class RuleUpdateSerializer(RuleSerializer):
    name = serializers.CharField(read_only=True)
    kind = serializers.ChoiceField(choices=["flow", "exclusive", "call"], required=False)
    effect = serializers.ChoiceField(choices=["refuse", "require_approval"], required=False)
    enabled = serializers.BooleanField(required=False)


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
