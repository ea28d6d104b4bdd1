"""The admin app, on Harness's own admin site (``harness.console.site.HarnessAdminSite``): every
model registered with ``@admin.register`` anywhere is tenant-scoped and permission-checked by
default. Listed in ``INSTALLED_APPS`` instead of ``django.contrib.admin``; kept free of model
imports because settings load it before the apps are ready."""

from django.contrib.admin.apps import AdminConfig


class HarnessAdminConfig(AdminConfig):
    default_site = "harness.console.site.HarnessAdminSite"
