"""The console's catalogue: the agents, tools and MCP servers this deployment runs with, read
from the same files and configuration as the engine and ``check_tools``.

Agents, tools and servers are the deployment's files, the same for every tenant: every staff
user sees all of them. What is a tenant's is shown only for the tenants granted to the user
(superusers: all): who each tenant's policy lets call a tool, and the tenants' calls refused
because their tool drifted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.agent_registry import AgentSpec, list_agents
from harness.console.reads import User, granted_tenant_slugs
from harness.console.schema_table import SchemaRow, schema_rows, schema_summary
from harness.errors import InvalidAgentFile
from harness.models import Tenant
from policy import services as policy
from tools import services as tools
from traces.queries import last_call_failures

DRIFTED = "tool_drifted"


@dataclass
class AgentEntry:
    spec: AgentSpec
    known_tools: list[str]
    # Named by the agent but not callable: no file, a file with an error, turned off, or an
    # MCP tool whose server is not configured.
    unknown_tools: list[str]

    @property
    def limits(self) -> list[tuple[str, Any]]:
        spec = self.spec
        values = [
            ("steps", spec.max_steps),
            ("tokens per run", spec.max_tokens_per_run),
            ("cost per run (USD)", spec.max_cost_per_run_usd),
            ("tool calls per run", spec.max_tool_calls_per_run),
            ("calls per tool", spec.max_calls_per_tool),
            ("deadline (s)", spec.deadline_s),
            ("context tokens", spec.context_tokens),
        ]
        return [(name, value) for name, value in values if value is not None]


@dataclass
class Agents:
    agents: list[AgentEntry]
    error: str = ""  # an agent file that does not load stops them all, as at start-up


@dataclass
class Grant:
    tenant: str
    subject: str
    scope: str
    effect: str


@dataclass
class ToolEntry:
    tool: Any  # tools.services.ToolDefinition
    kind: str  # python, http or mcp
    target: str
    arguments: list[SchemaRow]
    arguments_note: str
    grants: list[Grant] = field(default_factory=list)
    # MCP tools (their handler is callable, which templates would call: its pin is copied here)
    # "matches", "drifted: …", "unknown: …" (server not reached or not configured)
    pin_sha256: str = ""
    pin_state: str = ""
    drift_diff: str = ""
    last_drift: dict[str, Any] | None = None

    @property
    def pin_word(self) -> str:
        return self.pin_state.partition(":")[0]


@dataclass
class Tools:
    tools: list[ToolEntry]
    faults: list[Any]
    mcp_config: str


@dataclass
class ServerEntry:
    state: Any  # tools.services.McpServerState
    last_drift: dict[str, Any] | None  # the newest drifted call in the user's tenants


@dataclass
class Servers:
    servers: list[ServerEntry]
    mcp_config: str


def list_agent_entries() -> Agents:
    known = {tool.name for tool in tools.list_catalogue_tools().tools if tool.enabled}
    try:
        agents = list_agents()
    except InvalidAgentFile as exc:
        return Agents([], error=str(exc))
    return Agents(
        [
            AgentEntry(
                spec,
                [name for name in spec.tools if name in known],
                [name for name in spec.tools if name not in known],
            )
            for _, spec in sorted(agents.items())
        ]
    )


def list_tool_entries(user: User, probe: bool = True) -> Tools:
    """Every tool with its arguments as rows, who may call it in the user's tenants and,
    for an MCP tool, whether its pin still matches what the server advertises."""
    catalogue = tools.list_catalogue_tools()
    servers = {s.name: s for s in tools.list_mcp_servers(catalogue.tools, probe=probe)}
    grants = _grants(user)
    drifted = last_call_failures(DRIFTED, granted_tenant_slugs(user))
    entries = []
    for tool in catalogue.tools:
        entry = ToolEntry(
            tool=tool,
            kind=tools.handler_kind(tool),
            target=tools.handler_target(tool),
            arguments=schema_rows(tool.parameters),
            arguments_note=schema_summary(tool.parameters),
            grants=[g for g in grants if _scope_matches(g.scope, tool.access)],
        )
        if tool.mcp is not None:
            entry.pin_sha256 = tool.mcp.pin.sha256
            entry.pin_state, entry.drift_diff = _pin_state(tool, servers.get(tool.mcp.server))
            entry.last_drift = drifted.get(tool.name)
        entries.append(entry)
    return Tools(entries, catalogue.faults, catalogue.mcp_config)


def list_server_entries(user: User, probe: bool = True) -> Servers:
    """Every configured server and every server a pinned tool names: connected now or not,
    the tools it offers and those pinned, the pins that drifted, and the newest call of the
    user's tenants refused because its tool had drifted."""
    catalogue = tools.list_catalogue_tools()
    drifted = last_call_failures(DRIFTED, granted_tenant_slugs(user))
    entries = []
    for server in tools.list_mcp_servers(catalogue.tools, probe=probe):
        calls = [drifted[name] for name in server.pinned.values() if name in drifted]
        last = max(calls, key=lambda call: call["started_at"]) if calls else None
        entries.append(ServerEntry(server, last))
    return Servers(entries, catalogue.mcp_config)


def _pin_state(tool: Any, server: Any) -> tuple[str, str]:
    if server is None or not server.configured:
        return f"unknown: server {tool.mcp.server} is not configured (the tool is off)", ""
    if not server.connected:
        return f"unknown: server {server.name} not reached ({server.error})", ""
    drift = server.drifts.get(tool.name)
    if drift is None:
        return "matches", ""
    return f"drifted: {drift.summary()}", drift.diff


def _grants(user: User) -> list[Grant]:
    """The permission lines of the tenants granted to ``user`` (superusers: every tenant)."""
    slugs = granted_tenant_slugs(user)
    tenants = Tenant.objects.values_list("slug", flat=True) if slugs is None else sorted(slugs)
    grants = []
    for slug in tenants:
        for line in policy.list_lines(slug)["permissions"]:
            grants.append(Grant(slug, line["subject"], line["scope"], line["effect"]))
    return grants


def _scope_matches(granted: str, access: tuple[str, ...]) -> bool:
    """Whether a permission line on ``granted`` (``object:action``, ``*`` for any) decides
    one of the scopes a tool needs, as the policy's matcher reads it."""
    obj, _, act = granted.partition(":")
    for scope in access:
        need_obj, _, need_act = scope.partition(":")
        if obj in ("*", need_obj) and act in ("*", need_act):
            return True
    return False
