"""The tool registry's public face for other apps: look up, validate and execute tools."""

from typing import Any

from tools.catalogue import (
    McpServerState,
    ToolCatalogue,
    handler_kind,
    handler_target,
    list_catalogue_tools,
    list_mcp_servers,
)
from tools.context import ToolContext
from tools.digest import result_for_model
from tools.errors import ToolFilesInvalid
from tools.executor import (
    PlannedCall,
    ToolOutcome,
    execute_tool,
    execute_tool_calls,
    store_kept_outcomes_soon,
    store_outcome,
)
from tools.mcp.services import log_drift
from tools.net import AddressPolicy, PinnedTransport, UnsafeAddress, resolve_address
from tools.registry import ToolDefinition, ToolRegistry, get_tool_registry
from tools.validation import find_violations, summarize_violations

__all__ = [
    "AddressPolicy",
    "McpServerState",
    "PinnedTransport",
    "PlannedCall",
    "ToolCatalogue",
    "ToolContext",
    "ToolDefinition",
    "ToolOutcome",
    "ToolRegistry",
    "UnsafeAddress",
    "execute_tool",
    "execute_tool_calls",
    "find_violations",
    "get_tool_registry",
    "handler_kind",
    "handler_target",
    "list_catalogue_tools",
    "list_mcp_servers",
    "resolve_address",
    "result_for_model",
    "store_kept_outcomes_soon",
    "store_outcome",
    "summarize_violations",
    "warn_of_mcp_drift",
]


def warn_of_mcp_drift(server: str, advertised: dict[str, Any]) -> None:
    """At each new MCP connection of this process (``tools.apps`` hands it to the pool): warn
    about the registry's pinned tools of ``server`` that drifted. Quiet while a tool file has
    an error (start-up reports those)."""
    try:
        tools = get_tool_registry().tools.values()
    except ToolFilesInvalid:
        return
    log_drift(server, advertised, tools)
