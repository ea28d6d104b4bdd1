"""``manage.py siem_status``: each SIEM sink's cursor per stream, as JSON: position, records
delivered, lag (records after the cursor and the age of the oldest), failures, back-off."""

import json
from typing import Any

from django.core.management.base import BaseCommand

from harness.siem.delivery import siem_status


class Command(BaseCommand):
    help = "Print each SIEM sink's cursor, lag and failures per stream (JSON)."

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(json.dumps(siem_status(), indent=2))
