"""Run API views: parse, authenticate, call one service, serialize."""

from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    PolymorphicProxySerializer,
    extend_schema,
)
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from harness.api.serializers import (
    ApprovalDecisionSerializer,
    ApprovalSerializer,
    ApproveSerializer,
    DenySerializer,
    RunCreateSerializer,
    RunFilterSerializer,
    RunPageSerializer,
    RunSerializer,
    TraceSerializer,
)
from harness.errors import HarnessError
from harness.queries import access_run_by_id, list_runs
from harness.receipts.document import issue_receipt
from harness.receipts.signing import published_keys
from harness.replay import replay_run, what_if
from harness.runs import RunRequest, cancel_run, decide_tool_call, start_run
from harness.webhooks import UnsafeCallbackUrl
from policy import key_scopes as scope
from policy import services as policy
from policy.api.permissions import PolicyAdminOnly, key_scopes
from policy.api.serializers import WhatIfSerializer
from policy.api.views import RuleConflict
from policy.errors import InvalidRule
from traces.queries import get_trace

ACTING_USER_PARAMETER = OpenApiParameter(
    "X-Harness-User",
    str,
    OpenApiParameter.HEADER,
    required=True,
    description="The end user the client acts for; the policy decides what they may do.",
)

IDEMPOTENCY_KEY_PARAMETER = OpenApiParameter(
    "Idempotency-Key",
    str,
    OpenApiParameter.HEADER,
    description="A repeated key returns the run the first request created.",
)
MAX_IDEMPOTENCY_KEY_LENGTH = 200


class RunListView(APIView):
    permission_classes = [key_scopes(get=scope.RUNS_READ, post=scope.RUNS_CREATE)]

    @extend_schema(
        request=RunCreateSerializer,
        responses={200: RunSerializer, 202: RunSerializer},
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        examples=[
            OpenApiExample(
                "The demo's ticket case",
                value={
                    "agent": "ticket-assistant",
                    "user": "bob",
                    "input": "Why has ticket T-20250318-007 not been handled?",
                },
                request_only=True,
            )
        ],
    )
    def post(self, request: Request) -> Response:
        """Start a run. Sync runs answer inline up to the sync deadline; async runs answer 202."""
        body = RunCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        key = request.headers.get("Idempotency-Key", "").strip()
        if len(key) > MAX_IDEMPOTENCY_KEY_LENGTH:
            raise HarnessError(
                f"Idempotency-Key is longer than {MAX_IDEMPOTENCY_KEY_LENGTH} characters."
            )
        try:
            run, _ = start_run(
                request.user.tenant,
                RunRequest(
                    agent=data["agent"],
                    user_id=data["user"],
                    input=data["input"],
                    mode=data["mode"],
                    callback_url=data.get("callback_url", ""),
                    max_steps=data.get("max_steps"),
                    deadline_s=data.get("deadline_s"),
                    idempotency_key=key,
                    session_id=str(data.get("session_id") or ""),
                    budget=data.get("budget"),
                ),
            )
        except UnsafeCallbackUrl as exc:
            # Well formed (the schema's pattern), but where it points is refused: a private
            # address, or none at all. The request is understood: 422, not 400.
            exc.http_status = 422
            raise
        http_status = status.HTTP_200_OK if run.is_terminal else status.HTTP_202_ACCEPTED
        return Response(RunSerializer(run).data, status=http_status)

    @extend_schema(
        operation_id="runs_list", parameters=[RunFilterSerializer], responses=RunPageSerializer
    )
    def get(self, request: Request) -> Response:
        """The tenant's runs, newest first, filtered by status, outcome, agent, user, session
        or time."""
        filters = RunFilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        runs, next_cursor = list_runs(request.user.tenant, **filters.validated_data)
        return Response(
            {"results": RunSerializer(runs, many=True).data, "next_cursor": next_cursor}
        )


class RunDetailView(APIView):
    permission_classes = [key_scopes(get=scope.RUNS_READ)]

    @extend_schema(responses=RunSerializer)
    def get(self, request: Request, run_id: str) -> Response:
        run = access_run_by_id(request.user.tenant, run_id)
        return Response(RunSerializer(run).data)


class RunCancelView(APIView):
    permission_classes = [key_scopes(post=scope.RUNS_CANCEL)]

    @extend_schema(request=None, responses={200: RunSerializer, 202: RunSerializer})
    def post(self, request: Request, run_id: str) -> Response:
        """Cancel a run: at once if it is queued or waiting, else between its steps (202)."""
        run = cancel_run(access_run_by_id(request.user.tenant, run_id))
        http_status = status.HTTP_200_OK if run.is_terminal else status.HTTP_202_ACCEPTED
        return Response(RunSerializer(run).data, status=http_status)


class RunTraceView(APIView):
    permission_classes = [key_scopes(get=scope.RUNS_READ)]

    @extend_schema(responses=TraceSerializer)
    def get(self, request: Request, run_id: str) -> Response:
        """The run's spans in order, each with its audit records."""
        run = access_run_by_id(request.user.tenant, run_id)
        return Response(TraceSerializer(get_trace(run.request_id)).data)


class RunReceiptView(APIView):
    permission_classes = [key_scopes(get=scope.RUNS_READ)]

    @extend_schema(responses={200: dict})
    def get(self, request: Request, run_id: str) -> Response:
        """The ended run's receipt, signed (Ed25519, key ids at
        /.well-known/harness-receipt-keys): its chain head and tenant link, every tool call's
        decisions, approvals, digests of inputs, results and answer, outcome and model routes.
        Verify it offline with scripts/harness_verify.py (docs/evidence.md)."""
        return Response(issue_receipt(access_run_by_id(request.user.tenant, run_id)))


class ReceiptKeysView(APIView):
    """Public: the receipts' verification keys, a JWK set (current and retired keys)."""

    authentication_classes: list[type] = []
    permission_classes: list[type] = []

    @extend_schema(responses={200: dict}, auth=[])
    def get(self, request: Request) -> Response:
        return Response(published_keys())


class RunApprovalListView(APIView):
    permission_classes = [key_scopes(get=scope.RUNS_READ)]

    @extend_schema(responses=ApprovalSerializer(many=True))
    def get(self, request: Request, run_id: str) -> Response:
        """The run's calls held for approval (and decided ones), with exact arguments."""
        run = access_run_by_id(request.user.tenant, run_id)
        approvals = policy.list_approvals(request.user.tenant.slug, str(run.id))
        return Response(ApprovalSerializer(approvals, many=True).data)


class RunApprovalDecisionView(APIView):
    permission_classes = [key_scopes(post=scope.APPROVALS_DECIDE)]

    @extend_schema(
        request=PolymorphicProxySerializer(
            component_name="ApprovalDecision",
            serializers={"approve": ApproveSerializer, "deny": DenySerializer},
            resource_type_field_name="decision",
        ),
        responses=RunSerializer,
        parameters=[ACTING_USER_PARAMETER],
    )
    def post(self, request: Request, run_id: str, call_id: str) -> Response:
        """Approve or deny one held call, for the arguments whose SHA-256 you name, optionally
        approving it with changed arguments (``arguments_patch``). The approver
        (X-Harness-User) needs approval:decide. The run resumes on a worker."""
        body = ApprovalDecisionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        run = decide_tool_call(
            request.user.tenant,
            run_id,
            call_id,
            approver=request.headers.get("X-Harness-User", "").strip(),
            approve=body.validated_data["decision"] == "approve",
            arguments_sha256=body.validated_data["arguments_sha256"],
            comment=body.validated_data.get("comment", ""),
            arguments_patch=body.validated_data.get("arguments_patch"),
        )
        return Response(RunSerializer(run).data)


class RunReplayView(APIView):
    permission_classes = [key_scopes(post=scope.RUNS_READ)]

    @extend_schema(request=None, responses={200: dict})
    def post(self, request: Request, run_id: str) -> Response:
        """Re-decide the run's recorded tool calls under today's code and policy, from its
        recorded model responses and tool results (no model, no tool, nothing written), and
        report where it diverges."""
        run = access_run_by_id(request.user.tenant, run_id)
        return Response(replay_run(run).to_dict())


class PolicyWhatIfView(PolicyAdminOnly, APIView):
    permission_classes = [key_scopes(post=scope.POLICY_READ)]

    @extend_schema(
        request=WhatIfSerializer, responses={200: dict}, parameters=[ACTING_USER_PARAMETER]
    )
    def post(self, request: Request) -> Response:
        """The calls of the tenant's last ``limit`` runs a proposed policy change would change,
        before it is saved (nothing is). The acting user needs policy:admin."""
        tenant = request.user.tenant
        body = WhatIfSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        try:
            return Response(what_if(tenant, data["changes"], data["limit"]))
        except InvalidRule as exc:  # well formed (checked above): the tenant's rules refuse it
            raise RuleConflict(exc.message, exc.details) from exc
