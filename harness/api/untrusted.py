"""The client's side of the boundary for untrusted text: numbers no JSON document may hold.

``BoundedJSONParser`` (``harness.api.parsers``) refuses NUL and lone surrogates in any string;
Python's JSON reader also accepts ``NaN``, ``Infinity`` and ``-Infinity``, which no database
JSON column stores (a free-form member such as a call rule's ``match`` then failed with a 500).
A request holding one is ``400 invalid_request`` naming where. A client's request is refused
rather than normalised (as a model's or a tool's output is, ``traces.untrusted``): the client can
send it again, corrected.
"""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions

from gateway.services import non_finite_path
from harness.api.parsers import BoundedJSONParser


class UntrustedJSONParser(BoundedJSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        data = super().parse(stream, media_type, parser_context)
        where = non_finite_path(data)
        if where is not None:
            raise exceptions.ValidationError(
                {where: "NaN and Infinity are not JSON numbers: send a number or a string."}
            )
        return data
