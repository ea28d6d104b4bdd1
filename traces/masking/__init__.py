"""Masking of personal data and secrets before anything is stored (see ``kinds`` for what each
kind becomes, ``detectors`` for what is found in free text)."""

from traces.masking import compiled

# Before anything else of the package is imported: it decides whether the hot modules are the
# compiled ones (``compiled``), so the imports below come after it.
compiled.install()

from traces.masking.kinds import (  # noqa: E402
    DECLARABLE_KINDS,
    FINGERPRINTED_KINDS,
    fingerprint,
    normalize,
)
from traces.masking.masker import Masker  # noqa: E402
from traces.masking.pointers import under  # noqa: E402

__all__ = [
    "DECLARABLE_KINDS",
    "FINGERPRINTED_KINDS",
    "Masker",
    "fingerprint",
    "normalize",
    "under",
]
