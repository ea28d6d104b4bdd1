"""The one base of every domain error of Harness.

Each app has its own code ``StrEnum`` and error classes (``harness.errors``, ``policy.errors``,
…); they all derive from ``DomainError``, so the API renders any of them as
``{"error": {"code", "message", "details"}}`` with its status and headers by one
``isinstance`` check (``harness.api.exceptions``). A leaf module: it imports nothing of ours,
so the lowest app may import it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar


class DomainError(Exception):
    """A refusal or fault with a stable ``code``, an HTTP ``http_status``, a ``message`` for
    people, ``details`` for programs and response ``headers`` (``Retry-After`` on a 429)."""

    code: StrEnum
    http_status: int = 400
    # False for faults of the server's own files (an agent or tool file): an API client gets
    # ``internal_error`` with the request id, the log keeps the message (it names paths).
    exposed: ClassVar[bool] = True

    def __init__(
        self,
        message: str,
        details: dict[str, Any] | None = None,
        *,
        code: StrEnum | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.details = details or {}
        self.headers: dict[str, str] = headers or {}
