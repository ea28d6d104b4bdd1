from django.apps import AppConfig


class ToolsConfig(AppConfig):
    name = "tools"
    verbose_name = "Tool registry"

    def ready(self) -> None:
        from tools import checks  # noqa: F401  (registers the system checks)
        from tools.mcp.listeners import add_connect_listener
        from tools.services import warn_of_mcp_drift

        # Each new MCP connection warns of pinned tools that drifted (handed to the pool, which
        # sits below the registry and so cannot import it).
        add_connect_listener(warn_of_mcp_drift)
