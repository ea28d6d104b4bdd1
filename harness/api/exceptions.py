"""The one error format of the API: ``{"error": {"code", "message", "details"}}``."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler

from harness.api.parsers import RequestTooLarge
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
    if _is_domain_error(exc):
        response = _error_response(exc.http_status, exc.code, exc.message, exc.details)
        for header, value in getattr(exc, "headers", {}).items():
            response[header] = value  # e.g. Retry-After on a 429
        return response
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


def _is_domain_error(exc: Exception) -> bool:
    return isinstance(getattr(exc, "http_status", None), int) and hasattr(exc, "code")


def _error_response(http_status: int, code: Any, message: str, details: dict) -> Response:
    return Response(
        {"error": {"code": str(code), "message": message, "details": details}}, status=http_status
    )
