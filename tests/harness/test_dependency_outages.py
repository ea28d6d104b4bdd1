"""A dependency that is down answers 503 ``service_unavailable`` with ``Retry-After``, never
500; ``/readyz`` checks PostgreSQL and Redis while ``/healthz`` stays liveness. Every outage
here is real: the database connection pointed where nothing answers, a redis-server of the
test's own killed."""

from __future__ import annotations

import redis
from django.contrib.auth import get_user_model
from django.test import Client

from harness.api.exceptions import render_api_error
from tests.support.outages import database_unreachable, free_port, redis_server  # noqa: F401

BODY = {"agent": "ticket-assistant", "user": "bob", "input": "Why is T-20250318-007 open?"}


def assert_unavailable(response, dependency: str) -> None:
    assert response.status_code == 503, response.content
    assert response["Retry-After"] == "5"
    error = response.json()["error"]
    assert error["code"] == "service_unavailable"
    assert error["details"] == {"dependency": dependency}


def test_the_api_answers_503_while_the_database_is_down_and_serves_again_after(acme):
    run = acme.post("/api/v1/runs", BODY).json()

    with database_unreachable():
        assert_unavailable(acme.post("/api/v1/runs", BODY), "database")
        assert_unavailable(acme.get(f"/api/v1/runs/{run['id']}"), "database")

    assert acme.get(f"/api/v1/runs/{run['id']}").status_code == 200
    assert acme.post("/api/v1/runs", BODY).status_code == 200


def test_an_outage_met_outside_the_api_views_is_a_503_too(demo):
    """The admin is plain Django: the session lookup in middleware meets the outage."""
    client = Client(raise_request_exception=False)
    client.force_login(get_user_model().objects.get(username="admin"))

    with database_unreachable():
        assert_unavailable(client.get("/admin/"), "database")

    assert client.get("/admin/").status_code == 200


def test_a_real_redis_connection_error_renders_as_503():
    try:
        redis.Redis(port=free_port(), socket_connect_timeout=1).ping()
    except redis.ConnectionError as exc:
        error = exc
    response = render_api_error(error, {})
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert response.data["error"]["details"] == {"dependency": "redis"}


def test_other_errors_stay_500(demo):
    assert render_api_error(RuntimeError("a bug"), {}).status_code == 500


def test_readyz_checks_the_database_and_redis_healthz_only_the_database(
    demo,
    settings,
    redis_server,  # noqa: F811
):
    settings.REDIS_URL = redis_server.url
    client = Client()
    assert client.get("/readyz").json() == {"status": "ok", "database": "ok", "redis": "ok"}

    redis_server.kill()
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert response.json() == {"status": "unavailable", "database": "ok", "redis": "error"}
    assert client.get("/healthz").status_code == 200  # liveness: restarting helps nothing

    with database_unreachable():
        assert client.get("/readyz").json()["database"] == "error"
        assert client.get("/healthz").status_code == 503

    redis_server.start()
    assert client.get("/readyz").status_code == 200
