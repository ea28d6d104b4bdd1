from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from harness.api_keys import create_api_key
from harness.errors import UnknownKeyScope, UnknownTenant
from policy.key_scopes import KEY_SCOPES


class Command(BaseCommand):
    help = "Issue an API key for a tenant and print it (it is stored hashed and shown only once)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--tenant", required=True, help="Tenant slug, e.g. acme.")
        parser.add_argument("--name", default="default", help="A label for the key.")
        parser.add_argument(
            "--replace", action="store_true", help="Revoke live keys of the same name first."
        )
        parser.add_argument(
            "--scope",
            action="append",
            dest="scopes",
            metavar="SCOPE",
            help=f"What the key may call (repeat, or comma-separated); default every scope: "
            f"{', '.join(KEY_SCOPES)}.",
        )
        parser.add_argument("--owner", default="", help="Who answers for the key.")
        parser.add_argument(
            "--expires-in-days", type=float, default=None, help="Expire the key after this long."
        )

    def handle(self, *args, **options) -> None:
        scopes = None
        if options["scopes"]:
            scopes = [s.strip() for item in options["scopes"] for s in item.split(",") if s]
        days = options["expires_in_days"]
        if days is not None and days <= 0:
            raise CommandError("--expires-in-days must be positive.")
        try:
            issued = create_api_key(
                options["tenant"],
                options["name"],
                options["replace"],
                scopes=scopes,
                owner=options["owner"],
                expires_at=timezone.now() + timedelta(days=days) if days else None,
            )
        except (UnknownTenant, UnknownKeyScope) as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(issued.secret)
