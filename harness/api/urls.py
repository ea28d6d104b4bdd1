from django.urls import path

from harness.api import events, reports, schema, views  # noqa: F401 (schema: extensions)

urlpatterns = [
    path("runs", views.RunListView.as_view(), name="run-list"),
    path("runs/<str:run_id>", views.RunDetailView.as_view(), name="run-detail"),
    path("runs/<str:run_id>/cancel", views.RunCancelView.as_view(), name="run-cancel"),
    path("runs/<str:run_id>/events", events.RunEventsView.as_view(), name="run-events"),
    path("runs/<str:run_id>/trace", views.RunTraceView.as_view(), name="run-trace"),
    path("runs/<str:run_id>/receipt", views.RunReceiptView.as_view(), name="run-receipt"),
    path("runs/<str:run_id>/replay", views.RunReplayView.as_view(), name="run-replay"),
    path("runs/<str:run_id>/approvals", views.RunApprovalListView.as_view(), name="run-approvals"),
    path(
        "runs/<str:run_id>/approvals/<str:call_id>",
        views.RunApprovalDecisionView.as_view(),
        name="run-approval-decision",
    ),
    path("reports/costs", reports.CostReportView.as_view(), name="report-costs"),
    path("policies/what-if", views.PolicyWhatIfView.as_view(), name="policy-what-if"),
]
