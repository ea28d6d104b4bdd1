"""``manage.py import_mcp_tools SERVER --out DIR [--tool NAME …] [--force]``.

Writes one draft tool file per tool the server advertises, pinned to what it advertises now.
A draft has no ``access`` (an error), so it is never loaded until someone reviewed it.
"""

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tools.mcp.services import McpServerUnknown, draft_tool_file, list_advertised_tools


class Command(BaseCommand):
    help = "Write draft tool files pinned to what an MCP server advertises (for review)."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("server", help="a server of HARNESS_MCP_CONFIG")
        parser.add_argument("--out", required=True, help="folder for the drafts")
        parser.add_argument("--tool", action="append", default=[], help="only these tools")
        parser.add_argument("--force", action="store_true", help="overwrite existing files")

    def handle(self, *args: Any, **options: Any) -> None:
        from tools.mcp.client import McpUnavailable

        try:
            advertised = list_advertised_tools(options["server"])
        except McpServerUnknown as exc:
            raise CommandError(str(exc)) from exc
        except (McpUnavailable, TimeoutError) as exc:
            raise CommandError(f"cannot list the tools of {options['server']}: {exc}") from exc
        wanted = options["tool"]
        missing = sorted(set(wanted) - set(advertised))
        if missing:
            raise CommandError(
                f"{options['server']} does not offer {', '.join(missing)} "
                f"(it offers: {', '.join(sorted(advertised))})"
            )
        out = Path(options["out"])
        out.mkdir(parents=True, exist_ok=True)
        written = 0
        for name in sorted(wanted or advertised):
            draft = draft_tool_file(options["server"], advertised[name])
            path = out / f"{draft['name']}.json"
            if path.exists() and not options["force"]:
                self.stdout.write(self.style.WARNING(f"kept    {path} (exists; --force)"))
                continue
            path.write_text(json.dumps(draft, indent=2, ensure_ascii=False) + "\n", "utf-8")
            self.stdout.write(f"drafted {path}")
            written += 1
        self.stdout.write(
            self.style.SUCCESS(
                f"{written} draft(s) written. Review each one — description, parameters, "
                "access, labels, sensitive, approval — before adding its folder to "
                "HARNESS_TOOL_DIRS."
            )
        )
