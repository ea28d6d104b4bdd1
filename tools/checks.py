"""System check: every tool file (and the MCP configuration) loads, or start-up stops naming
the file and the fault."""

from django.conf import settings
from django.core import checks

from tools.mcp.config import config_faults, get_mcp_config
from tools.registry import load_tool_files, tool_files


@checks.register("harness")
def check_tool_files(app_configs, **kwargs) -> list[checks.CheckMessage]:
    _, faults = load_tool_files(
        tool_files(str(folder) for folder in settings.HARNESS_TOOL_DIRS),
        settings.HARNESS_TOOL_TIMEOUT_S,
    )
    messages: list[checks.CheckMessage] = []
    for fault in [*config_faults(get_mcp_config()), *faults]:
        if fault.severity == "info":
            continue
        kind = checks.Error if fault.severity == "error" else checks.Warning
        code = "tools.E001" if fault.severity == "error" else "tools.W001"
        messages.append(kind(fault.message, obj=fault.path, id=code))
    return messages
