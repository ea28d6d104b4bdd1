"""The console's datasets and experiments (Harness admin site: tenant-scoped like every admin).

- Datasets: their items (masked fields), read only here; made from the run list's action
  "Add to dataset" (selected runs → a new or existing dataset of their tenant).
- Experiments: a page per experiment — progress, the summary with distributions of cost,
  latency and steps (baseline against candidate), the items filterable by verdict, per item
  the two trajectories side by side (first divergence marked) and the answers diffed; another
  experiment on the same dataset to compare with; JSON Lines export.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from core.errors import DomainError
from experiments import console, queries, services
from experiments.models import Dataset, DatasetItem, Experiment
from harness.models import Run
from policy import services as policy

ADD_TO_DATASET_PERMISSION = "experiments.add_dataset"


class DatasetItemInline(admin.TabularInline):
    model = DatasetItem
    extra = 0
    can_delete = False
    fields = ["position", "run", "agent", "user_id", "input", "status", "outcome", "expectations"]
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Dataset)
class DatasetAdmin(admin.ModelAdmin):
    list_display = ["name", "item_count", "created_by", "created_at", "tenant"]
    list_filter = [("tenant", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["name"]
    readonly_fields = ["tenant", "name", "created_by", "created_at"]
    fields = ["tenant", "name", "description", "created_by", "created_at"]
    inlines = [DatasetItemInline]

    @admin.display(description="items")
    def item_count(self, dataset: Dataset) -> int:
        return dataset.items.count()

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # made from runs: the run list's "Add to dataset", or the API


@admin.register(Experiment)
class ExperimentAdmin(admin.ModelAdmin):
    list_display = ["experiment", "dataset", "status", "progress", "created_by", "created_at"]
    list_filter = ["status", ("tenant", admin.RelatedOnlyFieldListFilter)]
    change_form_template = "admin/experiments/experiment/page.html"

    @admin.display(description="experiment")
    def experiment(self, experiment: Experiment) -> str:
        return format_html('<span class="experiment-id">{}</span>', str(experiment.id)[:8])

    @admin.display(description="done / total")
    def progress(self, experiment: Experiment) -> str:
        rows = list(experiment.items.values_list("finished_at", flat=True))
        return f"{sum(1 for done in rows if done)}/{len(rows)}"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        experiment = self.get_object(request, object_id)
        if experiment is None or not self.has_view_permission(request, experiment):
            return super().change_view(request, object_id, form_url, extra_context)
        verdict = request.GET.get("verdict", "")
        others = (
            self.get_queryset(request).filter(dataset=experiment.dataset).exclude(id=experiment.id)
        )
        context = {
            **self.admin_site.each_context(request),
            "title": f"Experiment {str(experiment.id)[:8]}",
            "opts": self.model._meta,
            "experiment": experiment,
            "page": console.experiment_page(experiment, verdict),
            "verdict": verdict,
            "others": others,
            **(extra_context or {}),
        }
        return TemplateResponse(request, self.change_form_template, context)

    def get_urls(self) -> list[Any]:
        # ``permission_view``: the site's tenant-scoped admin, mixed in at registration.
        return [
            path(
                "<path:object_id>/item/<uuid:item_id>/",
                self.permission_view(self.item_view, "view"),
                name="experiments_experiment_item",
            ),
            path(
                "<path:object_id>/compare/<uuid:other_id>/",
                self.permission_view(self.compare_view, "view"),
                name="experiments_experiment_compare",
            ),
            path(
                "<path:object_id>/export/",
                self.permission_view(self.export_view, "view"),
                name="experiments_experiment_export",
            ),
            *super().get_urls(),
        ]

    def _experiment(self, request: HttpRequest, object_id: str) -> Experiment:
        return get_object_or_404(self.get_queryset(request), id=object_id)

    def item_view(self, request: HttpRequest, object_id: str, item_id: Any) -> HttpResponse:
        experiment = self._experiment(request, object_id)
        row = get_object_or_404(experiment.items.select_related("item__run", "run"), id=item_id)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Item {row.item.position + 1} of experiment {str(experiment.id)[:8]}",
            "opts": self.model._meta,
            "experiment": experiment,
            "row": row,
            "view": console.side_by_side(row),
        }
        return TemplateResponse(request, "admin/experiments/experiment/item.html", context)

    def compare_view(self, request: HttpRequest, object_id: str, other_id: Any) -> HttpResponse:
        experiment = self._experiment(request, object_id)
        other = self._experiment(request, str(other_id))
        try:
            compared = console.compare(experiment, other)
        except DomainError as exc:
            self.message_user(request, exc.message, messages.ERROR)
            compared = None
        context = {
            **self.admin_site.each_context(request),
            "title": "Compare experiments",
            "opts": self.model._meta,
            "experiment": experiment,
            "other": other,
            "compared": compared,
        }
        return TemplateResponse(request, "admin/experiments/experiment/compare.html", context)

    def export_view(self, request: HttpRequest, object_id: str) -> StreamingHttpResponse:
        experiment = self._experiment(request, object_id)
        response = StreamingHttpResponse(
            queries.export_lines(experiment), content_type="application/x-ndjson"
        )
        response["Content-Disposition"] = f'attachment; filename="experiment-{experiment.id}.jsonl"'
        return response


# --- "Add to dataset" on the run list ---------------------------------------------------------


class AddToDatasetForm(forms.Form):
    dataset = forms.CharField(
        max_length=200,
        help_text="An existing dataset of the runs' tenant, or the name of a new one.",
    )


@admin.action(description="Add to dataset", permissions=["add_to_dataset"])
def add_to_dataset(model_admin: Any, request: HttpRequest, queryset: QuerySet) -> Any:
    """Asks for the dataset's name, then adds the selected ended runs (per tenant: a dataset
    belongs to one tenant). Needs the console permission to add datasets and, in each runs'
    tenant, the policy scope ``dataset:write`` for the staff user."""
    form = AddToDatasetForm(request.POST if "apply" in request.POST else None)
    if not form.is_valid():
        context = {
            **model_admin.admin_site.each_context(request),
            "title": "Add runs to a dataset",
            "opts": model_admin.model._meta,
            "form": form,
            "runs": queryset,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "admin/experiments/add_to_dataset.html", context)
    name = form.cleaned_data["dataset"]
    actor = f"console:{request.user.get_username()}"
    by_tenant: dict[Any, list[str]] = {}
    for run in queryset.select_related("tenant"):
        by_tenant.setdefault(run.tenant, []).append(str(run.id))
    for tenant, run_ids in by_tenant.items():
        try:
            policy.require_scope(tenant.slug, request.user.get_username(), services.DATASET_SCOPE)
            try:
                dataset = services.get_dataset(tenant, name)
            except DomainError:
                dataset = services.create_dataset(tenant, name, run_ids, actor)
                added = len(run_ids)
            else:
                added = len(services.add_items(dataset, run_ids, actor))
        except DomainError as exc:
            model_admin.message_user(request, f"{tenant.slug}: {exc.message}", messages.ERROR)
            continue
        url = reverse("admin:experiments_dataset_change", args=[dataset.id])
        model_admin.message_user(
            request,
            format_html('{} run(s) added to dataset <a href="{}">{}</a>.', added, url, name),
            messages.SUCCESS,
        )
    return None


def _may_add_to_dataset(request: HttpRequest) -> bool:
    return request.user.has_perm(ADD_TO_DATASET_PERMISSION)


def offer_add_to_dataset() -> None:
    """Put "Add to dataset" among the run list's actions (the harness imports no app above
    it: this app adds its action to the registered run admin)."""
    run_admin = admin.site.get_model_admin(Run)
    if add_to_dataset not in (run_admin.actions or ()):
        run_admin.actions = [*(run_admin.actions or ()), add_to_dataset]
    run_admin.has_add_to_dataset_permission = _may_add_to_dataset


offer_add_to_dataset()
