"""Health endpoints for load balancers and container health checks. Unauthenticated; they
reveal nothing but whether each dependency answers.

- ``/healthz`` (liveness): this process serves and reaches its database. A container that
  fails it is restarted.
- ``/readyz`` (readiness): PostgreSQL and Redis (when ``REDIS_URL`` is set) both answer; a
  replica that fails it should get no traffic until they do, but restarting it helps nothing.
"""

from __future__ import annotations

import functools

from django.conf import settings
from django.db import DatabaseError, connection
from django.http import HttpRequest, JsonResponse

from harness.dependencies import RETRY_AFTER_S

# Short: a readiness probe must answer within the prober's own timeout (docker: 3-5 s).
REDIS_TIMEOUT_S = 1.0


def healthz(request: HttpRequest) -> JsonResponse:
    """200 when the database answers, 503 otherwise."""
    if not _database_ok():
        return JsonResponse({"status": "unavailable", "database": "error"}, status=503)
    return JsonResponse({"status": "ok", "database": "ok"})


def readyz(request: HttpRequest) -> JsonResponse:
    """200 when PostgreSQL and Redis answer, else 503 naming the one that does not."""
    checks = {"database": "ok" if _database_ok() else "error"}
    if settings.REDIS_URL:
        checks["redis"] = "ok" if _redis_ok(settings.REDIS_URL) else "error"
    if "error" in checks.values():
        response = JsonResponse({"status": "unavailable", **checks}, status=503)
        response["Retry-After"] = str(RETRY_AFTER_S)
        return response
    return JsonResponse({"status": "ok", **checks})


def _database_ok() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError:
        return False
    return True


def _redis_ok(url: str) -> bool:
    import redis

    try:
        return bool(_redis_client(url).ping())
    except (redis.RedisError, OSError):
        return False


@functools.cache
def _redis_client(url: str):  # redis is imported lazily
    import redis

    return redis.Redis.from_url(
        url, socket_timeout=REDIS_TIMEOUT_S, socket_connect_timeout=REDIS_TIMEOUT_S
    )
