"""Run an agent from the terminal and watch it work: ``manage.py run_agent "…"``."""

from __future__ import annotations

import json
import threading
import time

from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from harness.errors import HarnessError
from harness.events import EventType, list_events_after
from harness.models import Run, RunMode, Tenant
from harness.runs import RunRequest, create_run, drive_inline

POLL_S = 0.1


class Command(BaseCommand):
    help = "Run an agent in this process, showing its events live, then the answer and trace id."

    def add_arguments(self, parser) -> None:
        parser.add_argument("input", help="What the user asks.")
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--user", required=True, help="The end user the agent acts for.")
        parser.add_argument("--agent", required=True)
        parser.add_argument("--session", default="", help="Continue this session id.")
        parser.add_argument("--max-steps", type=int, default=None)

    def handle(self, *args, **options) -> None:
        tenant = Tenant.objects.filter(slug=options["tenant"]).first()
        if tenant is None:
            raise CommandError(f"No tenant {options['tenant']!r}.")
        try:
            run, _ = create_run(
                tenant,
                RunRequest(
                    agent=options["agent"],
                    user_id=options["user"],
                    input=options["input"],
                    mode=RunMode.SYNC,
                    max_steps=options["max_steps"],
                    session_id=options["session"],
                ),
            )
        except HarnessError as exc:
            raise CommandError(exc.message) from exc
        driver = threading.Thread(target=self._drive, args=(run.id,), daemon=True)
        driver.start()
        self._follow(run)
        driver.join()
        run.refresh_from_db()
        style = self.style.SUCCESS if run.status == "succeeded" else self.style.ERROR
        self.stdout.write("")
        self.stdout.write(
            style(f"{run.status} after {run.steps} step(s), {run.total_tokens} tokens")
        )
        self.stdout.write(run.answer)
        self.stdout.write(f"trace: {run.request_id}   run: {run.id}   session: {run.session_id}")

    def _drive(self, run_id) -> None:
        try:
            drive_inline(run_id, None)
        finally:
            connections.close_all()

    def _follow(self, run: Run) -> None:
        after = 0
        while True:
            for event in list_events_after(run.id, after):
                after = event.sequence
                line = self._describe(event.type, event.data, run.max_steps)
                if line:
                    self.stdout.write(line)
                if event.type == EventType.RUN_FINISHED:
                    return
            time.sleep(POLL_S)

    def _describe(self, kind: str, data: dict, max_steps: int) -> str:
        if kind == EventType.STEP_STARTED:
            step = data["step"]
            bar = "#" * step + "." * max(0, max_steps - step)
            return self.style.MIGRATE_HEADING(f"[{bar}] step {step}/{max_steps}: asking the model")
        if kind == EventType.TOOL_CALL_PROPOSED:
            arguments = json.dumps(data.get("arguments"), ensure_ascii=False)
            return f"  -> {data['tool']} {arguments}"
        if kind == EventType.TOOL_CALL_FINISHED:
            if data["ok"]:
                return self.style.SUCCESS(f"  ok {data['tool']}")
            error = data.get("error") or {}
            return self.style.WARNING(
                f"  !! {data['tool']}: {error.get('code')}: {error.get('message')}"
            )
        if kind == EventType.CONTEXT_TRIMMED:
            return f"  (context trimmed by {data['method']}, saved {data['saved_tokens']} tokens)"
        if kind == EventType.APPROVAL_NEEDED:
            return self.style.WARNING(f"  waiting for approval of {data.get('tool')}")
        return ""
