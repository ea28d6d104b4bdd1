"""Django's admin autodiscovery imports ``<app>.admin``: the console's model admins live in
``harness.console.admin``."""

from harness.console import accounts, admin  # noqa: F401
from harness.siem import admin as siem_admin  # noqa: F401
