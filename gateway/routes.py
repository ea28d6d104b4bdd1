"""Model routes: a name such as ``openai:gpt-4o-mini`` resolved to a provider and its options.

A route is ``provider:model``, or any name given in ``HARNESS_ROUTES`` (a JSON object of route
name → options). Options of the entry ``"*"`` apply to every route; a route's own entry wins.
Providers take their base URL and key from the standard variables (``OPENAI_BASE_URL``,
``OPENAI_API_KEY``, ``ANTHROPIC_BASE_URL``, ``ANTHROPIC_API_KEY``) unless the route names
its own. Nothing here reads the environment: settings do that.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from gateway.errors import InvalidRoute, UnknownProvider

PROVIDER_NAMES = ("openai", "anthropic", "scripted")
DEFAULT_BASE_URLS = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
}
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_RETRIES = 2
DEFAULT_BACKOFF_S = 0.5
DEFAULT_BACKOFF_MAX_S = 8.0
DEFAULT_MAX_WAIT_S = 30.0
# Anthropic requires max_tokens on every request; OpenAI-compatible servers get it only if set.
DEFAULT_ANTHROPIC_MAX_TOKENS = 4096

# Option name → accepted types. ``api_key_env`` is resolved into ``api_key`` by the settings.
_OPTION_TYPES: dict[str, tuple[type, ...]] = {
    "provider": (str,),
    "model": (str,),
    "base_url": (str,),
    "api_key": (str,),
    "api_key_env": (str,),
    "timeout_s": (int, float),
    "retries": (int,),
    "backoff_s": (int, float),
    "backoff_max_s": (int, float),
    "max_wait_s": (int, float),
    "stream": (bool,),
    "max_tokens": (int,),
    "requests_per_minute": (int,),
    "tokens_per_minute": (int,),
    "price": (dict,),
    "params": (dict,),
}
_PRICE_KEYS = ("input", "output", "cached_input")


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens, as providers publish them."""

    input: float = 0.0
    output: float = 0.0
    cached_input: float | None = None


@dataclass(frozen=True)
class Route:
    """One resolved route: which adapter, which model, where, and how patiently."""

    name: str
    provider: str
    model: str
    base_url: str = ""
    api_key: str = field(default="", repr=False)
    timeout_s: float = DEFAULT_TIMEOUT_S
    retries: int = DEFAULT_RETRIES
    backoff_s: float = DEFAULT_BACKOFF_S
    backoff_max_s: float = DEFAULT_BACKOFF_MAX_S
    max_wait_s: float = DEFAULT_MAX_WAIT_S
    stream: bool = False
    max_tokens: int | None = None
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    price: Price | None = None
    params: dict[str, Any] = field(default_factory=dict)


def parse_route(route: str | None) -> Route:
    """Resolve a route; an empty route means the deployment's default (``HARNESS_MODEL``).

    Raises ``InvalidRoute`` for a malformed name or bad options, ``UnknownProvider`` for a
    provider the gateway has no adapter for. A missing key is not an error here: it is one
    when the route is called.
    """
    name = (route or settings.HARNESS_MODEL).strip()
    table = _route_table()
    options = {**table.get("*", {}), **table.get(name, {})}
    _check_options(name, options)
    provider, _, model = name.partition(":") if ":" in name else ("", "", "")
    provider = str(options.get("provider", provider)).lower()
    model = str(options.get("model", model))
    if not provider or not model:
        raise InvalidRoute(
            f"Model route {name!r} needs a provider and a model: write it as provider:model "
            "(e.g. scripted:demo, openai:gpt-4o-mini), or give it 'provider' and 'model' "
            "in HARNESS_ROUTES.",
            {"route": name},
        )
    if provider not in PROVIDER_NAMES:
        raise UnknownProvider(
            f"Model route {name!r} names provider {provider!r}. "
            f"Providers: {', '.join(PROVIDER_NAMES)}.",
            {"route": name},
        )
    return Route(
        name=name,
        provider=provider,
        model=model,
        base_url=str(options.get("base_url") or _provider_setting(provider, "BASE_URL")),
        api_key=str(options.get("api_key") or _provider_setting(provider, "API_KEY")),
        timeout_s=float(options.get("timeout_s", DEFAULT_TIMEOUT_S)),
        retries=int(options.get("retries", DEFAULT_RETRIES)),
        backoff_s=float(options.get("backoff_s", DEFAULT_BACKOFF_S)),
        backoff_max_s=float(options.get("backoff_max_s", DEFAULT_BACKOFF_MAX_S)),
        max_wait_s=float(options.get("max_wait_s", DEFAULT_MAX_WAIT_S)),
        stream=bool(options.get("stream", False)),
        max_tokens=options.get("max_tokens")
        or (DEFAULT_ANTHROPIC_MAX_TOKENS if provider == "anthropic" else None),
        requests_per_minute=options.get("requests_per_minute"),
        tokens_per_minute=options.get("tokens_per_minute"),
        price=Price(**options["price"]) if "price" in options else None,
        params=dict(options.get("params", {})),
    )


def check_route_table() -> list[str]:
    """Every fault of ``HARNESS_ROUTES``, as messages naming the route (for the system check)."""
    table = getattr(settings, "HARNESS_ROUTES", {})
    if not isinstance(table, dict):
        return ["HARNESS_ROUTES must be a JSON object of route name → options"]
    faults = []
    for name in [*(n for n in table if n != "*"), settings.HARNESS_MODEL]:
        try:
            parse_route(name)
        except (InvalidRoute, UnknownProvider) as exc:
            faults.append(exc.message)
    return faults


def _route_table() -> dict[str, dict[str, Any]]:
    table = getattr(settings, "HARNESS_ROUTES", {})
    if not isinstance(table, dict):
        raise InvalidRoute("HARNESS_ROUTES must be a JSON object of route name → options")
    return table


def _provider_setting(provider: str, suffix: str) -> str:
    value = getattr(settings, f"{provider.upper()}_{suffix}", "")
    if not value and suffix == "BASE_URL":
        return DEFAULT_BASE_URLS.get(provider, "")
    return value


def _check_options(name: str, options: Any) -> None:
    if not isinstance(options, dict):
        raise InvalidRoute(f"HARNESS_ROUTES[{name!r}] must be an object", {"route": name})
    for key, value in options.items():
        types = _OPTION_TYPES.get(key)
        if types is None:
            raise InvalidRoute(
                f"HARNESS_ROUTES[{name!r}]: unknown option {key!r}. "
                f"Options: {', '.join(sorted(_OPTION_TYPES))}.",
                {"route": name, "option": key},
            )
        # bool is an int in Python; only "stream" takes one.
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise InvalidRoute(
                f"HARNESS_ROUTES[{name!r}]: option {key!r} has the wrong type "
                f"({type(value).__name__}).",
                {"route": name, "option": key},
            )
        if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
            raise InvalidRoute(
                f"HARNESS_ROUTES[{name!r}]: option {key!r} must not be negative",
                {"route": name, "option": key},
            )
    price = options.get("price", {})
    for key, value in price.items():
        if key not in _PRICE_KEYS or not isinstance(value, int | float) or value < 0:
            raise InvalidRoute(
                f"HARNESS_ROUTES[{name!r}]: price {key!r} must be one of "
                f"{', '.join(_PRICE_KEYS)} with a non-negative number (USD per million tokens)",
                {"route": name, "option": "price"},
            )
