from django.apps import AppConfig


class GatewayConfig(AppConfig):
    name = "gateway"
    verbose_name = "Model gateway"

    def ready(self) -> None:
        from gateway import checks  # noqa: F401  (registers the system checks)
