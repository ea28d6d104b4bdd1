"""The one error format of the API: ``{"error": {"code", "message", "details"}}``."""

from __future__ import annotations

import logging
import sys
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler

from core.errors import DomainError
from harness.api.parsers import RequestTooLarge
from harness.dependencies import RETRY_AFTER_S, unavailable_dependency
from harness.errors import ErrorCode

logger = logging.getLogger(__name__)

_DRF_CODES: list[tuple[type[exceptions.APIException], ErrorCode]] = [
    (RequestTooLarge, ErrorCode.REQUEST_TOO_LARGE),
    (exceptions.ParseError, ErrorCode.MALFORMED_JSON),
    (exceptions.NotAuthenticated, ErrorCode.UNAUTHENTICATED),
    (exceptions.AuthenticationFailed, ErrorCode.INVALID_API_KEY),
    (exceptions.PermissionDenied, ErrorCode.PERMISSION_DENIED),
    (exceptions.NotFound, ErrorCode.NOT_FOUND),
    (exceptions.MethodNotAllowed, ErrorCode.METHOD_NOT_ALLOWED),
    (exceptions.UnsupportedMediaType, ErrorCode.UNSUPPORTED_MEDIA_TYPE),
    (exceptions.Throttled, ErrorCode.THROTTLED),
    (exceptions.ValidationError, ErrorCode.INVALID_REQUEST),
]


def render_api_error(exc: Exception, context: dict[str, Any]) -> Response:
    """Wrap DRF's handler (keeping its rollback and headers) and render our format."""
    if isinstance(exc, RequestDataTooBig):  # Django read the body before our parser did
        exc = RequestTooLarge(
            f"The request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes."
        )
    if isinstance(exc, DomainError) and exc.exposed:
        response = _error_response(exc.http_status, exc.code, exc.message, exc.details)
        for header, value in exc.headers.items():
            response[header] = value  # e.g. Retry-After on a 429
        return response
    dependency = unavailable_dependency(exc)
    if dependency is not None:
        return unavailable_response(dependency, exc)
    response = exception_handler(exc, context)
    if response is None:
        request = context.get("request")
        request_id = getattr(request, "request_id", None) if request else None
        logger.exception("Unexpected error in %s", context.get("view"))
        return _error_response(
            status.HTTP_500_INTERNAL_SERVER_ERROR,
            ErrorCode.INTERNAL_ERROR,
            "An unexpected error occurred.",
            {"request_id": request_id} if request_id else {},
        )
    code = next((c for cls, c in _DRF_CODES if isinstance(exc, cls)), ErrorCode.INVALID_REQUEST)
    if isinstance(exc, exceptions.ValidationError):
        message, details = "The request is invalid.", {"fields": response.data}
    elif isinstance(exc, exceptions.ParseError):
        message, details = "The request body is not valid JSON.", {"parser": str(exc.detail)}
    else:
        message, details = str(getattr(exc, "detail", exc)), {}
    response.data = {"error": {"code": str(code), "message": message, "details": details}}
    return response


def _error_response(http_status: int, code: Any, message: str, details: dict) -> Response:
    return Response(
        {"error": {"code": str(code), "message": message, "details": details}}, status=http_status
    )


def unavailable_response(dependency: str, exc: BaseException) -> Response:
    """503 ``service_unavailable`` with ``Retry-After``: a dependency is down, the request may
    be sent again (with the same ``Idempotency-Key``)."""
    logger.warning("%s unavailable, answering 503: %s", dependency, exc)
    response = _error_response(
        status.HTTP_503_SERVICE_UNAVAILABLE,
        ErrorCode.SERVICE_UNAVAILABLE,
        f"A service Harness depends on ({dependency}) is unavailable; try again shortly.",
        {"dependency": dependency},
    )
    response["Retry-After"] = str(RETRY_AFTER_S)
    return response


def server_error(request: HttpRequest) -> HttpResponse:
    """Django's ``handler500``, for errors raised outside a DRF view (middleware, URL
    resolution): called while the exception is being handled, so it can still tell a
    dependency outage (503, in the API's error format) from a bug (Django's plain 500)."""
    exc = sys.exc_info()[1]
    dependency = unavailable_dependency(exc) if exc is not None else None
    if dependency is None:
        return defaults.server_error(request)
    logger.warning("%s unavailable, answering 503: %s", dependency, exc)
    response = JsonResponse(
        {
            "error": {
                "code": str(ErrorCode.SERVICE_UNAVAILABLE),
                "message": f"A service Harness depends on ({dependency}) is unavailable; "
                "try again shortly.",
                "details": {"dependency": dependency},
            }
        },
        status=503,
    )
    response["Retry-After"] = str(RETRY_AFTER_S)
    return response
