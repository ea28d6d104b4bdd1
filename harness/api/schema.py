"""What makes the OpenAPI schema exact: the Bearer key, the error shape and every status.

- ``TenantApiKeyScheme`` documents ``Authorization: Bearer hk_…`` as an HTTP bearer scheme
  (Swagger UI shows its *Authorize* button for it).
- ``document_error_statuses`` (a drf-spectacular post-processing hook) adds the statuses an
  operation can answer besides its own: each with the one error shape ``{"error": {"code",
  "message", "details"}}``. Which ones follows the operation's shape (a body, parameters, a
  path id, the acting-user header) plus a table of the domain errors per operation.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import serializers


class TenantApiKeyScheme(OpenApiAuthenticationExtension):
    target_class = "harness.api.authentication.TenantApiKeyAuthentication"
    name = "TenantApiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "hk_…",
            "description": "A tenant's API key (`manage.py create_api_key --tenant …`).",
        }


class ErrorBodySerializer(serializers.Serializer):
    code = serializers.CharField(help_text="Stable error code, e.g. invalid_request.")
    message = serializers.CharField()
    details = serializers.DictField()


class ErrorSerializer(serializers.Serializer):
    error = ErrorBodySerializer()


ERROR_COMPONENT = "Error"
DESCRIPTIONS = {
    "400": "Malformed JSON, an invalid field (`details.fields`), or a refused value.",
    "401": "No API key, or a wrong or revoked one.",
    "403": "The acting user (X-Harness-User) may not do this.",
    "404": "No such resource for this tenant.",
    "409": "The resource's state does not allow it.",
    "413": "The request body is too large.",
    "415": "The body is not application/json.",
    "422": "The Idempotency-Key was used for another request.",
    "429": "A tenant limit: see Retry-After.",
}
# Domain errors per operation (method, path) beyond what its shape implies.
EXTRA_STATUSES: dict[tuple[str, str], tuple[str, ...]] = {
    ("post", "/api/v1/runs"): ("404", "409", "422", "429"),
    ("post", "/api/v1/runs/{run_id}/cancel"): ("409",),
    ("post", "/api/v1/runs/{run_id}/approvals/{call_id}"): ("409",),
    ("post", "/api/v1/runs/{run_id}/replay"): ("409",),
    ("post", "/api/v1/policies/what-if"): ("404", "409"),
    ("post", "/api/v1/policies/rules"): ("404",),
    ("post", "/api/v1/policies/permissions"): ("404",),
    ("delete", "/api/v1/policies/permissions"): ("404",),
    ("post", "/api/v1/policies/roles"): ("404",),
    ("delete", "/api/v1/policies/roles"): ("404",),
}


def document_error_statuses(result: dict[str, Any], generator: Any, **kwargs: Any) -> Any:
    """Post-processing hook: add the error responses of every operation."""
    components = result.setdefault("components", {}).setdefault("schemas", {})
    components[ERROR_COMPONENT] = {
        "type": "object",
        "properties": {
            "error": {
                "type": "object",
                "properties": {
                    "code": {"type": "string"},
                    "message": {"type": "string"},
                    "details": {"type": "object", "additionalProperties": {}},
                },
                "required": ["code", "message", "details"],
            }
        },
        "required": ["error"],
    }
    for path, item in result.get("paths", {}).items():
        for method, operation in item.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            statuses = set(_statuses_of(path, method, operation))
            responses = operation.setdefault("responses", {})
            content_types = _content_types(responses)
            for status in sorted(statuses):
                responses.setdefault(
                    status,
                    {
                        "description": DESCRIPTIONS[status],
                        "content": {
                            media: {"schema": {"$ref": f"#/components/schemas/{ERROR_COMPONENT}"}}
                            for media in content_types
                        },
                    },
                )
    return result


def _statuses_of(path: str, method: str, operation: dict[str, Any]) -> list[str]:
    statuses = []
    if operation.get("security"):
        statuses.append("401")
    parameters = operation.get("parameters", [])
    if "requestBody" in operation:
        statuses += ["400", "413", "415"]
    if any(p.get("in") in {"query", "header"} for p in parameters):
        statuses.append("400")
    if any(p.get("in") == "path" for p in parameters):
        statuses.append("404")
    if any(p.get("in") == "header" and p.get("name") == "X-Harness-User" for p in parameters):
        statuses += ["400", "403"]
    if path.startswith("/api/v1/policies"):
        statuses += ["400", "403"]  # the acting user is checked on every policy operation
    statuses += EXTRA_STATUSES.get((method, path), ())
    return statuses


def _content_types(responses: dict[str, Any]) -> list[str]:
    for response in responses.values():
        content = response.get("content")
        if content:
            return list(content)
    return ["application/json"]
