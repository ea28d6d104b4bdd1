from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

urlpatterns = [
    path("admin/", admin.site.urls),
    path(
        "api/v1/schema",
        SpectacularAPIView.as_view(authentication_classes=[], permission_classes=[]),
        name="api-schema",
    ),
    path(
        "api/v1/docs",
        SpectacularSwaggerView.as_view(
            url_name="api-schema", authentication_classes=[], permission_classes=[]
        ),
        name="api-docs",
    ),
    path("api/v1/", include("harness.api.urls")),
]
