"""A worker must survive its broker restarting. kombu 5.7.0 (the newest release) crashes the
worker when a Redis connection is lost while it holds unacknowledged messages: closing the
channel restores them on a connection that is gone already (``QoS.restore_unacked`` →
``_connparams``: ``AttributeError: 'NoneType' object has no attribute 'hostname'``).

The fix here: when the channel's connection is gone, restore nothing and say so. The messages
are not lost: they stay in Redis's ``unacked`` hash, from which any worker restores them after
the visibility timeout (kombu's ``restore_visible``), and the runs they carry are sent again
sooner by the stalled-run sweep (``recover_stalled_runs``: a lease's length); a run is driven
once whatever the number of messages (the claim decides). Installed by ``harness.celery``.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

logger = logging.getLogger(__name__)


def install() -> None:
    try:
        from kombu.transport import redis as kombu_redis
    except ImportError:  # pragma: no cover - the redis extra is a runtime requirement
        return
    original = kombu_redis.QoS.restore_unacked
    if getattr(original, "harness_fixed", False):
        return

    @functools.wraps(original)
    def restore_unacked(self: Any, client: Any = None) -> Any:
        transport = getattr(self.channel, "connection", None)
        if client is None and getattr(transport, "client", None) is None:
            logger.warning(
                "broker connection lost: %d unacknowledged message(s) left in Redis for "
                "restore_visible and the stalled-run sweep",
                len(self._delivered),
            )
            self._delivered.clear()
            return None
        return original(self, client)

    restore_unacked.harness_fixed = True  # type: ignore[attr-defined]
    kombu_redis.QoS.restore_unacked = restore_unacked
