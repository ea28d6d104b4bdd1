"""Requests refused before any view runs, with the API's error shape.

- Methods no endpoint implements (TRACE, CONNECT, made-up ones) are ``405`` everywhere, before
  authentication: TRACE would echo the request (credentials included) back through a proxy.
- A path holding NUL (``%00``) is ``400``: it would reach a database query as a path
  parameter, and PostgreSQL cannot compare text with NUL in it.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse

KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def refuse_unservable_requests(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[[HttpRequest], HttpResponse]:
    def middleware(request: HttpRequest) -> HttpResponse:
        if request.method not in KNOWN_METHODS:
            response = _error(405, "method_not_allowed", f"Method {request.method} is not allowed.")
            response["Allow"] = ", ".join(sorted(KNOWN_METHODS))
            return response
        if "\x00" in request.path_info:
            return _error(400, "invalid_request", "The path holds a NUL character (%00).")
        return get_response(request)

    return middleware


def _error(status: int, code: str, message: str) -> JsonResponse:
    return JsonResponse({"error": {"code": code, "message": message, "details": {}}}, status=status)
