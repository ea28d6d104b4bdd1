"""Checksums and number rules, from ``python-stdnum`` where it has them.

Each check takes the value as written (separators included) and says whether it is a valid
number of its kind. ``python-stdnum`` has no module for the UK National Insurance number, so
its published allocation rules are written out here.
"""

from __future__ import annotations

import re

from stdnum import iban as _iban
from stdnum import luhn as _luhn
from stdnum.br import cpf as _cpf
from stdnum.cn import ric as _ric
from stdnum.es import dni as _dni
from stdnum.es import nie as _nie
from stdnum.in_ import aadhaar as _aadhaar
from stdnum.us import ssn as _ssn

_NOT_DIGIT = re.compile(r"\D")

# Issuer prefixes and lengths of the card schemes people pay with: a Luhn-valid 13-digit
# timestamp or EAN is no card.
_CARD = re.compile(
    r"4(?:\d{12}|\d{15}|\d{18})"  # Visa
    r"|(?:5[1-5]\d\d|2(?:22[1-9]|2[3-9]\d|[3-6]\d\d|7[01]\d|720))\d{12}"  # Mastercard
    r"|3[47]\d{13}"  # American Express
    r"|(?:6011|65\d\d|64[4-9]\d)\d{12,15}"  # Discover
    r"|62\d{14,17}"  # UnionPay
    r"|35(?:2[89]|[3-8]\d)\d{12,15}"  # JCB
    r"|3(?:0[0-5]|[689]\d)\d{11}"  # Diners Club
)


def card_ok(value: str) -> bool:
    digits = _NOT_DIGIT.sub("", value)
    return _CARD.fullmatch(digits) is not None and _luhn.is_valid(digits)


def iban_ok(value: str) -> bool:
    """mod-97 and the country's own length and format (``stdnum.iban``)."""
    return _iban.is_valid(value)


def cn_resident_id_ok(value: str) -> bool:
    return _ric.is_valid(value)


def us_ssn_ok(value: str) -> bool:
    """Not area 000, 666 or 900-999, group 00 or serial 0000, nor a known advertised SSN."""
    return _ssn.is_valid(value)


def es_dni_ok(value: str) -> bool:
    return _dni.is_valid(value)


def es_nie_ok(value: str) -> bool:
    return _nie.is_valid(value)


def in_aadhaar_ok(value: str) -> bool:
    """12 digits, not starting with 0 or 1, not a palindrome, Verhoeff check digit."""
    return _aadhaar.is_valid(value)


def br_cpf_ok(value: str) -> bool:
    return _cpf.is_valid(value)


_NINO = re.compile(r"([A-CEGHJ-PR-TW-Z])([A-CEGHJ-NPR-TW-Z])(\d{6})([A-D])")
_NINO_NEVER = frozenset({"BG", "GB", "KN", "NK", "NT", "TN", "ZZ"})


def uk_nino_ok(value: str) -> bool:
    """HMRC's rules: no D, F, I, Q, U or V in the prefix, no O second, seven prefixes never
    issued, suffix A-D."""
    compact = value.replace(" ", "").upper()
    match = _NINO.fullmatch(compact)
    return match is not None and compact[:2] not in _NINO_NEVER
