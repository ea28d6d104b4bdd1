from django.core.management.base import BaseCommand, CommandError

from harness.models import Tenant, new_webhook_secret


class Command(BaseCommand):
    help = "Print a tenant's webhook signing secret (whsec_…); --rotate replaces it first."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--rotate", action="store_true")

    def handle(self, *args, **options) -> None:
        tenant = Tenant.objects.filter(slug=options["tenant"]).first()
        if tenant is None:
            raise CommandError(f"No tenant {options['tenant']!r}.")
        if options["rotate"]:
            tenant.webhook_secret = new_webhook_secret()
            tenant.save(update_fields=["webhook_secret"])
        self.stdout.write(tenant.webhook_secret)
