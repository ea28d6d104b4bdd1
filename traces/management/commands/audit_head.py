"""``manage.py audit_head [--tenant X]``: print the signed head of each tenant's audit chain
as JSON, for export.

Output: a JSON list of ``{"tenant", "sequence", "hash", "signature"}`` (``sequence`` is the
tenant's last run link; a tenant without links has ``0`` and the genesis hash). Keep it outside
the database; ``manage.py verify_audit --expect-head FILE`` later proves the chain still extends
it, so a chain cut back to an earlier signed head is caught.
"""

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from traces.chain import audited_tenants, signed_head


class Command(BaseCommand):
    help = "Print the signed head of every tenant's audit chain (or one) as JSON, for export."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", action="append", help="Only this tenant (repeatable).")

    def handle(self, *args: Any, **options: Any) -> None:
        tenants = options["tenant"] or audited_tenants()
        self.stdout.write(json.dumps([signed_head(tenant) for tenant in tenants], indent=2))
