from django.core.management.base import BaseCommand, CommandError

from harness.errors import UnknownTenant
from harness.services import create_api_key


class Command(BaseCommand):
    help = "Issue an API key for a tenant and print it (it is stored hashed and shown only once)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--tenant", required=True, help="Tenant slug, e.g. acme.")
        parser.add_argument("--name", default="default", help="A label for the key.")
        parser.add_argument(
            "--replace", action="store_true", help="Revoke live keys of the same name first."
        )

    def handle(self, *args, **options) -> None:
        try:
            issued = create_api_key(options["tenant"], options["name"], options["replace"])
        except UnknownTenant as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(issued.secret)
