"""Sign-in throttling of the admin console, with django-axes (docs/security.md, "Hardening").

After ``HARNESS_LOGIN_FAILURE_LIMIT`` wrong passwords in a row for one user name from one
address, signing in as that user from that address is refused for ``HARNESS_LOGIN_COOLOFF_S``,
the right password included; other users, and the same user from other addresses, are not
affected. Attempts during the lockout are refused without extending it, so the time the page
announces is the time it ends. A successful sign-in clears the count.

- ``ConsoleLoginBackend``, first in ``AUTHENTICATION_BACKENDS``, refuses a locked-out sign-in
  before any password is checked; axes counts the failures (``user_login_failed``) and
  ``AxesMiddleware`` turns a lockout into ``lockout_response``: the sign-in page saying until
  when, ``429`` with ``Retry-After``.
- The audit: axes keeps each failed sign-in (*Access failures*, with whether it locked out)
  and the running count per user and address (*Access attempts*; deleting a row lifts that
  lockout at once) — console pages for superusers only — and ``log_lockout`` writes a
  warning line for each lockout and each sign-in refused during one.
"""

from __future__ import annotations

import logging
import math
from datetime import datetime
from typing import Any

from axes.backends import AxesStandaloneBackend
from axes.helpers import get_client_username, get_cool_off
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib import admin
from django.db.models import Max
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone

from core.admin import ReadOnlyAdmin

logger = logging.getLogger(__name__)


class ConsoleLoginBackend(AxesStandaloneBackend):
    """axes' lockout check for every sign-in made through a web request.

    ``authenticate()`` without a request is no web sign-in (the test client's ``login``, a
    shell): there is no address to throttle, and axes would raise instead of answering.
    """

    def authenticate(self, request: HttpRequest | None, *args: Any, **kwargs: Any) -> None:
        if request is None:
            return None
        return super().authenticate(request, *args, **kwargs)


def locked_until(request: HttpRequest, username: str | None) -> datetime:
    """When the lockout of ``username`` at the request's address ends."""
    cool_off = get_cool_off(request)
    last = AccessAttempt.objects.filter(
        username=username, ip_address=getattr(request, "axes_ip_address", None)
    ).aggregate(last=Max("attempt_time"))["last"]
    return (last or timezone.now()) + cool_off


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None = None, credentials: Any = None
) -> HttpResponse:
    """The sign-in page saying the sign-in is locked and until when: ``429``, ``Retry-After``."""
    username = get_client_username(request, credentials) or ""
    until = locked_until(request, username)
    seconds = max(1, math.ceil((until - timezone.now()).total_seconds()))
    message = (
        f"Too many failed sign-ins for “{username}” from your address "
        f"({settings.AXES_FAILURE_LIMIT} in a row). Signing in as this user from here is locked "
        f"until {until:%Y-%m-%d %H:%M:%S} UTC (about {math.ceil(seconds / 60)} min), even with "
        "the right password. Other users, and other addresses, are not affected."
    )
    context = {
        **admin.site.each_context(request),
        "title": "Sign-in locked",
        "message": message,
        "until": until,
    }
    response = TemplateResponse(
        request, "admin/harness/login_locked_out.html", context, status=429
    ).render()
    response["Retry-After"] = str(seconds)
    return response


def log_lockout(
    sender: Any, request: HttpRequest, username: str | None, ip_address: str | None, **kwargs: Any
) -> None:
    """A warning line per lockout (axes sends ``user_locked_out`` for the failure that locks
    and again for each sign-in refused while locked)."""
    failures = getattr(request, "axes_failures_since_start", None)
    if failures is None:
        logger.warning(
            "Console sign-in refused: %r is locked out at %s until %s",
            username, ip_address, f"{locked_until(request, username):%Y-%m-%dT%H:%M:%SZ}",
        )  # fmt: skip
    else:
        logger.warning(
            "Console sign-in locked out: %r at %s after %d failed sign-ins, for %d s",
            username, ip_address, failures, get_cool_off(request).total_seconds(),
        )  # fmt: skip


class AccessAttemptAdmin(admin.ModelAdmin):
    """Running counts per user name and address; deleting one lifts its lockout."""

    list_display = ["username", "ip_address", "failures_since_start", "attempt_time", "user_agent"]
    search_fields = ["username", "ip_address"]
    fields = list_display
    readonly_fields = list_display

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class AccessFailureLogAdmin(ReadOnlyAdmin):
    """Every failed sign-in, and whether it locked the user out: the record, never edited."""

    list_display = ["attempt_time", "username", "ip_address", "locked_out", "user_agent"]
    list_filter = ["locked_out"]
    search_fields = ["username", "ip_address"]
    fields = list_display
    readonly_fields = list_display
    actions = None


class AccessLogAdmin(AccessFailureLogAdmin):
    """Successful sign-ins and sign-outs."""

    list_display = ["attempt_time", "logout_time", "username", "ip_address", "user_agent"]
    list_filter = []
    fields = list_display
    readonly_fields = list_display
