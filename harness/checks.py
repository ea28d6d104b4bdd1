"""System checks: agent files load, every tool an agent names exists, the receipt key reads."""

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from gateway.errors import GatewayError
from gateway.services import parse_route
from harness.agent_registry import list_agents
from harness.errors import InvalidAgentFile
from harness.receipts.signing import receipt_keys
from tools.errors import ToolFilesInvalid
from tools.services import get_tool_registry


@checks.register("harness")
def check_agent_files(app_configs, **kwargs) -> list[checks.CheckMessage]:
    try:
        agents = list_agents()
    except InvalidAgentFile as exc:
        return [checks.Error(exc.fault, obj=exc.path, id="harness.E001")]
    try:
        known_tools = set(get_tool_registry().names())
    except ToolFilesInvalid:
        return []  # the tool check reports those faults
    messages: list[checks.CheckMessage] = []
    for agent in agents.values():
        for name in agent.tools:
            if name not in known_tools:
                messages.append(
                    checks.Error(
                        f"agent {agent.name!r} names tool {name!r}, which no tool file defines",
                        obj=agent.path,
                        id="harness.E002",
                    )
                )
        for route in (agent.model, *agent.fallback_models, agent.summary_model):
            if not route:
                continue
            try:
                parse_route(route)
            except GatewayError as exc:
                messages.append(checks.Error(exc.message, obj=agent.path, id="harness.E003"))
    return messages


@checks.register("harness")
def check_receipt_signing_key(app_configs, **kwargs) -> list[checks.CheckMessage]:
    """A bad ``HARNESS_RECEIPT_SIGNING_KEY`` stops start-up, not the first receipt request."""
    if not settings.HARNESS_RECEIPT_SIGNING_KEY:
        return []  # the development key is generated when first needed
    try:
        receipt_keys()
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), id="harness.E004")]
    return []
