"""Pins: what a reviewer saw of an MCP tool, and how it differs from what its server says now.

A pinned tool file records the description and input schema the server advertised when the
file was reviewed, and ``sha256`` over them (canonical JSON of ``{"description",
"input_schema"}``: sorted keys, no spaces, UTF-8). A tool whose server now advertises anything
else has *drifted*: the call is refused until the file is reviewed and re-pinned.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Pin:
    sha256: str
    description: str
    input_schema: dict[str, Any]

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> Pin:
        return cls(spec["sha256"], spec["description"], spec["input_schema"])

    def to_spec(self) -> dict[str, Any]:
        return {
            "sha256": self.sha256,
            "description": self.description,
            "input_schema": self.input_schema,
        }

    @property
    def consistent(self) -> bool:
        """The recorded hash is the hash of the recorded description and schema."""
        return advertised_sha256(self.description, self.input_schema) == self.sha256


def advertised_sha256(description: str | None, input_schema: dict[str, Any]) -> str:
    payload = {"description": description or "", "input_schema": input_schema}
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def pin_for(description: str | None, input_schema: dict[str, Any]) -> Pin:
    return Pin(advertised_sha256(description, input_schema), description or "", input_schema)


@dataclass(frozen=True)
class Drift:
    """How a pinned tool differs from its server's advertisement now."""

    tool: str
    server: str
    server_tool: str
    kind: str  # "gone" or "changed"
    changed: tuple[str, ...] = ()  # "description", "input_schema"
    diff: str = ""

    def summary(self) -> str:
        if self.kind == "gone":
            return f"server {self.server} no longer offers the tool {self.server_tool!r}"
        return (
            f"server {self.server} now advertises a different {' and '.join(self.changed)} "
            f"for {self.server_tool!r} than the pinned one"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "server_tool": self.server_tool,
            "drift": self.kind,
            "changed": list(self.changed),
            "diff": self.diff,
        }


def compare(
    tool: str, server: str, server_tool: str, pin: Pin, advertised: Any | None
) -> Drift | None:
    """``advertised`` is the server's tool (``description``, ``input_schema``) or None."""
    if advertised is None:
        return Drift(tool, server, server_tool, "gone")
    description = advertised.description or ""
    schema = advertised.input_schema
    if advertised_sha256(description, schema) == pin.sha256:
        return None
    changed = []
    if description != pin.description:
        changed.append("description")
    if _canonical(schema) != _canonical(pin.input_schema):
        changed.append("input_schema")
    diff = "".join(
        difflib.unified_diff(
            _shown(pin.description, pin.input_schema),
            _shown(description, schema),
            fromfile=f"pinned {server}/{server_tool}",
            tofile=f"advertised {server}/{server_tool}",
        )
    )
    return Drift(tool, server, server_tool, "changed", tuple(changed), diff)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _shown(description: str, schema: dict[str, Any]) -> list[str]:
    text = json.dumps(
        {"description": description, "input_schema": schema},
        sort_keys=True,
        indent=2,
        ensure_ascii=False,
    )
    return [line + "\n" for line in text.splitlines()]
