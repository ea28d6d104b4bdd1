"""``manage.py verify_audit [--tenant X]``: check every tenant's audit hash chain.

Prints one line per tenant; for a broken chain it names the first broken link (sequence,
record id, run) and why, and the command exits with status 1.
"""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from traces.chain import audited_tenants, verify_chain


class Command(BaseCommand):
    help = "Verify the audit records' hash chain of every tenant (or one) and name the first break."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", action="append", help="Only this tenant (repeatable).")

    def handle(self, *args: Any, **options: Any) -> None:
        tenants = options["tenant"] or audited_tenants()
        broken = []
        for tenant in tenants:
            report = verify_chain(tenant)
            origin = (
                f"after checkpoint {report.starts_after}" if report.starts_after else "from genesis"
            )
            if report.ok:
                self.stdout.write(
                    f"{tenant}: ok, {report.checked} records verified {origin}, "
                    f"chain ends at {report.ends_at}"
                )
            else:
                broken.append(tenant)
                self.stdout.write(f"{tenant}: BROKEN at {report.broken.describe()}")
        if broken:
            raise CommandError(f"audit chain broken for {', '.join(broken)}")
