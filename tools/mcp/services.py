"""What the commands ask of MCP servers: their advertised tools, drafts and drift reports."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from tools.mcp.config import McpServerConfig, get_mcp_config
from tools.mcp.pin import Drift, compare, pin_for

DRAFT_NAME = re.compile(r"[^a-zA-Z0-9_-]")

logger = logging.getLogger(__name__)


class McpServerUnknown(LookupError):
    def __init__(self, server: str, known: Iterable[str]) -> None:
        known = sorted(known)
        super().__init__(
            f"no MCP server {server!r} in HARNESS_MCP_CONFIG "
            f"(configured: {', '.join(known) or 'none'})"
        )


def server_config(server: str) -> McpServerConfig:
    config = get_mcp_config()
    if server not in config.servers:
        raise McpServerUnknown(server, config.servers)
    return config.servers[server]


def list_advertised_tools(server: str) -> dict[str, Any]:
    """The server's tools now (name → SDK ``Tool``); raises ``McpUnavailable``."""
    from tools.mcp.client import get_pool  # the SDK's import: only for processes that use it

    config = server_config(server)
    timeout = settings.HARNESS_MCP_CONNECT_TIMEOUT_S
    pool = get_pool()
    listing = pool.list_tools(config, ttl=0, timeout=timeout, connect_timeout=timeout)
    return pool.run(listing, timeout=timeout + 5)


def draft_tool_file(server: str, advertised: Any) -> dict[str, Any]:
    """A tool file for review: the advertisement pinned, ``access`` left empty on purpose.

    An empty ``access`` is an error of the file, so a draft is never loaded until a reviewer
    has read it and decided who may call the tool (and its labels, sensitivity, approval).
    """
    schema = dict(advertised.input_schema)
    parameters = schema if schema.get("type") == "object" else {"type": "object", **schema}
    return {
        "name": DRAFT_NAME.sub("_", advertised.name)[:64],
        "description": advertised.description or "",
        "parameters": parameters,
        "handler": {
            "kind": "mcp",
            "server": server,
            "tool": advertised.name,
            "pin": pin_for(advertised.description, advertised.input_schema).to_spec(),
        },
        "access": [],
        "timeout_s": 30,
        "idempotent": False,
        "concurrency_safe": False,
        "approval": "always",
        "sensitive": {"arguments": {}, "result": {}},
        "labels": {"carries": [], "sink": None},
    }


@dataclass(frozen=True)
class DriftReport:
    drifts: list[tuple[str, Drift]]  # (tool file path, drift)
    unreachable: dict[str, str]  # server → why
    checked: int


def check_drift(tools: Iterable[Any]) -> DriftReport:
    """Compare each pinned MCP tool with what its server advertises now."""
    from tools.mcp.client import McpUnavailable  # the SDK's import: see above

    by_server: dict[str, list[Any]] = {}
    for tool in tools:
        if tool.mcp is not None:
            by_server.setdefault(tool.mcp.server, []).append(tool)
    drifts: list[tuple[str, Drift]] = []
    unreachable: dict[str, str] = {}
    checked = 0
    for server, pinned in sorted(by_server.items()):
        if server not in get_mcp_config().servers:
            continue
        try:
            advertised = list_advertised_tools(server)
        except (McpUnavailable, TimeoutError) as exc:
            unreachable[server] = str(exc) or "no answer"
            continue
        for tool in pinned:
            checked += 1
            handler = tool.mcp
            drift = compare(
                tool.name,
                server,
                handler.server_tool,
                handler.pin,
                advertised.get(handler.server_tool),
            )
            if drift is not None:
                drifts.append((tool.path, drift))
    return DriftReport(drifts, unreachable, checked)


def log_drift(server: str, advertised: dict[str, Any], tools: Iterable[Any]) -> None:
    """Warn, with a diff, about every pinned tool of ``server`` among ``tools`` that drifted
    (its calls are refused with ``tool_drifted`` meanwhile)."""
    for tool in tools:
        if tool.mcp is None or tool.mcp.server != server:
            continue
        handler = tool.mcp
        drift = compare(
            tool.name, server, handler.server_tool, handler.pin, advertised.get(handler.server_tool)
        )
        if drift is not None:
            logger.warning(
                "MCP tool %s drifted (%s): its calls are refused until %s is re-pinned\n%s",
                tool.name,
                drift.summary(),
                tool.path,
                drift.diff,
            )
