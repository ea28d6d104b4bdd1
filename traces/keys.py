"""Which keys read what older keys wrote: fingerprint search and checkpoint verification.

``HARNESS_FINGERPRINT_KEY`` and ``HARNESS_AUDIT_CHECKPOINT_KEY`` each take several keys,
newest first. The newest (HKDF-derived: ``settings.HARNESS_FINGERPRINT_KEY`` /
``settings.HARNESS_AUDIT_CHECKPOINT_KEY``) writes; searches and verifications try every listed
key, in its HKDF-derived form and in the form used before keys were derived (the key text
itself), so nothing written under an older key or format is lost when a key is rotated.
"""

from __future__ import annotations

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

FINGERPRINT_PURPOSE = "harness.fingerprint.v2"
CHECKPOINT_PURPOSE = "harness.audit-checkpoint.v2"


def hkdf(material: str, purpose: str, length: int = 32) -> bytes:
    """``length`` bytes for ``purpose`` from key material (HKDF-SHA256, RFC 5869); the same
    derivation the settings use for the keys in use (traces imports no other package)."""
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=None, info=purpose.encode()).derive(
        material.encode()
    )


def fingerprint_search_keys() -> list[bytes]:
    """HMAC keys a stored fingerprint may have been made with, the current one first."""
    return _keys(
        settings.HARNESS_FINGERPRINT_KEY,
        getattr(settings, "HARNESS_FINGERPRINT_KEYS", []),
        FINGERPRINT_PURPOSE,
    )


def checkpoint_verify_keys() -> list[bytes]:
    """HMAC keys a chain head or checkpoint may have been signed with, the current one first."""
    return _keys(
        settings.HARNESS_AUDIT_CHECKPOINT_KEY,
        getattr(settings, "HARNESS_AUDIT_CHECKPOINT_KEYS", []),
        CHECKPOINT_PURPOSE,
    )


def _keys(current: str, materials: list[str], purpose: str) -> list[bytes]:
    keys = [current.encode()]
    keys += [hkdf(material, purpose).hex().encode() for material in materials]
    keys += [material.encode() for material in materials]  # before HKDF: the text itself
    return list(dict.fromkeys(keys))
