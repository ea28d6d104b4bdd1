from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from harness.api.views import ReceiptKeysView
from harness.console.oidc import ConsoleOidcCallbackView, ConsoleOidcLoginView
from harness.health import healthz, readyz

# The schema and its docs are public: they describe the API, they do not call it.
PUBLIC = {"authentication_classes": [], "permission_classes": []}

urlpatterns = [
    # A person at the root wants the console; a browser asks every site for /favicon.ico.
    path("", RedirectView.as_view(url="/admin/"), name="root"),
    path("favicon.ico", RedirectView.as_view(url=static("harness/favicon.svg"), permanent=True)),
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    path("admin/", admin.site.urls),
    # Console single sign-on (404 while HARNESS_OIDC_ISSUER is unset; docs/identity.md).
    path("oidc/authenticate/", ConsoleOidcLoginView.as_view(), name="oidc_authentication_init"),
    path("oidc/callback/", ConsoleOidcCallbackView.as_view(), name="oidc_authentication_callback"),
    path(
        ".well-known/harness-receipt-keys",
        ReceiptKeysView.as_view(),
        name="receipt-keys",
    ),
    path("api/v1/schema", SpectacularAPIView.as_view(**PUBLIC), name="api-schema"),
    path(
        "api/v1/docs",
        SpectacularSwaggerView.as_view(url_name="api-schema", **PUBLIC),
        name="api-docs",
    ),
    path("api/v1/", include("harness.api.urls")),
    path("api/v1/", include("policy.api.urls")),
    path("api/v1/", include("experiments.api.urls")),
]

# Errors outside DRF's views (middleware, Django itself): a dependency that is down is a 503.
handler500 = "harness.api.exceptions.server_error"
