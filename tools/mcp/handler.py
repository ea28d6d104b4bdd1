"""A pinned MCP tool as a handler ``handler(arguments, context)``, like Python and HTTP tools.

The call is checked against the server's current advertisement first (a drifted tool is
refused with ``tool_drifted``), then sent with the call's identity in ``_meta``:
``harness/idempotency-key`` (run id + call id), ``harness/tenant``, ``harness/user``,
``harness/run-id``, ``harness/call-id``. The result is mapped to JSON data: the
``structuredContent`` when there is one, else the text (one block) or the content blocks, with
images and audio kept as references (type, MIME type, size, SHA-256) rather than their bytes.
``isError`` results become a ``tool_failed`` tool error carrying the server's text; a result
larger than the client reads (over Streamable HTTP, 1 MiB) a ``result_too_large`` one, at once
and without retry (the session stays).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from tools.errors import ToolErrorCode, ToolHandlerError, TransientToolError
from tools.http_tools import MissingSecret
from tools.mcp.config import get_mcp_config
from tools.mcp.pin import Pin, compare

ERROR_TEXT_CHARS = 1000


@dataclass(frozen=True)
class McpHandler:
    tool: str  # the Harness tool name
    server: str
    server_tool: str
    pin: Pin

    def __call__(self, arguments: dict[str, Any], context: Any) -> Any:
        # The SDK takes ~0.6 s to import: only processes that call MCP tools pay it.
        from tools.mcp.client import (
            McpProtocolError,
            McpResultTooLarge,
            McpUnavailable,
            get_pool,
        )

        config = get_mcp_config().servers.get(self.server)
        if config is None:
            raise ToolHandlerError(
                ToolErrorCode.MCP_UNAVAILABLE,
                f"{self.tool}: MCP server {self.server} is not configured.",
                {"server": self.server},
            )
        remaining = _remaining(context)
        meta = {
            "harness/idempotency-key": context.idempotency_key,
            "harness/tenant": context.tenant,
            "harness/user": context.user_id,
            "harness/run-id": str(context.run_id),
            "harness/call-id": context.call_id,
        }
        pool = get_pool()
        work = pool.call_tool(
            config,
            self.server_tool,
            arguments,
            meta,
            timeout=remaining,
            check=self._check_drift,
            ttl=settings.HARNESS_MCP_LIST_TTL_S,
            connect_timeout=settings.HARNESS_MCP_CONNECT_TIMEOUT_S,
        )
        try:
            result = pool.run(work, timeout=remaining)
        # One arm per failure, alike in shape only: each says its own code, words and details
        # (duplicates pairs them; see docs/architecture.md, "Repetition left on purpose").
        except TimeoutError as exc:
            raise ToolHandlerError(
                ToolErrorCode.TIMEOUT,
                f"{self.tool} did not answer within {remaining:.3g} s; the call was cancelled.",
                {"timeout_s": round(remaining, 3), "server": self.server},
            ) from exc
        except McpUnavailable as exc:
            raise TransientToolError(
                ToolErrorCode.MCP_UNAVAILABLE,
                f"{self.tool}: {exc}.",
                {"server": self.server},
            ) from exc
        except McpResultTooLarge as exc:
            # Not retried: the server did the work, only its answer was too large to read.
            raise ToolHandlerError(
                ToolErrorCode.RESULT_TOO_LARGE,
                f"{self.tool} ran, but its result is larger than the {exc.limit} bytes Harness "
                "reads from an MCP server, so it was not read. Ask for less (a filter, a page).",
                {"server": self.server, "limit_bytes": exc.limit},
            ) from exc
        except McpProtocolError as exc:
            raise ToolHandlerError(
                ToolErrorCode.TOOL_FAILED,
                f"{self.tool}: the MCP server refused the call: {exc}",
                {"server": self.server},
            ) from exc
        except MissingSecret as exc:
            raise ToolHandlerError(
                ToolErrorCode.MCP_UNAVAILABLE,
                f"{self.tool} is not configured: {exc}.",
                {"server": self.server},
            ) from exc
        return self._result(result)

    def _check_drift(self, advertised: dict[str, Any]) -> None:
        drift = compare(
            self.tool, self.server, self.server_tool, self.pin, advertised.get(self.server_tool)
        )
        if drift is not None:
            raise ToolHandlerError(
                ToolErrorCode.TOOL_DRIFTED,
                f"{self.tool} was not called: {drift.summary()}. It stays refused until its "
                "tool file is reviewed and re-pinned.",
                drift.to_dict(),
            )

    def _result(self, result: Any) -> Any:
        blocks = [content_block(block) for block in result.content]
        if result.is_error:
            text = " ".join(b["text"] for b in blocks if b.get("type") == "text").strip()
            raise ToolHandlerError(
                ToolErrorCode.TOOL_FAILED,
                f"{self.tool} failed: {_clip(text) or 'the MCP server reported an error'}",
                {"server": self.server, "content": blocks},
            )
        if result.structured_content is not None:
            return result.structured_content
        if len(blocks) == 1 and blocks[0]["type"] == "text":
            return blocks[0]["text"]
        return {"content": blocks}


def content_block(block: Any) -> dict[str, Any]:
    """One content block as JSON data; binary content becomes a reference, not bytes."""
    import mcp_types as types

    if isinstance(block, types.TextContent):
        return {"type": "text", "text": block.text}
    if isinstance(block, types.ImageContent | types.AudioContent):
        return _binary_reference(block.type, block.mime_type, block.data)
    if isinstance(block, types.ResourceLink):
        return {"type": "resource_link", "uri": str(block.uri), "name": block.name}
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            return {"type": "resource", "uri": str(resource.uri), "text": resource.text}
        reference = _binary_reference("resource", resource.mime_type or "", resource.blob)
        return reference | {"uri": str(resource.uri)}
    return {"type": getattr(block, "type", "unknown")}


def _binary_reference(kind: str, mime_type: str, data: str) -> dict[str, Any]:
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raw = data.encode()
    return {
        "type": kind,
        "mime_type": mime_type,
        "size_bytes": len(raw),
        "sha256": hashlib.sha256(raw).hexdigest(),
    }


def _remaining(context: Any) -> float:
    deadline = getattr(context, "deadline", None)
    if deadline is None:
        return float(settings.HARNESS_TOOL_TIMEOUT_S)
    return max(0.01, deadline - time.monotonic())


def _clip(text: str) -> str:
    return text if len(text) <= ERROR_TEXT_CHARS else text[: ERROR_TEXT_CHARS - 1] + "…"
