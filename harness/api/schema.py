"""What makes the OpenAPI schema exact: the Bearer key, the error shape and every status.

- ``TenantApiKeyScheme`` documents ``Authorization: Bearer hk_…`` as an HTTP bearer scheme
  (Swagger UI shows its *Authorize* button for it).
- ``PatternFieldExtension`` and ``UsdFieldExtension`` document those fields as checked.
- ``StrictBodyExtension`` closes the request bodies of strict serializers to unknown fields.
- ``document_error_statuses`` (a drf-spectacular post-processing hook) adds the statuses an
  operation can answer besides its own: each with the one error shape ``{"error": {"code",
  "message", "details"}}``. Which ones follows the operation's shape (a body, parameters, a
  path id, the acting-user header) plus a table of the domain errors per operation.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import (
    OpenApiAuthenticationExtension,
    OpenApiSerializerExtension,
    OpenApiSerializerFieldExtension,
)
from rest_framework import serializers

from policy.api.permissions import required_key_scope


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


class StrictBodyExtension(OpenApiSerializerExtension):
    """A ``StrictSerializer`` refuses fields it does not know: its request body says so
    (``additionalProperties: false``), so a client (or a fuzzer) never reads extras as allowed."""

    target_class = "core.serializers.StrictSerializer"
    match_subclasses = True

    def map_serializer(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        schema = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        if direction == "request":
            schema["additionalProperties"] = False
        return schema


class PatternFieldExtension(OpenApiSerializerFieldExtension):
    """A ``PatternField`` is documented with its whole-match pattern."""

    target_class = "core.serializers.PatternField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        schema = auto_schema._map_serializer_field(self.target, direction, bypass_extensions=True)
        schema["pattern"] = f"^(?:{self.target.pattern})$"
        return schema


class FewChoicesExtension(OpenApiSerializerFieldExtension):
    """The kind or op of one oneOf variant: a pattern inline (an enum would be hoisted into a
    component whose name collides with the full choice set's)."""

    target_class = "core.serializers.FewChoices"

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        values = list(self.target.choices)
        return {"type": "string", "pattern": f"^(?:{'|'.join(values)})$"}


class UsdFieldExtension(OpenApiSerializerFieldExtension):
    """A ``UsdField`` is a JSON number in its range (the server rounds it to 6 places)."""

    target_class = "harness.api.serializers.UsdField"

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "number"}
        if self.target.min_value is not None:
            schema["minimum"] = float(self.target.min_value)
        if self.target.max_value is not None:
            schema["maximum"] = float(self.target.max_value)
        return schema


class ErrorBodySerializer(serializers.Serializer):
    code = serializers.CharField(help_text="Stable error code, e.g. invalid_request.")
    message = serializers.CharField()
    details = serializers.DictField()


class ErrorSerializer(serializers.Serializer):
    error = ErrorBodySerializer()


ERROR_COMPONENT = "Error"
DESCRIPTIONS = {
    "400": "Malformed JSON, an invalid field (`details.fields`), or a refused value.",
    "401": "No API key, a wrong or revoked one (`invalid_api_key`), or an expired one "
    "(`api_key_expired`).",
    "403": "The API key lacks the scope this operation needs (`key_scope_missing`, the scope in "
    "`details.scope`), or the acting user (X-Harness-User) may not do this.",
    "404": "No such resource for this tenant.",
    "409": "The resource's state does not allow it (e.g. a receipt of a run still going).",
    "413": "The request body is too large.",
    "415": "The body is not application/json.",
    "422": "Well formed, but refused for its meaning: an Idempotency-Key used for another "
    "request, a callback_url whose host is not public, 'to' before 'from', or an exclusive "
    "rule naming one label twice.",
    "429": "A tenant limit: see Retry-After.",
    "503": "A dependency (database, Redis) is unavailable: retry after Retry-After seconds.",
}
# Statuses any operation can answer: a dependency outage (`service_unavailable`, Retry-After).
EVERY_OPERATION = ("503",)
# DELETEs that take a body naming what to remove (drf-spectacular documents bodies only on
# POST, PUT and PATCH): the body is the one of the POST on the same path.
DELETE_WITH_BODY = {"/api/v1/policies/permissions", "/api/v1/policies/roles"}
# Domain errors per operation (method, path) beyond what its shape implies.
EXTRA_STATUSES: dict[tuple[str, str], tuple[str, ...]] = {
    ("post", "/api/v1/runs"): ("404", "409", "422", "429"),
    ("get", "/api/v1/reports/costs"): ("422",),
    ("post", "/api/v1/runs/{run_id}/cancel"): ("409",),
    ("post", "/api/v1/runs/{run_id}/approvals/{call_id}"): ("409",),
    ("post", "/api/v1/runs/{run_id}/replay"): ("409",),
    ("get", "/api/v1/runs/{run_id}/receipt"): ("409",),
    ("post", "/api/v1/policies/what-if"): ("404", "409", "422"),
    ("post", "/api/v1/policies/rules"): ("404", "409", "422"),
    ("patch", "/api/v1/policies/rules/{name}"): ("409",),
    ("delete", "/api/v1/policies/rules/{name}"): ("409",),
    ("post", "/api/v1/policies/permissions"): ("404",),
    ("delete", "/api/v1/policies/permissions"): ("404",),
    ("post", "/api/v1/policies/roles"): ("404",),
    ("delete", "/api/v1/policies/roles"): ("404",),
}


def document_error_statuses(result: dict[str, Any], generator: Any, **kwargs: Any) -> Any:
    """Post-processing hook: add the error responses of every operation, and the API key
    scope each one needs (``x-required-key-scope``, also said in its description)."""
    _document_key_scopes(result, generator)
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
    for name, schema in components.items():
        if name.endswith("Request"):  # COMPONENT_SPLIT_REQUEST: the request-side shapes
            _refuse_nul(schema)
    for path, item in result.get("paths", {}).items():
        for operation in item.values():
            for parameter in operation.get("parameters", []) if isinstance(operation, dict) else []:
                if parameter.get("in") == "query":
                    _refuse_nul(parameter.get("schema", {}))
        if path in DELETE_WITH_BODY and "delete" in item and "post" in item:
            item["delete"]["requestBody"] = item["post"]["requestBody"]
        for method, operation in item.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            body = operation.get("requestBody")
            if body is not None and method != "patch":
                body["required"] = True  # an absent body is refused (400), never defaulted
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


# The request parsers refuse NUL anywhere in text (harness/api/parsers.py): a free string of a
# request says so. (A NUL in an object's key is refused too; OpenAPI 3.0 cannot say that.)
NO_NUL = "^[^\\x00]*$"


def _refuse_nul(schema: Any) -> None:
    if isinstance(schema, list):
        for item in schema:
            _refuse_nul(item)
        return
    if not isinstance(schema, dict):
        return
    if schema.get("type") == "string" and not {"pattern", "enum", "format"} & set(schema):
        schema["pattern"] = NO_NUL
    for key, value in schema.items():
        if key in {"properties"} and isinstance(value, dict):
            for sub in value.values():
                _refuse_nul(sub)
        elif key in {"items", "additionalProperties", "allOf", "anyOf", "oneOf"}:
            _refuse_nul(value)


def _document_key_scopes(result: dict[str, Any], generator: Any) -> None:
    paths = result.get("paths", {})
    for path, _regex, method, callback in getattr(generator, "endpoints", None) or []:
        operation = paths.get(path, {}).get(method.lower())
        scope = required_key_scope(getattr(callback, "cls", None), method)
        if operation is None or scope is None:
            continue
        operation["x-required-key-scope"] = scope
        said = f"The API key needs the scope `{scope}`."
        operation["description"] = f"{operation.get('description', '')}\n\n{said}".strip()


def _statuses_of(path: str, method: str, operation: dict[str, Any]) -> list[str]:
    statuses = []
    if operation.get("security"):
        statuses += ["401", "403"]  # no, a wrong or an expired key; a key without the scope
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
    statuses += EVERY_OPERATION
    return statuses


def _content_types(responses: dict[str, Any]) -> list[str]:
    documented = [list(r["content"]) for r in responses.values() if r.get("content")]
    if not documented:
        return ["application/json"]
    if "application/json" not in documented[0] and any(
        "application/json" in types for types in documented
    ):
        return ["application/json"]  # e.g. a JSON Lines export: its errors are JSON
    return documented[0]
