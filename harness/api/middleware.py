"""Methods no endpoint implements (TRACE, CONNECT, made-up ones) are ``405`` everywhere, before
authentication: TRACE would echo the request (credentials included) back through a proxy."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse

KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def refuse_unknown_methods(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[[HttpRequest], HttpResponse]:
    def middleware(request: HttpRequest) -> HttpResponse:
        if request.method not in KNOWN_METHODS:
            response = JsonResponse(
                {
                    "error": {
                        "code": "method_not_allowed",
                        "message": f"Method {request.method} is not allowed.",
                        "details": {},
                    }
                },
                status=405,
            )
            response["Allow"] = ", ".join(sorted(KNOWN_METHODS))
            return response
        return get_response(request)

    return middleware
