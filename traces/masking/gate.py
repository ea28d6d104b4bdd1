"""Which secret detectors could match a text: one pass over every needle.

With the ``hyperscan`` wheel (Linux x86-64) all needles are searched in one pass over the
UTF-8 bytes; without it, by substring tests. Even for a short text one scan (under 1 µs with
the encoding) is cheaper than the two dozen substring tests; a text shorter than every needle
is not looked at.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from traces.masking.detectors import Detector

try:  # pragma: no cover - depends on the platform's wheel
    import hyperscan
except ImportError:  # pragma: no cover
    hyperscan = None  # type: ignore[assignment]


class NeedleGate:
    def __init__(self, detectors: Sequence[Detector]) -> None:
        self.detectors = tuple(detectors)
        self._shortest = min((len(n) for d in self.detectors for n in d.needles), default=0)
        # For the substring tests: each detector, its needles, whether to lower-case first.
        self._needles = tuple(
            (detector, detector.needles, detector.lower) for detector in self.detectors
        )
        self._database = None
        self._local = threading.local()  # a Hyperscan scratch space is per thread
        # Hyperscan compiles no database without expressions: a gate without needles has
        # nothing to scan for (and finds no candidate).
        if hyperscan is not None and self._shortest:
            self._database, self._scratch = self._compile()

    @property
    def engine(self) -> str:
        return "hyperscan" if self._database is not None else "python"

    def _compile(self):  # type: ignore[no-untyped-def]
        expressions, ids, flags = [], [], []
        for index, detector in enumerate(self.detectors):
            for needle in detector.needles:
                expressions.append(_literal(needle))
                ids.append(index)
                flags.append(
                    hyperscan.HS_FLAG_SINGLEMATCH
                    | (hyperscan.HS_FLAG_CASELESS if detector.lower else 0)
                )
        database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        database.compile(expressions=expressions, ids=ids, elements=len(ids), flags=flags)
        return database, hyperscan.Scratch(database)

    def candidates(self, text: str) -> list[Detector]:
        """The detectors whose needles occur in ``text``, in their order."""
        if len(text) < self._shortest:
            return []  # "ok", "yes", "12": no needle fits
        if self._database is not None:
            hits: set[int] = set()
            try:
                scratch = self._local.scratch
            except AttributeError:
                scratch = self._local.scratch = self._scratch.clone()
            # Arguments by position: parsing keywords cost a quarter of the scan of a document.
            # surrogatepass: text that did not come through the boundary (``traces.untrusted``)
            # may hold a lone surrogate; it is scanned, not refused.
            self._database.scan(text.encode("utf-8", "surrogatepass"), _on_match, 0, hits, scratch)
            if not hits:
                return []  # most texts
            return [self.detectors[i] for i in sorted(hits)]
        found = []
        lowered = None
        for detector, needles, lower in self._needles:
            haystack = text
            if lower:
                lowered = lowered if lowered is not None else text.lower()
                haystack = lowered
            for needle in needles:
                if needle in haystack:
                    found.append(detector)
                    break
        return found


def _on_match(index: int, start: int, end: int, flags: int, hits: set[int]) -> None:
    hits.add(index)


def _literal(needle: str) -> bytes:
    return "".join(f"\\x{byte:02x}" for byte in needle.encode()).encode()
