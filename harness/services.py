"""Tenants' API keys, as callers imported them before ``harness.api_keys`` (runs:
``harness.runs``)."""

from harness.api_keys import (  # noqa: F401 (re-exported for callers of the old name)
    API_KEY_PREFIX,
    IssuedKey,
    authenticate_api_key,
    create_api_key,
)
