from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError

from harness.api_keys import rotate_api_key
from harness.errors import ApiKeyNotFound, UnknownTenant


class Command(BaseCommand):
    help = (
        "Issue a new key in place of a tenant's live key of that name (same owner and scopes) "
        "and print it; the old key keeps working for the grace period."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--tenant", required=True, help="Tenant slug, e.g. acme.")
        parser.add_argument("--name", default="default", help="The key's label.")
        parser.add_argument(
            "--grace-hours",
            type=float,
            default=24.0,
            help="How long the old key keeps working (default 24; 0: stops at once).",
        )

    def handle(self, *args, **options) -> None:
        if options["grace_hours"] < 0:
            raise CommandError("--grace-hours cannot be negative.")
        try:
            issued = rotate_api_key(
                options["tenant"], options["name"], timedelta(hours=options["grace_hours"])
            )
        except (UnknownTenant, ApiKeyNotFound) as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(issued.secret)
