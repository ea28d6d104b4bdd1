"""``manage.py verify_audit [--tenant X] [--expect-head FILE]``: check every tenant's audit
chains (each run's records, and the tenant's chain of run links).

Prints one line per tenant; for a broken chain it names the first broken record (run sequence,
record id, run) or link (link sequence) and why — including a record after its run's final link,
and a run that has ended (per the registered ended runs: the harness's terminal runs) without a
final link naming its last record. With ``--expect-head FILE`` (what
``manage.py audit_head`` printed earlier), it also proves each chain in the file still extends
that signed head, so a chain cut back to an earlier signed head is caught. Exits with status 1
when anything does not hold.
"""

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from traces.chain import audited_tenants, extends_head, verify_chain


class Command(BaseCommand):
    help = (
        "Verify the audit chains of every tenant (or one): each run's records and the tenant's "
        "run links; name the first break. --expect-head FILE: the chain must extend that head."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", action="append", help="Only this tenant (repeatable).")
        parser.add_argument(
            "--expect-head",
            metavar="FILE",
            help="JSON printed by `manage.py audit_head`: each chain must still extend it.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        expected = _read_heads(options["expect_head"]) if options["expect_head"] else []
        tenants = options["tenant"] or sorted(
            set(audited_tenants()) | {str(head.get("tenant", "")) for head in expected}
        )
        broken = []
        for tenant in tenants:
            report = verify_chain(tenant)
            origin = (
                f"after checkpoint {report.starts_after}" if report.starts_after else "from genesis"
            )
            if report.ok:
                self.stdout.write(
                    f"{tenant}: ok, {report.checked} records verified {origin} "
                    f"({report.runs} runs, {report.links} links), "
                    f"chain ends at link {report.ends_at}"
                )
            else:
                broken.append(tenant)
                self.stdout.write(f"{tenant}: BROKEN at {report.broken.describe()}")
        for head in expected:
            tenant = str(head.get("tenant", ""))
            if options["tenant"] and tenant not in options["tenant"]:
                continue
            problem = extends_head(head)
            if problem is None:
                self.stdout.write(
                    f"{tenant}: extends the expected head at link {head.get('sequence')}"
                )
            else:
                if tenant not in broken:
                    broken.append(tenant)
                self.stdout.write(f"{tenant}: NOT EXTENDING the expected head: {problem}")
        if broken:
            raise CommandError(f"audit chain broken for {', '.join(broken)}")


def _read_heads(path: str) -> list[dict[str, Any]]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise CommandError(f"--expect-head: cannot read {path}: {exc.strerror}") from exc
    except ValueError as exc:
        raise CommandError(f"--expect-head: {path} is not JSON: {exc}") from exc
    heads = data if isinstance(data, list) else [data]
    if not heads or not all(isinstance(head, dict) and "tenant" in head for head in heads):
        raise CommandError(
            f"--expect-head: {path} must hold what `manage.py audit_head` prints "
            "(a list of {tenant, sequence, hash, signature})"
        )
    return heads
