from django.apps import AppConfig


class TracesConfig(AppConfig):
    name = "traces"
    verbose_name = "Traces and audit"

    def ready(self) -> None:
        # Wiring only: with an OTLP endpoint configured, start the exporter and instrument
        # Django and Celery (their request and task signals). Nothing happens without one.
        from traces.otel import configure_from_settings

        configure_from_settings()
