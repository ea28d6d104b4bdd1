"""The policy API for tenant admins: parse, identify the acting admin, call one service.

The caller is a tenant's API client (``Authorization: Bearer hk_…``) acting for an end user
named in the ``X-Harness-User`` header; that user must hold ``policy:admin`` in the key's
tenant. Every edit is recorded with the actor ``<user> via api key <prefix>``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from policy import services as policy
from policy.api.permissions import ACTING_USER_HEADER, PolicyAdminOnly, acting_user, key_scopes
from policy.api.serializers import (
    NEW_RULE,
    BudgetSerializer,
    ChangeSerializer,
    PermissionEditSerializer,
    PermissionSerializer,
    PolicySerializer,
    PolicyVersionSerializer,
    RoleEditSerializer,
    RoleSerializer,
    RuleEditSerializer,
    RuleRefused,
    RuleSerializer,
    RuleUpdateSerializer,
    refuse_one_label_twice,
    refuse_rules_that_never_fire,
)
from policy.errors import InvalidRule, RuleNotFound
from policy.key_scopes import POLICY_ADMIN, POLICY_READ

ACTING_USER = OpenApiParameter(
    ACTING_USER_HEADER,
    str,
    OpenApiParameter.HEADER,
    required=True,
    description="The end user the client acts for; needs policy:admin in the tenant.",
)


READ_OR_EDIT = key_scopes(
    get=POLICY_READ, post=POLICY_ADMIN, patch=POLICY_ADMIN, delete=POLICY_ADMIN
)


class RuleConflict(InvalidRule):
    """A well-formed rule edit that the rule's state refuses: a shipped default (read-only), a
    name taken already, or a patch that would leave the rule invalid. Same code, status 409."""

    http_status = 409


class PolicyAdminView(PolicyAdminOnly, APIView):
    """Base: resolves the tenant and the acting admin, and checks ``policy:admin``. The key
    needs ``policy:read`` to read and ``policy:admin`` to edit (checked first)."""

    permission_classes = [READ_OR_EDIT]

    # policy:admin is checked by HoldsPolicyAdmin, one of the view's permissions, before this.
    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        self.tenant = request.user.tenant.slug
        self.actor = f"{acting_user(request)} via api key {request.user.api_key.prefix}"

    def edited(self, version: int, http_status: int = status.HTTP_200_OK, **data: Any) -> Response:
        return Response({"policy_version": version, **data}, status=http_status)


class PolicyView(PolicyAdminView):
    @extend_schema(responses=PolicySerializer, parameters=[ACTING_USER])
    def get(self, request: Request) -> Response:
        """The tenant's permissions, role assignments and rules, and the policy version."""
        data = policy.list_lines(self.tenant)
        data["rules"] = [rule.to_dict() for rule in policy.list_rules(self.tenant)]
        return Response(data)


class PermissionView(PolicyAdminView):
    @extend_schema(
        request=PermissionSerializer,
        responses={201: PermissionEditSerializer},
        parameters=[ACTING_USER],
    )
    def post(self, request: Request) -> Response:
        """Allow (or deny) a user or role a scope."""
        data = _valid(PermissionSerializer, request.data)
        version = policy.add_permission(
            self.tenant, data["subject"], data["scope"], data["effect"], actor=self.actor
        )
        return self.edited(version, status.HTTP_201_CREATED, permission=data)

    @extend_schema(
        request=PermissionSerializer,
        responses={200: PolicyVersionSerializer},
        parameters=[ACTING_USER],
    )
    def delete(self, request: Request) -> Response:
        """Remove a permission line."""
        data = _valid(PermissionSerializer, request.data)
        version = policy.remove_permission(
            self.tenant, data["subject"], data["scope"], data["effect"], actor=self.actor
        )
        return self.edited(version)


class RoleView(PolicyAdminView):
    @extend_schema(
        request=RoleSerializer, responses={201: RoleEditSerializer}, parameters=[ACTING_USER]
    )
    def post(self, request: Request) -> Response:
        """Give a user a role in this tenant."""
        data = _valid(RoleSerializer, request.data)
        version = policy.assign_role(self.tenant, data["user"], data["role"], actor=self.actor)
        return self.edited(version, status.HTTP_201_CREATED, role=data)

    @extend_schema(
        request=RoleSerializer, responses={200: PolicyVersionSerializer}, parameters=[ACTING_USER]
    )
    def delete(self, request: Request) -> Response:
        """Take a role back."""
        data = _valid(RoleSerializer, request.data)
        version = policy.unassign_role(self.tenant, data["user"], data["role"], actor=self.actor)
        return self.edited(version)


class RuleListView(PolicyAdminView):
    @extend_schema(responses=RuleSerializer(many=True), parameters=[ACTING_USER])
    def get(self, request: Request) -> Response:
        """The shipped defaults (``default: true``) and the tenant's chain and call rules."""
        return Response([rule.to_dict() for rule in policy.list_rules(self.tenant)])

    @extend_schema(request=NEW_RULE, responses={201: RuleEditSerializer}, parameters=[ACTING_USER])
    def post(self, request: Request) -> Response:
        """Add a chain or call rule."""
        data = _valid(RuleSerializer, request.data)
        refuse_one_label_twice(data)
        refuse_rules_that_never_fire(data)
        try:
            rule, version = policy.create_rule(self.tenant, data, actor=self.actor)
        except InvalidRule as exc:
            if _rule_exists(self.tenant, data["name"]):
                raise RuleConflict(exc.message, exc.details) from exc
            raise
        return self.edited(version, status.HTTP_201_CREATED, rule=rule.to_dict())


class RuleDetailView(PolicyAdminView):
    @extend_schema(responses=RuleSerializer, parameters=[ACTING_USER])
    def get(self, request: Request, name: str) -> Response:
        return Response(policy.get_rule(self.tenant, name).to_dict())

    @extend_schema(
        request=RuleUpdateSerializer, responses=RuleEditSerializer, parameters=[ACTING_USER]
    )
    def patch(self, request: Request, name: str) -> Response:
        data = _valid(RuleUpdateSerializer, request.data, partial=True)
        # The patch is well formed: what the services refuse now is the rule it would make.
        with _as_conflict():
            refuse_rules_that_never_fire({**policy.get_rule(self.tenant, name).to_dict(), **data})
            rule, version = policy.update_rule(self.tenant, name, data, actor=self.actor)
        return self.edited(version, rule=rule.to_dict())

    @extend_schema(responses={200: PolicyVersionSerializer}, parameters=[ACTING_USER])
    def delete(self, request: Request, name: str) -> Response:
        with _as_conflict():  # only a shipped default refuses to go
            version = policy.delete_rule(self.tenant, name, actor=self.actor)
        return self.edited(version)


class ChangeListView(PolicyAdminView):
    @extend_schema(responses=ChangeSerializer(many=True), parameters=[ACTING_USER])
    def get(self, request: Request) -> Response:
        """The tenant's last 100 policy edits: who, when, before, after, version."""
        return Response(ChangeSerializer(policy.list_changes(self.tenant), many=True).data)


class BudgetView(PolicyAdminView):
    @extend_schema(responses=BudgetSerializer, parameters=[ACTING_USER])
    def get(self, request: Request) -> Response:
        """Today's spend of the tenant and its limits."""
        limits = policy.tenant_limits(self.tenant)
        return Response({"today": policy.tenant_day_usage(self.tenant), "limits": limits.__dict__})


@contextmanager
def _as_conflict() -> Iterator[None]:
    try:
        yield
    except (RuleConflict, RuleRefused):
        raise
    except InvalidRule as exc:
        raise RuleConflict(exc.message, exc.details) from exc


def _rule_exists(tenant: str, name: str) -> bool:
    try:
        policy.get_rule(tenant, name)
    except RuleNotFound:
        return False
    return True


def _valid(serializer_class: type, data: Any, partial: bool = False) -> dict[str, Any]:
    body = serializer_class(data=data, partial=partial)
    body.is_valid(raise_exception=True)
    return dict(body.validated_data)
