from django.urls import path

from experiments.api import views

urlpatterns = [
    path("datasets", views.DatasetListView.as_view(), name="dataset-list"),
    path("datasets/<str:dataset>", views.DatasetDetailView.as_view(), name="dataset-detail"),
    path("datasets/<str:dataset>/items", views.DatasetItemsView.as_view(), name="dataset-items"),
    path(
        "datasets/<str:dataset>/items/<str:item>",
        views.DatasetItemView.as_view(),
        name="dataset-item",
    ),
    path("experiments", views.ExperimentListView.as_view(), name="experiment-list"),
    path(
        "experiments/<str:experiment_id>",
        views.ExperimentDetailView.as_view(),
        name="experiment-detail",
    ),
    path(
        "experiments/<str:experiment_id>/export",
        views.ExperimentExportView.as_view(),
        name="experiment-export",
    ),
    path(
        "experiments/<str:experiment_id>/cancel",
        views.ExperimentCancelView.as_view(),
        name="experiment-cancel",
    ),
]
