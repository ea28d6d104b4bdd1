"""The tool registry's public face for other apps: look up, validate and execute tools."""

from tools.executor import ToolContext, ToolOutcome, execute_tool
from tools.registry import ToolDefinition, ToolRegistry, get_tool_registry
from tools.validation import find_violations, summarize_violations

__all__ = [
    "ToolContext",
    "ToolDefinition",
    "ToolOutcome",
    "ToolRegistry",
    "execute_tool",
    "find_violations",
    "get_tool_registry",
    "summarize_violations",
]
