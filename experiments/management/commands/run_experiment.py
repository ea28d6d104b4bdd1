"""A CI gate: run a dataset again with a candidate model route, in this process, print the
summary and exit 1 when regressions exceed ``--max-regressions``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from core.errors import DomainError
from experiments import queries, services
from harness.models import Tenant


class Command(BaseCommand):
    help = "Run an experiment over a dataset with a candidate model (tools from the recording)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--dataset", required=True, help="The dataset's name or id.")
        parser.add_argument("--model", required=True, help="The candidate's model route.")
        parser.add_argument("--system-prompt", type=Path, help="A file with the system prompt.")
        parser.add_argument("--agent-file", type=Path, help="An agent file replacing the agent.")
        parser.add_argument(
            "--policy-changes", type=Path, help="A JSON file: a proposed policy change (what-if)."
        )
        parser.add_argument("--strategy", choices=["react", "plan_execute"])
        parser.add_argument("--token-budget", type=int, help="The experiment's own token budget.")
        parser.add_argument("--max-regressions", type=int, default=0)

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = Tenant.objects.filter(slug=options["tenant"]).first()
        if tenant is None:
            raise CommandError(f"No tenant {options['tenant']!r}.")
        try:
            experiment = services.start_experiment(
                tenant,
                options["dataset"],
                _candidate(options),
                actor="manage.py run_experiment",
                enqueue=False,
                token_budget=options["token_budget"],
            )
        except DomainError as exc:
            raise CommandError(exc.message) from exc
        rows = list(experiment.items.all())
        self.stderr.write(progress_bar(0, len(rows)))
        for done, row in enumerate(rows, 1):
            services.run_item(str(row.id))
            self.stderr.write("\r" + progress_bar(done, len(rows)))
        self.stderr.write("\n")
        experiment.refresh_from_db()
        report = queries.experiment_detail(experiment)
        self.stdout.write(_table(report))
        regressions = report["summary"]["regressions"]
        if regressions > options["max_regressions"]:
            self.stdout.write(
                f"FAIL: {regressions} regression(s), more than {options['max_regressions']}."
            )
            sys.exit(1)
        self.stdout.write(f"OK: {regressions} regression(s).")


def _candidate(options: dict[str, Any]) -> dict[str, Any]:
    candidate: dict[str, Any] = {"model": options["model"]}
    try:
        if options["system_prompt"]:
            candidate["system_prompt"] = options["system_prompt"].read_text()
        if options["agent_file"]:
            candidate["agent"] = json.loads(options["agent_file"].read_text())
        if options["policy_changes"]:
            candidate["policy_changes"] = json.loads(options["policy_changes"].read_text())
    except (OSError, ValueError) as exc:
        raise CommandError(f"Cannot read the candidate's file: {exc}") from exc
    if options["strategy"]:
        candidate["strategy"] = options["strategy"]
    return candidate


def progress_bar(done: int, total: int, width: int = 30) -> str:
    """``[#########.....] 3/5``: ``width`` cells, filled in proportion."""
    filled = width * done // total if total else width
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total}"


def _table(report: dict[str, Any]) -> str:
    lines = [
        f"experiment {report['id']}  candidate {report['candidate'].get('model', '-')}  "
        f"status {report['status']}"
    ]
    lines.append(f"{'run':36}  {'verdict':10}  {'trajectory':10}  step  from  off  exec")
    for item in report["items"]:
        step = (item["first_divergence"] or {}).get("step", "")
        calls = item["tool_calls"] or {}
        lines.append(
            f"{item['run_id']:36}  {item['verdict'] or '-':10}  {item['trajectory'] or '-':10}  "
            f"{step!s:>4}  {calls.get('from_record', 0):>4}  {calls.get('off_record', 0):>3}  "
            f"{calls.get('executed', 0):>4}"
        )
    s = report["summary"]
    lines.append(
        f"items {s['items']}  same {s['same']}  diverged {s['diverged']}  regressions "
        f"{s['regressions']}  improved {s['improved']}  errors {s['errors']}  off_record "
        f"{s['off_record']}  executed {s['executed']}  tokens {s['tokens']['baseline']} -> "
        f"{s['tokens']['candidate']}"
    )
    return "\n".join(lines) + "\n"
