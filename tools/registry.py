"""Loading and checking tool files: one hand-written JSON file per tool.

Folders are the project's ``tools/definitions/`` plus ``HARNESS_TOOL_DIRS``. Every file is
checked against the metaschema (``tool_file.schema.json``) and more: its ``parameters`` must be
a valid JSON Schema, its handler must import (or, for an HTTP handler, its URL template must
fit the parameters), its name must be unique and acceptable to every provider. All faults are
collected (not just the first) so one run of ``check_tools`` shows everything to fix.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string
from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import SchemaError

from gateway.messages import ToolSpec
from tools.errors import ToolFileFault, ToolFilesInvalid
from tools.http_tools import PLACEHOLDER, HttpHandler
from tools.mcp.config import config_faults, get_mcp_config
from tools.mcp.handler import McpHandler
from tools.mcp.pin import Pin

METASCHEMA_PATH = Path(__file__).with_name("tool_file.schema.json")
# The strictest rule among providers (OpenAI's function names).
PROVIDER_NAME_PATTERN = re.compile(r"[a-zA-Z0-9_-]{1,64}")
MIN_DESCRIPTION_LENGTH = 15


@dataclass(frozen=True)
class ToolDefinition:
    name: str
    description: str
    parameters: dict[str, Any]
    handler_path: str
    access: tuple[str, ...]
    path: str
    enabled: bool = True
    timeout_s: float = 30.0
    idempotent: bool = False
    # Changes nothing anywhere (only reads): with ``idempotent``, an experiment may run it live.
    read_only: bool = False
    concurrency_safe: bool = False
    approval: str = "never"
    # Four eyes by default: the run's own end user may approve its held calls only if true.
    self_approval: bool = False
    sensitive: dict[str, dict[str, str]] = field(default_factory=dict)
    key_fields: tuple[str, ...] = ()
    carries: tuple[str, ...] = ()
    sink: str | None = None
    result_schema: dict[str, Any] | None = None
    http: HttpHandler | None = None
    mcp: McpHandler | None = None
    # {"tool": ..., "argument": ..., "field": ...}: how to fetch one item of a digest in full.
    fetch_details: dict[str, str] | None = None

    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)

    @property
    def handler(self) -> Callable[..., Any]:
        return self.http or self.mcp or import_string(self.handler_path)

    @property
    def validator(self) -> Draft202012Validator:
        return _argument_validator(json.dumps(self.parameters, sort_keys=True))


@dataclass(frozen=True)
class ToolRegistry:
    tools: dict[str, ToolDefinition]
    warnings: tuple[ToolFileFault, ...] = ()

    def get(self, name: str) -> ToolDefinition | None:
        return self.tools.get(name)

    def names(self) -> list[str]:
        return sorted(self.tools)


def get_tool_registry() -> ToolRegistry:
    """The registry for the folders currently configured; raises ``ToolFilesInvalid``."""
    folders = tuple(str(Path(folder).resolve()) for folder in settings.HARNESS_TOOL_DIRS)
    config = get_mcp_config()
    return _registry_for(folders, settings.HARNESS_TOOL_TIMEOUT_S, config.path, id(config))


@cache
def _registry_for(
    folders: tuple[str, ...], default_timeout_s: float, mcp_config: str, mcp_version: int
) -> ToolRegistry:
    # ``mcp_config``/``mcp_version`` key the cache: another configuration is another registry.
    tools, faults = load_tool_files(tool_files(folders), default_timeout_s)
    faults = [*config_faults(get_mcp_config()), *faults]
    if any(f.severity == "error" for f in faults):
        raise ToolFilesInvalid(faults)
    return ToolRegistry(tools=tools, warnings=tuple(faults))


def tool_files(folders: Iterable[str]) -> list[Path]:
    files: list[Path] = []
    for folder in folders:
        path = Path(folder)
        files.extend(sorted(path.glob("*.json")) if path.is_dir() else [path])
    return files


def load_tool_files(
    paths: Iterable[Path],
    default_timeout_s: float = 30.0,
    known_tools: dict[str, ToolDefinition] | None = None,
) -> tuple[dict[str, ToolDefinition], list[ToolFileFault]]:
    """Read and check tool files; return the good tools and every fault found.

    ``known_tools`` are tools loaded elsewhere that these files may refer to (``fetch_details``).
    """
    tools: dict[str, ToolDefinition] = {}
    faults: list[ToolFileFault] = []
    for path in paths:
        tool, file_faults = _read_tool_file(path, default_timeout_s)
        faults.extend(file_faults)
        if tool is None:
            continue
        if tool.name in tools:
            faults.append(
                ToolFileFault(
                    str(path),
                    f"duplicate tool name {tool.name!r} (also in {tools[tool.name].path})",
                )
            )
            continue
        tools[tool.name] = tool
    for tool in list(tools.values()):
        reference_faults = _reference_faults(tool, {**(known_tools or {}), **tools})
        if reference_faults:
            faults.extend(reference_faults)
            del tools[tool.name]
    return tools, faults


def _read_tool_file(
    path: Path, default_timeout_s: float
) -> tuple[ToolDefinition | None, list[ToolFileFault]]:
    where = str(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        message = f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        return None, [ToolFileFault(where, message)]
    except OSError as exc:
        return None, [ToolFileFault(where, f"cannot be read: {exc}")]
    faults = [
        ToolFileFault(where, f"at {_pointer(error.absolute_path)}: {error.message}")
        for error in sorted(_metaschema_validator().iter_errors(data), key=lambda e: list(e.path))
    ]
    if faults:
        return None, faults
    faults.extend(_semantic_faults(where, data))
    if any(f.severity == "error" for f in faults):
        return None, faults
    labels = data.get("labels", {})
    handler = data["handler"]
    http = mcp = None
    handler_path = handler if isinstance(handler, str) else ""
    enabled = data.get("enabled", True)
    if isinstance(handler, dict) and handler["kind"] == "mcp":
        mcp = McpHandler(
            data["name"], handler["server"], handler["tool"], Pin.from_spec(handler["pin"])
        )
        handler_path = f"mcp {handler['server']}/{handler['tool']}"
        # A tool whose server is not configured is kept out of sight (warned about above).
        enabled = enabled and handler["server"] in get_mcp_config().servers
    elif isinstance(handler, dict):
        http = HttpHandler.from_spec(data["name"], handler)
        handler_path = f"http {handler['method']}"
    tool = ToolDefinition(
        name=data["name"],
        description=data["description"],
        parameters=data["parameters"],
        handler_path=handler_path,
        access=tuple(data["access"]),
        path=where,
        enabled=enabled,
        timeout_s=float(data.get("timeout_s", default_timeout_s)),
        idempotent=data.get("idempotent", False),
        read_only=data.get("read_only", False),
        concurrency_safe=data.get("concurrency_safe", False),
        approval=data.get("approval", "never"),
        self_approval=data.get("self_approval", False),
        sensitive=data.get("sensitive", {}),
        key_fields=tuple(data.get("key_fields", ())),
        carries=tuple(labels.get("carries", ())),
        sink=labels.get("sink"),
        result_schema=data.get("result"),
        http=http,
        mcp=mcp,
        fetch_details=data.get("fetch_details"),
    )
    return tool, faults


def _semantic_faults(where: str, data: dict[str, Any]) -> list[ToolFileFault]:
    faults = []
    # fullmatch: with ^…$ and match, "get_ticket\n" passed ($ matches before a final newline).
    if not PROVIDER_NAME_PATTERN.fullmatch(data["name"]):
        faults.append(
            ToolFileFault(
                where,
                f"name {data['name']!r} would be rejected by model providers: "
                "use 1-64 letters, digits, '_' or '-'",
            )
        )
    for key in ("parameters", "result"):
        if key in data:
            try:
                Draft202012Validator.check_schema(data[key])
            except SchemaError as exc:
                faults.append(
                    ToolFileFault(
                        where,
                        f"'{key}' is not a valid JSON Schema at "
                        f"{_pointer(exc.absolute_path)}: {exc.message}",
                    )
                )
    if isinstance(data["handler"], str):
        faults.extend(_python_handler_faults(where, data["handler"]))
    elif data["handler"]["kind"] == "mcp":
        faults.extend(_mcp_handler_faults(where, data["handler"]))
    else:
        faults.extend(_http_handler_faults(where, data))
    faults.extend(_format_faults(where, data["parameters"]))
    if "fetch_details" in data:
        field_name = data["fetch_details"].get("field", data["fetch_details"]["argument"])
        if field_name not in data.get("key_fields", [field_name]):
            faults.append(
                ToolFileFault(
                    where,
                    f"fetch_details takes the field {field_name!r}, which is not in key_fields "
                    "(a digest keeps only key fields)",
                )
            )
    if not data["access"]:
        faults.append(
            ToolFileFault(where, "no required access declared: nobody could ever run this tool")
        )
    if len(data["description"].strip()) < MIN_DESCRIPTION_LENGTH:
        faults.append(
            ToolFileFault(
                where,
                f"description is under {MIN_DESCRIPTION_LENGTH} characters: "
                "too short to guide a model",
                severity="warning",
            )
        )
    return faults


def _python_handler_faults(where: str, path: str) -> list[ToolFileFault]:
    try:
        handler = import_string(path)
    except ImportError as exc:
        return [ToolFileFault(where, f"handler {path!r} cannot be imported: {exc}")]
    if not callable(handler):
        return [ToolFileFault(where, f"handler {path!r} is not callable")]
    return []


def _mcp_handler_faults(where: str, handler: dict[str, Any]) -> list[ToolFileFault]:
    faults = []
    if not Pin.from_spec(handler["pin"]).consistent:
        faults.append(
            ToolFileFault(
                where,
                "at /handler/pin: sha256 is not the hash of the pinned description and "
                "input_schema (edit the tool file's contract, never the pin; re-pin with "
                "import_mcp_tools)",
            )
        )
    config = get_mcp_config()
    if handler["server"] not in config.servers:
        where_config = config.path or "HARNESS_MCP_CONFIG (unset)"
        faults.append(
            ToolFileFault(
                where,
                f"at /handler/server: MCP server {handler['server']!r} is not configured in "
                f"{where_config}: the tool is disabled",
                severity="info",
            )
        )
    return faults


def _http_handler_faults(where: str, data: dict[str, Any]) -> list[ToolFileFault]:
    http = HttpHandler.from_spec(data["name"], data["handler"])
    faults = []
    authority = http.url.split("://", 1)[1].split("/", 1)[0].split("?", 1)[0]
    if "{" in authority or "$" in authority:
        faults.append(
            ToolFileFault(
                where,
                "at /handler/url: the scheme and host may not contain placeholders "
                "(the model must never choose where a request goes)",
            )
        )
    properties = data["parameters"].get("properties", {})
    required = set(data["parameters"].get("required", []))
    for name in http.url_arguments:
        if name not in properties or name not in required:
            faults.append(
                ToolFileFault(
                    where,
                    f"at /handler/url: {{{name}}} must name a required property of 'parameters'",
                )
            )
    for header, value in http.headers.items():
        if any(m["argument"] for m in PLACEHOLDER.finditer(value)):
            faults.append(
                ToolFileFault(
                    where,
                    f"at /handler/headers/{header}: header values may use only ${{secret:NAME}}",
                )
            )
    for secret in http.secrets:
        if secret not in settings.HARNESS_SECRETS:
            faults.append(
                ToolFileFault(
                    where,
                    f"secret {secret} is not configured (set HARNESS_SECRET_{secret} or "
                    f"HARNESS_SECRET_{secret}_FILE): calls will fail",
                    severity="warning",
                )
            )
    return faults


def _format_faults(where: str, schema: Any) -> list[ToolFileFault]:
    """A ``format`` the validator cannot check would pass anything: say so."""
    known = _argument_validator("{}").format_checker.checkers
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("format"), str):
                found.add(node["format"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return [
        ToolFileFault(
            where,
            f"format {name!r} in 'parameters' is not checked by the validator: "
            "any string passes (use a pattern instead)",
            severity="warning",
        )
        for name in sorted(found - set(known))
    ]


def _reference_faults(
    tool: ToolDefinition, tools: dict[str, ToolDefinition]
) -> list[ToolFileFault]:
    if tool.fetch_details is None:
        return []
    target_name = tool.fetch_details["tool"]
    argument = tool.fetch_details["argument"]
    target = tools.get(target_name)
    if target is None:
        message = f"fetch_details names tool {target_name!r}, which no tool file defines"
    elif argument not in target.parameters.get("properties", {}):
        message = f"fetch_details: tool {target_name!r} has no argument {argument!r}"
    else:
        return []
    return [ToolFileFault(tool.path, message)]


def _pointer(path: Iterable[Any]) -> str:
    parts = [str(p).replace("~", "~0").replace("/", "~1") for p in path]
    return "/" + "/".join(parts) if parts else "/"


@cache
def _metaschema_validator() -> Draft202012Validator:
    return Draft202012Validator(json.loads(METASCHEMA_PATH.read_text(encoding="utf-8")))


@cache
def _argument_validator(schema_json: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads(schema_json), format_checker=FormatChecker())
