"""The cost report of the calling tenant: ``GET /api/v1/reports/costs``."""

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.serializers import PatternField
from harness.api.serializers import QueryFilters
from harness.errors import ErrorCode, HarnessError
from harness.reports import DIMENSIONS, CostFilter, cost_report
from policy.api.permissions import key_scopes
from policy.key_scopes import REPORTS_READ

# A tenant's own report: grouping by tenant would only repeat its name.
TENANT_DIMENSIONS = [name for name in DIMENSIONS if name != "tenant"]


class InvertedRange(HarnessError):
    """'to' before 'from': each a valid day, the range empty. Understood, refused: 422."""

    http_status = 422
    code = ErrorCode.INVALID_REQUEST

    def __init__(self) -> None:
        message = "'to' is before 'from'."
        super().__init__(message, {"fields": {"to": [message]}})


class CostReportQuerySerializer(QueryFilters):
    group_by = PatternField(
        rf"(?:{'|'.join(TENANT_DIMENSIONS)})(?:,(?:{'|'.join(TENANT_DIMENSIONS)}))*",
        required=False,
        default="day",
        help_text=f"Comma-separated, from: {', '.join(TENANT_DIMENSIONS)}.",
    )
    agent = serializers.CharField(required=False, trim_whitespace=False)
    user = serializers.CharField(required=False, trim_whitespace=False)

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        # "from" is a Python keyword: declared here rather than as a class attribute.
        fields["from"] = serializers.DateField(
            required=False, help_text="First day (UTC), inclusive."
        )
        fields["to"] = serializers.DateField(required=False, help_text="Last day (UTC), inclusive.")
        return fields

    def validate_group_by(self, value: str) -> list[str]:
        names = [name.strip() for name in value.split(",") if name.strip()]
        unknown = [name for name in names if name not in TENANT_DIMENSIONS]
        if unknown:
            raise serializers.ValidationError(
                f"Unknown grouping {', '.join(unknown)}; use {', '.join(TENANT_DIMENSIONS)}."
            )
        return names

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if data.get("from") and data.get("to") and data["from"] > data["to"]:
            raise InvertedRange()
        return data


class CostRowSerializer(serializers.Serializer):
    agent = serializers.CharField(required=False)
    model = serializers.CharField(required=False)
    user = serializers.CharField(required=False)
    day = serializers.DateField(required=False)
    runs = serializers.IntegerField()
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    total_tokens = serializers.IntegerField()
    cost_usd = serializers.DecimalField(max_digits=20, decimal_places=8, coerce_to_string=False)
    unpriced_calls = serializers.IntegerField(
        help_text="Model calls without a price: their cost is unknown, not 0."
    )


class CostTotalsSerializer(serializers.Serializer):
    runs = serializers.IntegerField()
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    total_tokens = serializers.IntegerField()
    cost_usd = serializers.DecimalField(max_digits=20, decimal_places=8, coerce_to_string=False)
    unpriced_calls = serializers.IntegerField(
        help_text="Model calls without a price: their cost is unknown, not 0."
    )


class CostReportSerializer(serializers.Serializer):
    tenant = serializers.CharField()
    group_by = serializers.ListField(child=serializers.CharField())
    rows = CostRowSerializer(many=True)
    totals = CostTotalsSerializer()

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        fields["from"] = serializers.DateField(allow_null=True)
        fields["to"] = serializers.DateField(allow_null=True)
        return fields


class CostReportView(APIView):
    permission_classes = [key_scopes(get=REPORTS_READ)]

    @extend_schema(parameters=[CostReportQuerySerializer], responses=CostReportSerializer)
    def get(self, request: Request) -> Response:
        """Runs, tokens and cost (USD, as the gateway priced each model call) of the tenant,
        grouped by agent, user and/or day, over an optional range of days."""
        query = CostReportQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        tenant = request.user.tenant.slug
        report = cost_report(
            data["group_by"],
            CostFilter(
                tenants=[tenant],
                start=data.get("from"),
                end=data.get("to"),
                agent=data.get("agent"),
                user=data.get("user"),
            ),
        )
        return Response(CostReportSerializer(report | {"tenant": tenant}).data)
