"""The MCP server configuration: the JSON file named by ``HARNESS_MCP_CONFIG``.

The format is the one other MCP clients read: ``{"mcpServers": {"tickets": {...}}}``. A server
is either a stdio server (``command``, optional ``args``, ``env``, ``cwd``) or a Streamable HTTP
server (``url``, optional ``headers``). ``${secret:NAME}`` in a header or an ``env`` value is
``HARNESS_SECRET_NAME``, resolved exactly as for HTTP tools; secrets are resolved only when a
connection is opened, so they never sit in the parsed configuration.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from django.conf import settings

from tools.errors import ToolFileFault
from tools.http_tools import PLACEHOLDER

SERVER_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")
STDIO_KEYS = {"type", "command", "args", "env", "cwd", "disabled"}
HTTP_KEYS = {"type", "url", "headers", "disabled"}
HTTP_TYPES = {"http", "streamable-http", "streamableHttp"}


@dataclass(frozen=True)
class McpServerConfig:
    """One configured server. ``transport`` is ``stdio`` or ``http`` (Streamable HTTP)."""

    name: str
    transport: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def secrets(self) -> list[str]:
        texts = [*self.headers.values(), *self.env.values()]
        return [m["secret"] for text in texts for m in PLACEHOLDER.finditer(text) if m["secret"]]

    def describe(self) -> str:
        if self.transport == "http":
            return self.url
        return " ".join([self.command, *self.args])


@dataclass(frozen=True)
class McpConfig:
    path: str
    servers: dict[str, McpServerConfig]
    faults: tuple[ToolFileFault, ...] = ()


# One object, not one per call: the tool registry is cached per configuration object.
NO_MCP_CONFIG = McpConfig(path="", servers={})


def get_mcp_config() -> McpConfig:
    """The configuration ``HARNESS_MCP_CONFIG`` names (empty when unset); never raises."""
    path = settings.HARNESS_MCP_CONFIG
    if not path:
        return NO_MCP_CONFIG
    resolved = Path(path).resolve()
    try:
        mtime = resolved.stat().st_mtime_ns
    except OSError:
        mtime = 0
    return _load(str(resolved), mtime)


@cache
def _load(path: str, mtime: int) -> McpConfig:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        message = f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        return McpConfig(path, {}, (ToolFileFault(path, message),))
    except OSError as exc:
        message = f"HARNESS_MCP_CONFIG cannot be read: {exc}"
        return McpConfig(path, {}, (ToolFileFault(path, message),))
    servers, faults = parse_config(data, path, Path(path).parent)
    return McpConfig(path, servers, tuple(faults))


def parse_config(
    data: Any, where: str, base: Path
) -> tuple[dict[str, McpServerConfig], list[ToolFileFault]]:
    """Servers and faults of a parsed configuration; ``cwd`` is relative to ``base``."""
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers"), dict):
        return {}, [ToolFileFault(where, 'expected an object {"mcpServers": {"name": {...}}}')]
    servers: dict[str, McpServerConfig] = {}
    faults: list[ToolFileFault] = []
    for name, spec in data["mcpServers"].items():
        server, server_faults = _server(name, spec, where, base)
        faults.extend(server_faults)
        if server is not None:
            servers[name] = server
    return servers, faults


def _server(
    name: str, spec: Any, where: str, base: Path
) -> tuple[McpServerConfig | None, list[ToolFileFault]]:
    at = f"at /mcpServers/{name}"
    if not name or not set(name) <= SERVER_NAME_CHARS:
        return None, [ToolFileFault(where, f"{at}: a server name uses letters, digits, _ - .")]
    if not isinstance(spec, dict):
        return None, [ToolFileFault(where, f"{at}: expected an object")]
    if spec.get("disabled") is True:
        return None, []
    is_http = "url" in spec
    if is_http == ("command" in spec):
        return None, [ToolFileFault(where, f"{at}: give either 'command' (stdio) or 'url' (HTTP)")]
    allowed = HTTP_KEYS if is_http else STDIO_KEYS
    faults = [
        ToolFileFault(where, f"{at}: unknown key {key!r} (expected one of {sorted(allowed)})")
        for key in sorted(set(spec) - allowed)
    ]
    kinds = HTTP_TYPES if is_http else {"stdio"}
    if "type" in spec and spec["type"] not in kinds:
        faults.append(
            ToolFileFault(
                where,
                f"{at}/type: {spec['type']!r} is not supported here (expected one of "
                f"{sorted(kinds)}; the legacy SSE transport is not supported)",
            )
        )
    if is_http:
        url, headers = spec["url"], spec.get("headers", {})
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            faults.append(ToolFileFault(where, f"{at}/url: expected an http(s) URL"))
        if not _string_map(headers):
            faults.append(ToolFileFault(where, f"{at}/headers: expected strings"))
        if faults:
            return None, faults
        return McpServerConfig(name, "http", url=url, headers=dict(headers)), []
    command, args, env = spec["command"], spec.get("args", []), spec.get("env", {})
    cwd = spec.get("cwd")
    if not isinstance(command, str) or not command:
        faults.append(ToolFileFault(where, f"{at}/command: expected a non-empty string"))
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        faults.append(ToolFileFault(where, f"{at}/args: expected a list of strings"))
    if not _string_map(env):
        faults.append(ToolFileFault(where, f"{at}/env: expected strings"))
    if cwd is not None and not isinstance(cwd, str):
        faults.append(ToolFileFault(where, f"{at}/cwd: expected a string"))
    if faults:
        return None, faults
    server = McpServerConfig(
        name,
        "stdio",
        command=command,
        args=tuple(args),
        env=dict(env),
        cwd=str((base / cwd).resolve()) if cwd else None,
    )
    return server, []


def _string_map(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )


def config_faults(config: McpConfig) -> list[ToolFileFault]:
    """The configuration's own faults, and a warning per secret that is not configured."""
    faults = list(config.faults)
    for server in config.servers.values():
        for secret in server.secrets:
            if secret not in settings.HARNESS_SECRETS:
                faults.append(
                    ToolFileFault(
                        config.path,
                        f"server {server.name}: secret {secret} is not configured (set "
                        f"HARNESS_SECRET_{secret} or HARNESS_SECRET_{secret}_FILE): "
                        "connections will fail",
                        severity="warning",
                    )
                )
    return faults
