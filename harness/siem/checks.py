"""``harness.E120``: a bad ``HARNESS_SIEM_SINKS`` entry stops start-up naming the sink."""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.core.exceptions import ImproperlyConfigured


@checks.register()
def check_siem_sinks(**kwargs: Any) -> list[checks.CheckMessage]:
    from harness.siem.delivery import configured_sinks

    try:
        configured_sinks()
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), id="harness.E120")]
    return []
