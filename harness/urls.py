from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from harness.api.views import ReceiptKeysView
from harness.health import healthz, readyz

# The schema and its docs are public: they describe the API, they do not call it.
PUBLIC = {"authentication_classes": [], "permission_classes": []}

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    path("admin/", admin.site.urls),
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
