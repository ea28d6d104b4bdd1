"""Who hears of new MCP connections: handed to every session pool (``tools.mcp.client``).

Its own light module (no MCP SDK) so that ``tools.apps`` can hand the drift log
(``tools.mcp.services.log_drift``) to the pool at start-up: the pool sits below the registry
and the services, and imports neither.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

ConnectListener = Callable[[str, dict[str, Any]], None]

_listeners: list[ConnectListener] = []


def add_connect_listener(listener: ConnectListener) -> None:
    """Call ``listener(server, advertised tools)`` at the first listing of each connection
    of every pool made from now on."""
    if listener not in _listeners:
        _listeners.append(listener)


def connect_listeners() -> list[ConnectListener]:
    return list(_listeners)
