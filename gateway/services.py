"""The gateway's entry point: send a conversation to a route and get one response back."""

from collections.abc import Callable

from gateway.errors import UnknownProvider
from gateway.messages import Message, ModelResponse, ToolSpec
from gateway.providers import scripted
from gateway.routes import parse_route

ProviderCall = Callable[..., ModelResponse]

PROVIDERS: dict[str, ProviderCall] = {
    "scripted": scripted.complete,
}


def complete(
    route: str | None,
    messages: list[Message],
    tools: list[ToolSpec],
    turn: int | None = None,
) -> ModelResponse:
    """Call the model behind ``route`` (empty: the default route) with messages and tools.

    ``turn`` is the index of this model call in the whole conversation (0-based), which the
    messages alone do not tell once older turns were trimmed; the scripted model plays by it.

    Raises a ``GatewayError`` when the route is bad or the provider fails; the caller (the
    loop) turns that into data. Has no side effect beyond the provider call itself.
    """
    parsed = parse_route(route)
    provider = PROVIDERS.get(parsed.provider)
    if provider is None:
        raise UnknownProvider(
            f"No provider {parsed.provider!r}. Providers: {', '.join(sorted(PROVIDERS))}.",
            {"route": parsed.name},
        )
    response = provider(parsed.model, messages, tools, turn=turn)
    response.route = parsed.name
    return response
