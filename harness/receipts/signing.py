"""The keys that sign run receipts, and the signature.

``HARNESS_RECEIPT_SIGNING_KEY`` (or ``…_FILE``) holds PEM blocks, newest first: the first, an
Ed25519 private key, signs; every later block (private or public key) is an earlier key whose
public half stays published, so receipts it signed still verify. Rotating: put a new private key
first, and keep the old one after it, best as its public half only
(``openssl pkey -pubout``). Unset: a key generated once under ``var/`` (demo and development
only: each machine would have its own).

Key ids are RFC 7638 thumbprints of the public key's JWK, so a verifier can recompute them.
The signature covers the receipt's RFC 8785 (JCS) canonical bytes: the whole document with
``signature.value`` left out (so the key id and algorithm are signed too).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import rfc8785
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

ALGORITHM = "EdDSA"
DEV_KEY_FILE = "receipt-signing-key.pem"
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z ]+)-----.+?-----END \1-----", re.DOTALL)


@dataclass(frozen=True)
class ReceiptKeys:
    signing: Ed25519PrivateKey
    kid: str
    published: tuple[tuple[str, Ed25519PublicKey], ...]  # (kid, key), the signing key first


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def public_jwk(key: Ed25519PublicKey) -> dict[str, str]:
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return {"crv": "Ed25519", "kty": "OKP", "x": b64url(raw)}


def key_id(key: Ed25519PublicKey) -> str:
    """RFC 7638 thumbprint: SHA-256 of the JWK's required members in JCS form."""
    return b64url(hashlib.sha256(rfc8785.dumps(public_jwk(key))).digest())


def receipt_keys() -> ReceiptKeys:
    """The signing key and every published key, from the setting (or the generated dev key)."""
    return _parse(settings.HARNESS_RECEIPT_SIGNING_KEY or _dev_key_pem())


def published_keys() -> dict[str, Any]:
    """The JWK set served at ``/.well-known/harness-receipt-keys``."""
    keys = receipt_keys()
    return {
        "keys": [
            {
                **public_jwk(key),
                "kid": kid,
                "alg": ALGORITHM,
                "use": "sig",
                "status": "current" if kid == keys.kid else "retired",
            }
            for kid, key in keys.published
        ]
    }


def sign(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with ``signature`` {alg, kid, value}: Ed25519 over the JCS bytes of the
    document whose signature has no value yet."""
    keys = receipt_keys()
    unsigned = {**document, "signature": {"alg": ALGORITHM, "kid": keys.kid}}
    value = keys.signing.sign(rfc8785.dumps(unsigned))
    return {**unsigned, "signature": {**unsigned["signature"], "value": b64url(value)}}


@lru_cache(maxsize=4)
def _parse(text: str) -> ReceiptKeys:
    blocks = [match.group(0) for match in _PEM_BLOCK.finditer(text)]
    if not blocks:
        raise ImproperlyConfigured(
            "HARNESS_RECEIPT_SIGNING_KEY holds no PEM block; give an Ed25519 private key "
            "(openssl genpkey -algorithm ed25519)."
        )
    keys = [_load(block, index) for index, block in enumerate(blocks)]
    signing = keys[0]
    if not isinstance(signing, Ed25519PrivateKey):
        raise ImproperlyConfigured(
            "HARNESS_RECEIPT_SIGNING_KEY: the first PEM block must be the Ed25519 private key "
            "that signs (public keys of earlier keys go after it)."
        )
    publics = [key.public_key() if isinstance(key, Ed25519PrivateKey) else key for key in keys]
    published = tuple(dict((key_id(key), key) for key in publics).items())
    return ReceiptKeys(signing=signing, kid=published[0][0], published=published)


def _load(block: str, index: int) -> Ed25519PrivateKey | Ed25519PublicKey:
    try:
        if "PRIVATE KEY" in block.split("\n", 1)[0]:
            key: Any = serialization.load_pem_private_key(block.encode(), password=None)
        else:
            key = serialization.load_pem_public_key(block.encode())
    except ValueError as exc:
        raise ImproperlyConfigured(
            f"HARNESS_RECEIPT_SIGNING_KEY: PEM block {index + 1} cannot be read: {exc}"
        ) from exc
    if not isinstance(key, Ed25519PrivateKey | Ed25519PublicKey):
        raise ImproperlyConfigured(
            f"HARNESS_RECEIPT_SIGNING_KEY: PEM block {index + 1} is not an Ed25519 key."
        )
    return key


def _dev_key_pem() -> str:
    """A key generated once per checkout under ``var/`` (readable by its owner only)."""
    path = Path(settings.VAR_DIR) / DEV_KEY_FILE
    if not path.exists():
        pem = Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        # Written whole under a private name, then linked in place: a concurrent process
        # either wins the link or reads the winner's complete file.
        draft = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(pem)
        try:
            os.link(draft, path)
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    return path.read_text(encoding="utf-8")
