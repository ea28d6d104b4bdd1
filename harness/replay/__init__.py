"""Replay and what-if: recorded runs re-decided under today's code and policy (``run``), and a
proposed policy change previewed over a tenant's last runs (``what_if``)."""

from harness.replay.run import replay_run
from harness.replay.what_if import what_if

__all__ = ["replay_run", "what_if"]
