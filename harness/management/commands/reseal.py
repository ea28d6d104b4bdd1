"""``manage.py reseal``: re-encrypt every sealed value with the newest HARNESS_SEALING_KEY."""

from django.core.management.base import BaseCommand, CommandError

from harness.sealing_keys import SEALED_FIELDS, reseal_field


class Command(BaseCommand):
    help = (
        "Re-encrypt every sealed value (runs, sessions, webhook deliveries, tool executions) "
        "with the first key of HARNESS_SEALING_KEY. Run it after putting a new key first; then "
        "the old keys can be removed. Exits 1 if a value could be opened by no listed key."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--batch-size", type=int, default=500)

    def handle(self, *args, **options) -> None:
        unreadable = 0
        for model, field in SEALED_FIELDS:
            report = reseal_field(model, field, options["batch_size"])
            unreadable += report.unreadable
            self.stdout.write(
                f"{model._meta.label}.{field}: {report.resealed} resealed, "
                f"{report.unreadable} unreadable, {report.empty} empty"
            )
        if unreadable:
            raise CommandError(
                f"{unreadable} sealed value(s) are sealed under no listed key; they were left "
                "as they are (list the key they were sealed with, then run reseal again)."
            )
