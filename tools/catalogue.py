"""The tools and MCP servers as the console's catalogue shows them: what ``check_tools`` reads
(the configured tool folders and ``HARNESS_MCP_CONFIG``), as plain records.

Broken tool files do not hide the good ones: their faults are listed beside them. A server is
asked for its tools once per call of ``list_mcp_servers`` (as ``check_tools`` does); one that
cannot be reached is marked so, with the reason, and its pinned tools' drift is unknown.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings

from tools.errors import ToolFileFault
from tools.mcp.config import McpServerConfig, config_faults, get_mcp_config
from tools.mcp.pin import Drift, compare
from tools.mcp.services import list_advertised_tools
from tools.registry import ToolDefinition, load_tool_files, tool_files


@dataclass(frozen=True)
class ToolCatalogue:
    tools: list[ToolDefinition]
    faults: list[ToolFileFault]
    mcp_config: str  # the file HARNESS_MCP_CONFIG names ("" when unset)


@dataclass
class McpServerState:
    """One MCP server as the catalogue shows it: configured or only named by pinned tools."""

    name: str
    configured: bool
    transport: str = ""
    target: str = ""  # the command line or the URL (never headers or env values)
    secrets: list[str] = field(default_factory=list)  # names of the secrets it needs
    connected: bool = False
    error: str = ""
    offered: list[str] = field(default_factory=list)  # tool names the server advertises now
    pinned: dict[str, str] = field(default_factory=dict)  # server tool → Harness tool
    drifts: dict[str, Drift] = field(default_factory=dict)  # Harness tool → its drift

    @property
    def offered_not_pinned(self) -> list[str]:
        return [name for name in self.offered if name not in self.pinned]

    @property
    def pinned_not_offered(self) -> list[str]:
        if not self.connected:
            return []
        return sorted(name for name in self.pinned if name not in self.offered)


def list_catalogue_tools() -> ToolCatalogue:
    """Every tool of the configured folders that loads, sorted by name, and every fault."""
    files = tool_files(str(folder) for folder in settings.HARNESS_TOOL_DIRS)
    tools, faults = load_tool_files(files, settings.HARNESS_TOOL_TIMEOUT_S)
    config = get_mcp_config()
    return ToolCatalogue(
        tools=[tools[name] for name in sorted(tools)],
        faults=[*config_faults(config), *faults],
        mcp_config=config.path,
    )


def handler_kind(tool: ToolDefinition) -> str:
    if tool.mcp is not None:
        return "mcp"
    if tool.http is not None:
        return "http"
    return "python"


def handler_target(tool: ToolDefinition) -> str:
    """Where the handler is: the dotted path, the HTTP method and URL template, or the MCP
    server and its tool (headers, which may carry secrets, are not shown)."""
    if tool.mcp is not None:
        return f"{tool.mcp.server} / {tool.mcp.server_tool}"
    if tool.http is not None:
        return f"{tool.http.method} {tool.http.url}"
    return tool.handler_path


def list_mcp_servers(tools: Iterable[ToolDefinition], probe: bool = True) -> list[McpServerState]:
    """The configured servers and the servers pinned tools name, sorted by name; with
    ``probe`` each configured one is asked for its tools now and every pin compared."""
    config = get_mcp_config()
    states = {
        name: McpServerState(
            name,
            configured=True,
            transport=server.transport,
            target=_shown_target(server),
            secrets=sorted(set(server.secrets)),
        )
        for name, server in config.servers.items()
    }
    pinned = [tool for tool in tools if tool.mcp is not None]
    for tool in pinned:
        handler = tool.mcp
        state = states.setdefault(handler.server, McpServerState(handler.server, False))
        state.pinned[handler.server_tool] = tool.name
    if probe:
        for state in states.values():
            if state.configured:
                _probe(state, [t for t in pinned if t.mcp.server == state.name])
    return [states[name] for name in sorted(states)]


def _shown_target(server: McpServerConfig) -> str:
    """The command line, or the URL without a user, password or query (which may carry a
    token: a URL's secrets belong in headers, but the file cannot stop them there)."""
    if server.transport != "http":
        return server.describe()
    parts = urlsplit(server.url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _probe(state: McpServerState, pinned: list[ToolDefinition]) -> None:
    from tools.mcp.client import McpUnavailable  # the SDK's import: only when a page asks

    try:
        advertised = list_advertised_tools(state.name)
    except (McpUnavailable, TimeoutError) as exc:
        state.error = str(exc) or "no answer"
        return
    state.connected = True
    state.offered = sorted(advertised)
    for tool in pinned:
        handler = tool.mcp
        drift = compare(
            tool.name,
            state.name,
            handler.server_tool,
            handler.pin,
            advertised.get(handler.server_tool),
        )
        if drift is not None:
            state.drifts[tool.name] = drift
