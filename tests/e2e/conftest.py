"""The gateway's provider servers, for end-to-end runs through the API."""

from tests.gateway.conftest import (  # noqa: F401  (fixtures)
    _fresh_rate_limit_buckets,
    anthropic_server,
    openai_server,
    routes,
)
