"""The tool registry's public face for other apps: look up, validate and execute tools."""

from tools.digest import result_for_model
from tools.executor import (
    PlannedCall,
    ToolContext,
    ToolOutcome,
    execute_tool,
    execute_tool_calls,
    store_kept_outcomes_soon,
    store_outcome,
)
from tools.net import AddressPolicy, PinnedTransport, UnsafeAddress, resolve_address
from tools.registry import ToolDefinition, ToolRegistry, get_tool_registry
from tools.validation import find_violations, summarize_violations

__all__ = [
    "AddressPolicy",
    "PinnedTransport",
    "PlannedCall",
    "ToolContext",
    "ToolDefinition",
    "ToolOutcome",
    "ToolRegistry",
    "UnsafeAddress",
    "execute_tool",
    "execute_tool_calls",
    "find_violations",
    "get_tool_registry",
    "resolve_address",
    "result_for_model",
    "store_kept_outcomes_soon",
    "store_outcome",
    "summarize_violations",
]
