"""Loading and checking tool files: one hand-written JSON file per tool.

Folders are the project's ``tools/definitions/`` plus ``HARNESS_TOOL_DIRS``. Every file is
checked against the metaschema (``tool_file.schema.json``) and more: its ``parameters`` must be
a valid JSON Schema, its handler must import, its name must be unique and acceptable to every
provider. All faults are collected (not just the first) so one run of ``check_tools`` shows
everything to fix.
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

METASCHEMA_PATH = Path(__file__).with_name("tool_file.schema.json")
# The strictest rule among providers (OpenAI's function names).
PROVIDER_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
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
    concurrency_safe: bool = False
    approval: str = "never"
    sensitive: dict[str, dict[str, str]] = field(default_factory=dict)
    key_fields: tuple[str, ...] = ()
    carries: tuple[str, ...] = ()
    sink: str | None = None
    result_schema: dict[str, Any] | None = None

    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)

    @property
    def handler(self) -> Callable[..., Any]:
        return import_string(self.handler_path)

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
    return _registry_for(folders, settings.HARNESS_TOOL_TIMEOUT_S)


@cache
def _registry_for(folders: tuple[str, ...], default_timeout_s: float) -> ToolRegistry:
    tools, faults = load_tool_files(tool_files(folders), default_timeout_s)
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
    paths: Iterable[Path], default_timeout_s: float = 30.0
) -> tuple[dict[str, ToolDefinition], list[ToolFileFault]]:
    """Read and check tool files; return the good tools and every fault found."""
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
    tool = ToolDefinition(
        name=data["name"],
        description=data["description"],
        parameters=data["parameters"],
        handler_path=data["handler"],
        access=tuple(data["access"]),
        path=where,
        enabled=data.get("enabled", True),
        timeout_s=float(data.get("timeout_s", default_timeout_s)),
        idempotent=data.get("idempotent", False),
        concurrency_safe=data.get("concurrency_safe", False),
        approval=data.get("approval", "never"),
        sensitive=data.get("sensitive", {}),
        key_fields=tuple(data.get("key_fields", ())),
        carries=tuple(labels.get("carries", ())),
        sink=labels.get("sink"),
        result_schema=data.get("result"),
    )
    return tool, faults


def _semantic_faults(where: str, data: dict[str, Any]) -> list[ToolFileFault]:
    faults = []
    if not PROVIDER_NAME_PATTERN.match(data["name"]):
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
    try:
        handler = import_string(data["handler"])
    except ImportError as exc:
        faults.append(
            ToolFileFault(where, f"handler {data['handler']!r} cannot be imported: {exc}")
        )
    else:
        if not callable(handler):
            faults.append(ToolFileFault(where, f"handler {data['handler']!r} is not callable"))
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


def _pointer(path: Iterable[Any]) -> str:
    parts = [str(p).replace("~", "~0").replace("/", "~1") for p in path]
    return "/" + "/".join(parts) if parts else "/"


@cache
def _metaschema_validator() -> Draft202012Validator:
    return Draft202012Validator(json.loads(METASCHEMA_PATH.read_text(encoding="utf-8")))


@cache
def _argument_validator(schema_json: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads(schema_json), format_checker=FormatChecker())
