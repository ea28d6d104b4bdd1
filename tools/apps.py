from django.apps import AppConfig


class ToolsConfig(AppConfig):
    name = "tools"
    verbose_name = "Tool registry"

    def ready(self) -> None:
        from tools import checks  # noqa: F401  (registers the system checks)
