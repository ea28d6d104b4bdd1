"""HTTP tools: a tool file's handler can be an HTTP endpoint instead of a Python callable.

The handler object names a method and a URL template; ``{name}`` in the URL is filled from the
argument ``name`` as exactly one path segment (every reserved character percent-encoded; ``.``,
``..`` and the empty string refused, so an argument can never change the host, climb or add
path segments), ``${secret:NAME}`` in the URL or a header from ``settings.HARNESS_SECRETS``.
The arguments not used in the URL go to a JSON body or the query string (after the template's
own query, which is kept). The JSON response, or the part of it a JSON pointer names, is the
tool's result. Connections go to the address that was resolved and vetted (``tools.net``):
internal services are fine, link-local (cloud metadata) and other special addresses are not,
and a DNS answer cannot change between the check and the connection.

Failures are data for the model: HTTP 4xx/5xx → ``http_error`` (408, 425, 429, 502, 503, 504
and connection failures are transient: retried for idempotent tools), a body that is not JSON
→ ``invalid_response``, no answer in time → ``timeout``. Secrets never appear in messages.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
from django.conf import settings

from tools.errors import ToolErrorCode, ToolHandlerError, TransientToolError
from tools.net import AddressPolicy, PinnedTransport, UnsafeAddress

PLACEHOLDER = re.compile(
    r"\$\{secret:(?P<secret>[A-Za-z0-9_]+)\}|\{(?P<argument>[A-Za-z_][A-Za-z0-9_]*)\}"
)
TRANSIENT_STATUSES = frozenset({408, 425, 429, 502, 503, 504})
BODY_EXCERPT_CHARS = 300
MAX_RESPONSE_BYTES = 5_000_000
DEFAULT_IDEMPOTENCY_HEADER = "Idempotency-Key"

_client: httpx.Client | None = None
_client_lock = threading.Lock()


@dataclass(frozen=True)
class HttpHandler:
    """A callable ``handler(arguments, context)`` built from a tool file's handler object."""

    tool: str
    method: str
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    body: str = "json"
    idempotency_header: str | None = DEFAULT_IDEMPOTENCY_HEADER
    pointer: str = ""
    fields: dict[str, str] | None = None

    @classmethod
    def from_spec(cls, tool: str, spec: dict[str, Any]) -> HttpHandler:
        method = spec["method"]
        response = spec.get("response", {})
        return cls(
            tool=tool,
            method=method,
            url=spec["url"],
            headers=dict(spec.get("headers", {})),
            body=spec.get("body", "query" if method in ("GET", "DELETE") else "json"),
            idempotency_header=spec.get("idempotency_header", DEFAULT_IDEMPOTENCY_HEADER),
            pointer=response.get("pointer", ""),
            fields=response.get("fields"),
        )

    @property
    def url_arguments(self) -> list[str]:
        return [m["argument"] for m in PLACEHOLDER.finditer(self.url) if m["argument"]]

    @property
    def secrets(self) -> list[str]:
        texts = [self.url, *self.headers.values()]
        return [m["secret"] for text in texts for m in PLACEHOLDER.finditer(text) if m["secret"]]

    def __call__(self, arguments: dict[str, Any], context: Any) -> Any:
        url = _fill(self.url, arguments, self.tool)
        headers = {name: _fill(value, {}, self.tool) for name, value in self.headers.items()}
        if self.idempotency_header:
            headers[self.idempotency_header] = context.idempotency_key
        in_url = set(self.url_arguments)
        rest = {k: v for k, v in arguments.items() if k not in in_url}
        request: dict[str, Any] = {}
        if self.body == "json":
            request["json"] = rest
        elif self.body == "query":
            # httpx replaces a URL's query by ``params``: keep the template's own query first.
            request["params"] = list(httpx.URL(url).params.multi_items()) + _query(rest)
        timeout = _remaining(context)
        status, content_type, body = _send(self.tool, self.method, url, headers, timeout, request)
        return self._result(status, content_type, body)

    def _result(self, status: int, content_type: str, body: bytes) -> Any:
        text = body.decode("utf-8", errors="replace")
        if status >= 300:
            error = TransientToolError if status in TRANSIENT_STATUSES else ToolHandlerError
            raise error(
                ToolErrorCode.HTTP_ERROR,
                f"{self.tool}: the service answered HTTP {status}: {_excerpt(text)}",
                {"status": status, "body": _excerpt(text)},
            )
        if not text.strip():
            return None
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ToolHandlerError(
                ToolErrorCode.INVALID_RESPONSE,
                f"{self.tool}: the service answered with a body that is not JSON "
                f"({content_type or 'no content type'}).",
                {"status": status, "content_type": content_type, "body": _excerpt(text)},
            ) from exc
        if self.fields is not None:
            return {name: self._pick(data, pointer) for name, pointer in self.fields.items()}
        return self._pick(data, self.pointer)

    def _pick(self, data: Any, pointer: str) -> Any:
        try:
            return resolve_pointer(data, pointer)
        except LookupError as exc:
            raise ToolHandlerError(
                ToolErrorCode.INVALID_RESPONSE,
                f"{self.tool}: the service's answer has nothing at {pointer}.",
                {"pointer": pointer},
            ) from exc


def resolve_pointer(data: Any, pointer: str) -> Any:
    """The value at a JSON pointer (RFC 6901); raises ``LookupError`` when there is none."""
    if not pointer:
        return data
    for raw in pointer[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(data, list):
            if not token.isdigit() or int(token) >= len(data):
                raise LookupError(pointer)
            data = data[int(token)]
        elif isinstance(data, dict) and token in data:
            data = data[token]
        else:
            raise LookupError(pointer)
    return data


def _fill(template: str, arguments: dict[str, Any], tool: str) -> str:
    def replace(match: re.Match[str]) -> str:
        if match["secret"]:
            value = settings.HARNESS_SECRETS.get(match["secret"])
            if value is None:
                raise ToolHandlerError(
                    ToolErrorCode.TOOL_FAILED,
                    f"{tool} is not configured: secret {match['secret']} is missing.",
                )
            return value
        value = arguments.get(match["argument"])
        if value is None:
            raise ToolHandlerError(
                ToolErrorCode.INVALID_ARGUMENTS,
                f"{tool} needs the argument {match['argument']!r}.",
                {"argument": match["argument"]},
            )
        text = value if isinstance(value, str) else json.dumps(value)
        if text in {"", ".", ".."}:
            # quote() leaves dots alone, and "." / ".." / "" would climb or add a segment.
            raise ToolHandlerError(
                ToolErrorCode.INVALID_ARGUMENTS,
                f"{tool}: the argument {match['argument']!r} cannot be {text!r} (it is one "
                "segment of the URL's path).",
                {"argument": match["argument"]},
            )
        return quote(text, safe="")

    return PLACEHOLDER.sub(replace, template)


def fill_secrets(template: str) -> str:
    """``${secret:NAME}`` replaced by ``HARNESS_SECRET_NAME``; ``MissingSecret`` if unset."""

    def replace(match: re.Match[str]) -> str:
        if not match["secret"]:
            return match[0]
        value = settings.HARNESS_SECRETS.get(match["secret"])
        if value is None:
            raise MissingSecret(match["secret"])
        return value

    return PLACEHOLDER.sub(replace, template)


class MissingSecret(LookupError):
    """A ``${secret:NAME}`` whose secret is not configured."""

    def __init__(self, name: str) -> None:
        super().__init__(f"secret {name} is not configured (set HARNESS_SECRET_{name})")
        self.name = name


def _query(arguments: dict[str, Any]) -> list[tuple[str, str]]:
    params = []
    for name, value in arguments.items():
        for item in value if isinstance(value, list) else [value]:
            params.append((name, item if isinstance(item, str) else json.dumps(item)))
    return params


def _remaining(context: Any) -> float:
    deadline = getattr(context, "deadline", None)
    if deadline is None:
        return float(settings.HARNESS_TOOL_TIMEOUT_S)
    return max(0.01, deadline - time.monotonic())


def _send(
    tool: str,
    method: str,
    url: str,
    headers: dict[str, str],
    timeout: float,
    request: dict[str, Any],
) -> tuple[int, str, bytes]:
    try:
        with _http_client().stream(
            method, url, headers=headers, timeout=timeout, **request
        ) as response:
            body = bytearray()
            for chunk in response.iter_bytes():
                body.extend(chunk)
                if len(body) > MAX_RESPONSE_BYTES:
                    raise ToolHandlerError(
                        ToolErrorCode.INVALID_RESPONSE,
                        f"{tool}: the service's answer is larger than {MAX_RESPONSE_BYTES} bytes.",
                    )
            return response.status_code, response.headers.get("content-type", ""), bytes(body)
    except UnsafeAddress as exc:
        raise ToolHandlerError(
            ToolErrorCode.TOOL_FAILED,
            f"{tool}: the service's address is not allowed ({exc.why}).",
        ) from exc
    except httpx.TimeoutException as exc:
        raise ToolHandlerError(
            ToolErrorCode.TIMEOUT,
            f"{tool}: the service did not answer within {timeout:.3g} s.",
            {"timeout_s": round(timeout, 3)},
        ) from exc
    except httpx.TransportError as exc:
        # Connection refused, reset, DNS failure: the request most likely never arrived.
        raise TransientToolError(
            ToolErrorCode.HTTP_ERROR,
            f"{tool}: the service could not be reached ({type(exc).__name__}).",
        ) from exc


def _http_client() -> httpx.Client:
    """One client per process: it pools connections and may be shared between threads."""
    global _client
    with _client_lock:
        if _client is None:
            _client = httpx.Client(
                transport=PinnedTransport(AddressPolicy(public_only=False)),
                follow_redirects=False,
                # No proxy from the environment: it would take the request past the pinned
                # transport, and resolve the name itself.
                trust_env=False,
            )
        return _client


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= BODY_EXCERPT_CHARS else text[: BODY_EXCERPT_CHARS - 1] + "…"
