"""Masking of personal data and secrets before anything is stored (see ``kinds`` for what each
kind becomes, ``detectors`` for what is found in free text)."""

from traces.masking.kinds import DECLARABLE_KINDS, FINGERPRINTED_KINDS, fingerprint, normalize
from traces.masking.masker import Masker
from traces.masking.pointers import under

__all__ = [
    "DECLARABLE_KINDS",
    "FINGERPRINTED_KINDS",
    "Masker",
    "fingerprint",
    "normalize",
    "under",
]
