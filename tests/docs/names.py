"""The names a reader looks for in the documentation: environment variables, endpoints,
management commands and make targets, found the same way in any Markdown text."""

from __future__ import annotations

import re

ENV_VAR = re.compile(
    r"\b(?:HARNESS|DJANGO|OTEL|OPENAI|ANTHROPIC|BENCH|POSTGRES)_[A-Z0-9_]*[A-Z0-9]\b"
    r"|\b(?:DATABASE_URL|REDIS_URL|CELERY_BROKER_URL|FORWARDED_ALLOW_IPS)\b"
)
# A path of the API or the site; a segment that names one thing ({id}, <id>, $RUN, …, call_1_1)
# is written `{}`, so `/runs/$RUN/replay` and `/runs/{id}/replay` are one endpoint.
ENDPOINT = re.compile(
    r"/(?:api/v1|admin|\.well-known|healthz|readyz)"
    r"(?:/(?:\{[^}\s]*(?: [^}\s]+)*\}|<[^>\s]+>|\$[A-Za-z_]+|…|[A-Za-z0-9_.-]+))*"
)
PLACEHOLDER = re.compile(r"^(?:\{.*\}|<.*>|\$.*|…|call_\d+_\d+)$")
COMMAND = re.compile(r"manage\.py (\w+)")
MAKE_TARGET = re.compile(r"`make ([a-z-]+)")


def endpoint(path: str) -> str:
    segments = path.rstrip("/.").split("/")
    return "/".join("{}" if PLACEHOLDER.match(s) else s for s in segments)


def names(text: str) -> set[str]:
    """Every name of the four kinds in ``text``, each prefixed with its kind."""
    found = {f"env {name}" for name in ENV_VAR.findall(text)}
    found |= {f"endpoint {endpoint(path)}" for path in ENDPOINT.findall(text)}
    found |= {f"command {name}" for name in COMMAND.findall(text)}
    found |= {f"make {name}" for name in MAKE_TARGET.findall(text)}
    return found


def headings(text: str) -> list[str]:
    """The headings of a Markdown text (not the `#` comments inside its code blocks)."""
    found, fence = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and re.match(r"#{1,6} ", line):
            found.append(line.lstrip("#").strip())
    return found
