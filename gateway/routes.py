"""Model routes: ``provider:model`` strings resolved to a provider and its configuration."""

from dataclasses import dataclass

from django.conf import settings

from gateway.errors import InvalidRoute


@dataclass(frozen=True)
class Route:
    provider: str
    model: str

    @property
    def name(self) -> str:
        return f"{self.provider}:{self.model}"


def parse_route(route: str | None) -> Route:
    """Parse a route; an empty route means the deployment's default (``HARNESS_MODEL``)."""
    text = (route or settings.HARNESS_MODEL).strip()
    provider, sep, model = text.partition(":")
    if not sep or not provider or not model:
        raise InvalidRoute(
            f"Model route {text!r} is not of the form provider:model "
            "(e.g. scripted:demo, openai:gpt-4o-mini).",
            {"route": text},
        )
    return Route(provider=provider.lower(), model=model)
