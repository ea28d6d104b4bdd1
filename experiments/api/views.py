"""The dataset and experiment API: parse, check the acting user's scope, call one service.

Writes name the end user the API client acts for in ``X-Harness-User``; that user needs
``dataset:write`` (datasets) or ``experiment:run`` (experiments; and ``experiment:live_tools``
to run tools live) in the key's tenant. Reads are the tenant client's, and show masked fields
only.
"""

from __future__ import annotations

from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from experiments import queries, services
from experiments.api import responses as shapes
from experiments.api.serializers import (
    DatasetCreateSerializer,
    DatasetItemsSerializer,
    ExperimentCreateSerializer,
    ItemEditSerializer,
)
from harness.api.schema import DESCRIPTIONS, ErrorSerializer
from policy import services as policy
from policy.api.permissions import key_scopes
from policy.key_scopes import DATASETS, EXPERIMENTS

ACTING_USER_HEADER = "X-Harness-User"


def acting_user(scope: str) -> OpenApiParameter:
    return OpenApiParameter(
        ACTING_USER_HEADER,
        str,
        OpenApiParameter.HEADER,
        required=True,
        description=f"The end user the client acts for; needs {scope} in the tenant.",
    )


def errors(*statuses: int) -> dict[int, OpenApiResponse]:
    """Domain errors an operation answers beyond those its shape implies."""
    return {
        status_: OpenApiResponse(ErrorSerializer, description=DESCRIPTIONS[str(status_)])
        for status_ in statuses
    }


DATASET_USER = acting_user("dataset:write")
EXPERIMENT_USER = acting_user("experiment:run (and experiment:live_tools for live tools)")


def _acting(request: Request, scope: str) -> tuple[str, str]:
    """Checks that the acting user holds ``scope`` in the key's tenant; returns the user and
    who did it, for the record."""
    user = request.headers.get(ACTING_USER_HEADER, "").strip()
    policy.require_scope(request.user.tenant.slug, user, scope)
    return user, f"{user} via api key {request.user.api_key.prefix}"


def _actor(request: Request, scope: str) -> str:
    return _acting(request, scope)[1]


def _valid(serializer_class: Any, data: Any) -> dict[str, Any]:
    body = serializer_class(data=data)
    body.is_valid(raise_exception=True)
    return body.validated_data


def _run_filter(data: dict[str, Any]) -> services.RunFilter | None:
    return services.RunFilter.from_dict(data["filter"]) if "filter" in data else None


class DatasetListView(APIView):
    permission_classes = [key_scopes(get=DATASETS, post=DATASETS)]

    @extend_schema(operation_id="datasets_list", responses={200: shapes.DatasetListSerializer})
    def get(self, request: Request) -> Response:
        """The tenant's datasets, newest first."""
        return Response({"datasets": queries.list_datasets(request.user.tenant)})

    @extend_schema(
        request=DatasetCreateSerializer,
        responses={201: shapes.DatasetCreatedSerializer, **errors(404, 409, 422)},
        parameters=[DATASET_USER],
    )
    def post(self, request: Request) -> Response:
        """A dataset of recorded runs, by id and/or by a filter (needs dataset:write)."""
        actor = _actor(request, services.DATASET_SCOPE)
        data = _valid(DatasetCreateSerializer, request.data)
        dataset = services.create_dataset(
            request.user.tenant, data["name"], data["runs"], actor, _run_filter(data)
        )
        body = queries.dataset_summary(dataset)
        return Response(
            {key: body[key] for key in ("id", "name", "items")}, status=status.HTTP_201_CREATED
        )


class DatasetDetailView(APIView):
    permission_classes = [key_scopes(get=DATASETS)]

    @extend_schema(responses={200: shapes.DatasetDetailSerializer, **errors(404)})
    def get(self, request: Request, dataset: str) -> Response:
        """A dataset (by id or name) with its items (``item_list``)."""
        found = services.get_dataset(request.user.tenant, dataset)
        return Response(queries.dataset_detail(found))


class DatasetItemsView(APIView):
    permission_classes = [key_scopes(post=DATASETS)]

    @extend_schema(
        request=DatasetItemsSerializer,
        responses={200: shapes.DatasetSummarySerializer, **errors(404, 409, 422)},
        parameters=[DATASET_USER],
    )
    def post(self, request: Request, dataset: str) -> Response:
        """Add recorded runs, by id and/or by a filter (needs dataset:write)."""
        actor = _actor(request, services.DATASET_SCOPE)
        data = _valid(DatasetItemsSerializer, request.data)
        found = services.get_dataset(request.user.tenant, dataset)
        services.add_items(found, data["runs"], actor, _run_filter(data))
        return Response(queries.dataset_summary(found))


class DatasetItemView(APIView):
    permission_classes = [key_scopes(patch=DATASETS, delete=DATASETS)]

    @extend_schema(
        request=ItemEditSerializer,
        responses={200: shapes.DatasetItemSerializer, **errors(404, 422)},
        parameters=[DATASET_USER],
    )
    def patch(self, request: Request, dataset: str, item: str) -> Response:
        """Set an item's expectations (needs dataset:write)."""
        actor = _actor(request, services.DATASET_SCOPE)
        data = _valid(ItemEditSerializer, request.data)
        found = services.get_item(services.get_dataset(request.user.tenant, dataset), item)
        if "expectations" in data:
            services.set_expectations(found, data["expectations"], actor)
        return Response(queries.item_view(found))

    @extend_schema(request=None, responses={204: None, **errors(404)}, parameters=[DATASET_USER])
    def delete(self, request: Request, dataset: str, item: str) -> Response:
        """Remove an item (needs dataset:write)."""
        actor = _actor(request, services.DATASET_SCOPE)
        services.remove_item(services.get_dataset(request.user.tenant, dataset), item, actor)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ExperimentListView(APIView):
    permission_classes = [key_scopes(get=EXPERIMENTS, post=EXPERIMENTS)]

    @extend_schema(
        operation_id="experiments_list", responses={200: shapes.ExperimentListSerializer}
    )
    def get(self, request: Request) -> Response:
        """The tenant's experiments (the last 200), newest first, with their progress."""
        return Response({"experiments": queries.list_experiments(request.user.tenant)})

    @extend_schema(
        request=ExperimentCreateSerializer,
        responses={202: shapes.ExperimentAcceptedSerializer, **errors(404, 409, 422)},
        parameters=[EXPERIMENT_USER],
    )
    def post(self, request: Request) -> Response:
        """Run a dataset again with a candidate, tools answered from the recording (needs
        experiment:run; tools run live need experiment:live_tools too); items run on Celery
        workers."""
        user, actor = _acting(request, services.EXPERIMENT_SCOPE)
        data = _valid(ExperimentCreateSerializer, request.data)
        if data["tools"] != "recorded":
            policy.require_scope(request.user.tenant.slug, user, services.LIVE_TOOLS_SCOPE)
        experiment = services.start_experiment(
            request.user.tenant,
            data["dataset"],
            data["candidate"],
            data["tools"],
            actor,
            token_budget=data.get("token_budget"),
            concurrency=data.get("concurrency"),
            judge=data.get("judge"),
        )
        return Response(
            {
                "id": str(experiment.id),
                "status": experiment.status,
                "links": {"self": f"/api/v1/experiments/{experiment.id}"},
            },
            status=status.HTTP_202_ACCEPTED,
        )


class ExperimentDetailView(APIView):
    permission_classes = [key_scopes(get=EXPERIMENTS)]

    @extend_schema(responses={200: shapes.ExperimentDetailSerializer, **errors(404)})
    def get(self, request: Request, experiment_id: str) -> Response:
        """Status, progress, summary and per-item verdicts."""
        experiment = services.get_experiment(request.user.tenant, experiment_id)
        return Response(queries.experiment_detail(experiment))


class ExperimentCancelView(APIView):
    permission_classes = [key_scopes(post=EXPERIMENTS)]

    @extend_schema(
        request=None,
        responses={200: shapes.ExperimentDetailSerializer, **errors(404)},
        parameters=[EXPERIMENT_USER],
    )
    def post(self, request: Request, experiment_id: str) -> Response:
        """Items not started are not run (needs experiment:run)."""
        actor = _actor(request, services.EXPERIMENT_SCOPE)
        experiment = services.get_experiment(request.user.tenant, experiment_id)
        cancelled = services.cancel_experiment(experiment, actor)
        return Response(queries.experiment_detail(cancelled))


class ExperimentExportView(APIView):
    permission_classes = [key_scopes(get=EXPERIMENTS)]

    @extend_schema(
        responses={
            (200, "application/x-ndjson"): OpenApiResponse(
                OpenApiTypes.STR,
                description="JSON Lines: the experiment with its summary, then one line per item.",
            ),
            **errors(404),
        }
    )
    def get(self, request: Request, experiment_id: str) -> StreamingHttpResponse:
        """The experiment as JSON Lines (``"type": "experiment"``, then ``"type": "item"``)."""
        experiment = services.get_experiment(request.user.tenant, experiment_id)
        response = StreamingHttpResponse(
            queries.export_lines(experiment), content_type="application/x-ndjson"
        )
        response["Content-Disposition"] = f'attachment; filename="experiment-{experiment.id}.jsonl"'
        return response
