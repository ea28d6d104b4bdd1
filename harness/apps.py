from django.apps import AppConfig


class HarnessConfig(AppConfig):
    name = "harness"
    verbose_name = "Agent runs"

    def ready(self) -> None:
        from harness import checks  # noqa: F401  (registers the system checks)
