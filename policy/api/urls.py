from django.urls import path

from policy.api import views

urlpatterns = [
    path("policies", views.PolicyView.as_view(), name="policy"),
    path("policies/permissions", views.PermissionView.as_view(), name="policy-permissions"),
    path("policies/roles", views.RoleView.as_view(), name="policy-roles"),
    path("policies/rules", views.RuleListView.as_view(), name="policy-rules"),
    path("policies/rules/<str:name>", views.RuleDetailView.as_view(), name="policy-rule"),
    path("policies/changes", views.ChangeListView.as_view(), name="policy-changes"),
    path("policies/budget", views.BudgetView.as_view(), name="policy-budget"),
]
