"""``manage.py check_tools [PATH …]``: report every fault of every tool file.

With no PATH it checks the configured folders (``tools/definitions`` and ``HARNESS_TOOL_DIRS``).
A PATH is a tool file or a folder of them; ``fetch_details`` may refer to a configured tool.
Exits 1 when any file has an error; warnings alone exit 0.
"""

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from tools.registry import load_tool_files, tool_files


class Command(BaseCommand):
    help = "Check tool files: JSON, metaschema, parameters schema, handler, names, access."
    requires_system_checks: list[str] = []  # a bad tool file must not stop the checker itself

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="*", help="tool files or folders (default: configured)")

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
        for fault in faults:
            label = "ERROR  " if fault.severity == "error" else "WARNING"
            style = self.style.ERROR if fault.severity == "error" else self.style.WARNING
            self.stdout.write(style(f"{label} {_shown(fault.path)}: {fault.message}"))
        errors = sum(1 for fault in faults if fault.severity == "error")
        summary = (
            f"{len(files)} tool file(s) checked: {len(tools)} tool(s) loaded, "
            f"{errors} error(s), {len(faults) - errors} warning(s)."
        )
        if errors:
            raise CommandError(summary, returncode=1)
        self.stdout.write(self.style.SUCCESS(summary))


def _shown(path: str) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return path
