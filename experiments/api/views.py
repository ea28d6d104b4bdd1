"""The dataset and experiment API: parse, check the acting user's scope, call one service.

Writes name the end user the API client acts for in ``X-Harness-User``; that user needs
``dataset:write`` (datasets) or ``experiment:run`` (experiments) in the key's tenant. Reads
are the tenant client's, and show masked fields only.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from experiments import queries, services
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
EXPERIMENT_USER = acting_user("experiment:run")


def _actor(request: Request, scope: str) -> str:
    """Checks that the acting user holds ``scope`` in the key's tenant; who did it, for the
    record."""
    user = request.headers.get(ACTING_USER_HEADER, "").strip()
    policy.require_scope(request.user.tenant.slug, user, scope)
    return f"{user} via api key {request.user.api_key.prefix}"


def _valid(serializer_class: Any, data: Any) -> dict[str, Any]:
    body = serializer_class(data=data)
    body.is_valid(raise_exception=True)
    return body.validated_data


class DatasetListView(APIView):
    permission_classes = [key_scopes(get=DATASETS, post=DATASETS)]

    @extend_schema(operation_id="datasets_list", responses={200: dict})
    def get(self, request: Request) -> Response:
        """The tenant's datasets, newest first."""
        return Response({"datasets": queries.list_datasets(request.user.tenant)})

    @extend_schema(
        request=DatasetCreateSerializer,
        responses={201: dict, **errors(404, 409)},
        parameters=[DATASET_USER],
    )
    def post(self, request: Request) -> Response:
        """A dataset of recorded runs (needs dataset:write)."""
        actor = _actor(request, services.DATASET_SCOPE)
        data = _valid(DatasetCreateSerializer, request.data)
        dataset = services.create_dataset(request.user.tenant, data["name"], data["runs"], actor)
        body = queries.dataset_summary(dataset)
        return Response(
            {key: body[key] for key in ("id", "name", "items")}, status=status.HTTP_201_CREATED
        )


class DatasetDetailView(APIView):
    permission_classes = [key_scopes(get=DATASETS)]

    @extend_schema(responses={200: dict})
    def get(self, request: Request, dataset: str) -> Response:
        """A dataset (by id or name) with its items (``item_list``)."""
        found = services.get_dataset(request.user.tenant, dataset)
        return Response(queries.dataset_detail(found))


class DatasetItemsView(APIView):
    permission_classes = [key_scopes(post=DATASETS)]

    @extend_schema(
        request=DatasetItemsSerializer,
        responses={200: dict, **errors(404, 409)},
        parameters=[DATASET_USER],
    )
    def post(self, request: Request, dataset: str) -> Response:
        """Add recorded runs to a dataset (needs dataset:write)."""
        _actor(request, services.DATASET_SCOPE)
        data = _valid(DatasetItemsSerializer, request.data)
        found = services.get_dataset(request.user.tenant, dataset)
        services.add_items(found, data["runs"])
        return Response(queries.dataset_summary(found))


class DatasetItemView(APIView):
    permission_classes = [key_scopes(patch=DATASETS, delete=DATASETS)]

    @extend_schema(request=ItemEditSerializer, responses={200: dict}, parameters=[DATASET_USER])
    def patch(self, request: Request, dataset: str, item: str) -> Response:
        """Set an item's expectations (needs dataset:write)."""
        _actor(request, services.DATASET_SCOPE)
        data = _valid(ItemEditSerializer, request.data)
        found = services.get_item(services.get_dataset(request.user.tenant, dataset), item)
        services.set_expectations(found, data["expectations"])
        return Response(queries.item_view(found))

    @extend_schema(request=None, responses={204: None}, parameters=[DATASET_USER])
    def delete(self, request: Request, dataset: str, item: str) -> Response:
        """Remove an item (needs dataset:write)."""
        _actor(request, services.DATASET_SCOPE)
        services.remove_item(services.get_dataset(request.user.tenant, dataset), item)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ExperimentListView(APIView):
    permission_classes = [key_scopes(post=EXPERIMENTS)]

    @extend_schema(
        request=ExperimentCreateSerializer,
        responses={202: dict, **errors(404)},
        parameters=[EXPERIMENT_USER],
    )
    def post(self, request: Request) -> Response:
        """Run a dataset again with a candidate, tools answered from the recording (needs
        experiment:run); items run on Celery workers."""
        actor = _actor(request, services.EXPERIMENT_SCOPE)
        data = _valid(ExperimentCreateSerializer, request.data)
        experiment = services.start_experiment(
            request.user.tenant, data["dataset"], data["candidate"], data["tools"], actor
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

    @extend_schema(responses={200: dict})
    def get(self, request: Request, experiment_id: str) -> Response:
        """Status, progress, summary and per-item verdicts."""
        experiment = services.get_experiment(request.user.tenant, experiment_id)
        return Response(queries.experiment_detail(experiment))


class ExperimentCancelView(APIView):
    permission_classes = [key_scopes(post=EXPERIMENTS)]

    @extend_schema(request=None, responses={200: dict}, parameters=[EXPERIMENT_USER])
    def post(self, request: Request, experiment_id: str) -> Response:
        """Items not started are not run (needs experiment:run)."""
        _actor(request, services.EXPERIMENT_SCOPE)
        experiment = services.get_experiment(request.user.tenant, experiment_id)
        return Response(queries.experiment_detail(services.cancel_experiment(experiment)))
