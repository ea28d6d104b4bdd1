"""Run API views: parse, authenticate, call one service, serialize."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from harness.api.serializers import RunCreateSerializer, RunSerializer, TraceSerializer
from harness.queries import access_run_by_id
from harness.services import RunRequest, start_run
from traces.queries import get_trace

IDEMPOTENCY_KEY_PARAMETER = OpenApiParameter(
    "Idempotency-Key",
    str,
    OpenApiParameter.HEADER,
    description="A repeated key returns the run the first request created.",
)


class RunListView(APIView):
    @extend_schema(
        request=RunCreateSerializer,
        responses={200: RunSerializer, 202: RunSerializer},
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
    )
    def post(self, request: Request) -> Response:
        """Start a run. Sync runs answer inline; async runs answer 202 and go on in a worker."""
        body = RunCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        run, _ = start_run(
            request.user.tenant,
            RunRequest(
                agent=data["agent"],
                user_id=data["user"],
                input=data["input"],
                mode=data["mode"],
                callback_url=data.get("callback_url", ""),
                max_steps=data.get("max_steps"),
                idempotency_key=request.headers.get("Idempotency-Key", "").strip(),
            ),
        )
        http_status = status.HTTP_200_OK if run.is_terminal else status.HTTP_202_ACCEPTED
        return Response(RunSerializer(run).data, status=http_status)


class RunDetailView(APIView):
    @extend_schema(responses=RunSerializer)
    def get(self, request: Request, run_id: str) -> Response:
        run = access_run_by_id(request.user.tenant, run_id)
        return Response(RunSerializer(run).data)


class RunTraceView(APIView):
    @extend_schema(responses=TraceSerializer)
    def get(self, request: Request, run_id: str) -> Response:
        """The run's spans in order, each with its audit records."""
        run = access_run_by_id(request.user.tenant, run_id)
        return Response(TraceSerializer(get_trace(run.request_id)).data)
