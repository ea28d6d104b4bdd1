"""The phone validator of the configured regions (``HARNESS_PHONE_REGIONS``).

One validator per set of regions, kept for the process: it compiles its expressions as
numbers of each length come. Read when a masker is made or a number normalised, never at
import. Its own module so that the masker and the kinds (``normalize``) both use it without
importing each other.
"""

from __future__ import annotations

from functools import lru_cache

from traces.masking.phones import DEFAULT_REGIONS, PhoneValidator


@lru_cache(maxsize=16)
def validator_for(regions: tuple[str, ...]) -> PhoneValidator:
    return PhoneValidator(regions)


def phone_regions() -> tuple[str, ...]:
    """``HARNESS_PHONE_REGIONS`` (read when asked, not at import)."""
    from django.conf import settings

    return tuple(getattr(settings, "HARNESS_PHONE_REGIONS", None) or DEFAULT_REGIONS)


def phone_validator() -> PhoneValidator:
    return validator_for(phone_regions())
