"""The infrastructure Harness depends on (PostgreSQL, Redis, the Celery broker), when it is
down.

A request that fails because a dependency is unreachable is answered ``503
service_unavailable`` with ``Retry-After`` (the client may try again, with the same
``Idempotency-Key``), never ``500``: nothing is wrong with the request or with Harness, and a
500 would page someone for a blip. ``unavailable_dependency`` names the dependency an
exception says is down, or None for any other error.
"""

from __future__ import annotations

from django.db import InterfaceError as DjangoInterfaceError
from django.db import OperationalError as DjangoOperationalError

# Seconds a client is asked to wait: about the time a restarted PostgreSQL or Redis takes.
RETRY_AFTER_S = 5


def _classes(module: str, *names: str) -> tuple[type[BaseException], ...]:
    try:
        imported = __import__(module, fromlist=list(names))
    except ImportError:  # an optional dependency that is not installed
        return ()
    return tuple(getattr(imported, name) for name in names)


_DATABASE = (
    DjangoOperationalError,
    DjangoInterfaceError,
    *_classes("psycopg", "OperationalError", "InterfaceError"),
)
# redis-py's ConnectionError covers refused and reset connections and a server that is
# loading its data; TimeoutError a server that does not answer within the socket timeout.
_REDIS = _classes("redis.exceptions", "ConnectionError", "TimeoutError", "BusyLoadingError")
_BROKER = _classes("kombu.exceptions", "OperationalError")
# What a Celery task retries (``autoretry_for``): each says a dependency is unreachable.
UNAVAILABLE_ERRORS = (*_DATABASE, *_REDIS, *_BROKER)


def unavailable_dependency(exc: BaseException) -> str | None:
    """``"database"``, ``"redis"`` or ``"broker"`` when ``exc`` (or what it was raised from)
    says that dependency is unreachable; None otherwise."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, _DATABASE):
            return "database"
        if isinstance(current, _REDIS):
            return "redis"
        if isinstance(current, _BROKER):
            return "broker"
        current = current.__cause__  # raised from it; not merely while handling it
    return None
