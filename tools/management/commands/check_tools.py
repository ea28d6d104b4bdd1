"""``manage.py check_tools [PATH …] [--offline]``: report every fault of every tool file.

With no PATH it checks the configured folders (``tools/definitions`` and ``HARNESS_TOOL_DIRS``).
A PATH is a tool file or a folder of them; ``fetch_details`` may refer to a configured tool.
Pinned MCP tools are compared with what their servers advertise now (unless ``--offline``):
a drifted tool is reported with a diff. Exits 1 when any file has an error or a tool drifted;
warnings alone exit 0.
"""

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from tools.mcp.config import config_faults, get_mcp_config
from tools.mcp.services import check_drift
from tools.registry import load_tool_files, tool_files

LABELS = {"error": "ERROR  ", "warning": "WARNING", "info": "INFO   "}


class Command(BaseCommand):
    help = "Check tool files: JSON, metaschema, parameters schema, handler, names, access, drift."
    requires_system_checks: list[str] = []  # a bad tool file must not stop the checker itself

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="*", help="tool files or folders (default: configured)")
        parser.add_argument(
            "--offline", action="store_true", help="do not ask MCP servers (no drift check)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        configured = tool_files(str(folder) for folder in settings.HARNESS_TOOL_DIRS)
        timeout = settings.HARNESS_TOOL_TIMEOUT_S
        if options["paths"]:
            files = tool_files(options["paths"])
            checked = {path.resolve() for path in files}
            others = [path for path in configured if path.resolve() not in checked]
            known, _ = load_tool_files(others, timeout)
        else:
            files, known = configured, {}
        tools, faults = load_tool_files(files, timeout, known_tools=known)
        config = get_mcp_config()
        faults = [*config_faults(config), *faults]
        if config.path:
            self.stdout.write(_servers_line(config))
        for fault in faults:
            style = {"error": self.style.ERROR, "warning": self.style.WARNING}.get(
                fault.severity, str
            )
            self.stdout.write(
                style(f"{LABELS[fault.severity]} {_shown(fault.path)}: {fault.message}")
            )
        drifted = unreachable = 0
        if not options["offline"]:
            report = check_drift(tools.values())
            for server, why in sorted(report.unreachable.items()):
                unreachable += 1
                self.stdout.write(
                    self.style.ERROR(f"ERROR   MCP server {server}: cannot check drift: {why}")
                )
            for path, drift in report.drifts:
                drifted += 1
                self.stdout.write(
                    self.style.ERROR(f"DRIFT   {_shown(path)}: {drift.tool}: {drift.summary()}")
                )
                if drift.diff:
                    self.stdout.write(drift.diff.rstrip("\n"))
        errors = unreachable + sum(1 for fault in faults if fault.severity == "error")
        warnings = sum(1 for fault in faults if fault.severity == "warning")
        summary = (
            f"{len(files)} tool file(s) checked: {len(tools)} tool(s) loaded, "
            f"{errors} error(s), {warnings} warning(s)"
        ) + (f", {drifted} drifted." if drifted else ".")
        if errors or drifted:
            raise CommandError(summary, returncode=1)
        self.stdout.write(self.style.SUCCESS(summary))


def _servers_line(config: Any) -> str:
    """Which MCP servers this process sees, and from where: what the web server sees too when
    both read the same HARNESS_MCP_CONFIG (by default the demo's, under var/). Unset, each
    pinned tool's INFO line says its server is not configured."""
    names = ", ".join(sorted(config.servers)) or "none"
    return f"INFO    MCP servers configured in {_shown(config.path)}: {names}."


def _shown(path: str) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return path
