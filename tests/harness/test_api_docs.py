"""The OpenAPI schema and its docs page, served without any outside network."""

import yaml


def test_the_openapi_schema_describes_the_run_api(client):
    response = client.get("/api/v1/schema")

    assert response.status_code == 200
    schema = yaml.safe_load(response.content)
    assert schema["openapi"].startswith("3.")
    paths = schema["paths"]
    for path in (
        "/api/v1/runs",
        "/api/v1/runs/{run_id}",
        "/api/v1/runs/{run_id}/cancel",
        "/api/v1/runs/{run_id}/events",
        "/api/v1/runs/{run_id}/trace",
        "/api/v1/runs/{run_id}/approvals/{call_id}",
    ):
        assert path in paths, path


def test_the_docs_page_loads_swagger_ui_from_this_server(client):
    response = client.get("/api/v1/docs")

    assert response.status_code == 200
    page = response.content.decode()
    assert "swagger-ui" in page
    assert "cdn.jsdelivr.net" not in page
    assert "/static/drf_spectacular_sidecar/" in page
