"""Checksums and number rules, from ``python-stdnum`` where it has them.

Each check takes the value as written (separators included) and says whether it is a valid
number of its kind. For values in ASCII (nearly all) the library's checksum functions are
called on the value made compact here: its ``is_valid`` first maps every character through a
Unicode table and builds strings a character at a time, several times the cost of the check
itself. Other values go to ``is_valid``, which reads fullwidth digits as ASCII ones.
``tests/traces/test_masking_speed.py`` holds each to the library's answer. ``python-stdnum``
has no module for the UK National Insurance number, so its published allocation rules are
written out here.
"""

from __future__ import annotations

import datetime
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from stdnum import iban as _iban
from stdnum import luhn as _luhn
from stdnum import verhoeff as _verhoeff
from stdnum.br import cpf as _cpf
from stdnum.cn import ric as _ric
from stdnum.es import dni as _dni
from stdnum.es import nie as _nie
from stdnum.in_ import aadhaar as _aadhaar
from stdnum.iso7064 import mod_97_10 as _mod_97_10
from stdnum.us import ssn as _ssn
from stdnum.util import get_cc_module

_NOT_DIGIT = re.compile(r"\D")

# Issuer prefixes and lengths of the card schemes people pay with: a Luhn-valid 13-digit
# timestamp or EAN is no card.
_CARD = re.compile(
    r"4(?:\d{15}|\d{18})"  # Visa (13-digit cards are no longer issued; EAN-13s are common)
    r"|(?:5[1-5]\d\d|2(?:22[1-9]|2[3-9]\d|[3-6]\d\d|7[01]\d|720))\d{12}"  # Mastercard
    r"|3[47]\d{13}"  # American Express
    r"|(?:6011|65\d\d|64[4-9]\d)\d{12,15}"  # Discover
    r"|62\d{14,17}"  # UnionPay
    r"|35(?:2[89]|[3-8]\d)\d{12,15}"  # JCB
    r"|3(?:0[0-5]|[689]\d)\d{11}"  # Diners Club
)


def card_ok(value: str) -> bool:
    digits = value if value.isdigit() else _NOT_DIGIT.sub("", value)
    return _CARD.fullmatch(digits) is not None and luhn_ok(digits)


def luhn_ok(digits: str) -> bool:
    """``stdnum.luhn.is_valid`` for a string of ASCII digits (others go to the library, where
    digits other than ASCII fail): the library's sum, every second digit from the right doubled
    and its digits added, computed in C (a sixth of the library's generator's cost)."""
    if not digits.isascii() or not digits.isdigit():
        return _luhn.is_valid(digits)
    reverse = digits[::-1]
    summed = reverse[::2] + reverse[1::2].translate(_LUHN_DOUBLED)
    return (sum(summed.encode()) - 48 * len(summed)) % 10 == 0  # 48: ord("0")


# A digit doubled, then the digits of that added (Luhn): one digit again.
_LUHN_DOUBLED = str.maketrans("0123456789", "0246813579")


def _iban_structures() -> dict[str, re.Pattern[str]]:
    """The registry's BBAN structure per country (``stdnum``'s iban.dat), as expressions."""
    classes = {"n": "[0-9]", "a": "[A-Z]", "c": "[A-Za-z0-9]"}
    structures = {}
    for line in Path(_iban.__file__).with_name("iban.dat").read_text().splitlines():
        bban = re.search(r'bban="([^"]+)"', line)
        if line[:2].isalpha() and bban:
            parts = re.findall(r"(\d+)!([nac])", bban.group(1))
            structures[line[:2]] = re.compile("".join(f"{classes[c]}{{{n}}}" for n, c in parts))
    return structures


_IBAN_STRUCTURES = _iban_structures()
IBAN_COUNTRIES = frozenset(_IBAN_STRUCTURES)


@lru_cache(maxsize=128)
def _iban_country_module(country: str) -> Any:
    return get_cc_module(country.lower(), "iban")


def iban_ok(value: str) -> bool:
    """What ``stdnum.iban.is_valid`` checks (mod-97, the country's length and format from the
    IBAN registry, the country's own check where stdnum has one), in the cheapest order:
    tracking numbers (``YT…``, ``JD…``) are rejected by their country code at once, and the
    library's per-call registry lookup is replaced by a table built from the same file."""
    compact = value.replace(" ", "")
    structure = _IBAN_STRUCTURES.get(compact[:2])
    if structure is None or structure.fullmatch(compact, 4) is None:
        return False
    if not _mod_97_10_ok(compact[4:] + compact[:4]):
        return False
    module = _iban_country_module(compact[:2])
    return module is None or module.is_valid(compact)


def _mod_97_10_ok(number: str) -> bool:
    """``stdnum.iso7064.mod_97_10.is_valid``: the library's checksum, on a value already
    compact (its ``is_valid`` cleans it again first)."""
    if not (number.isascii() and number.isalnum()):
        return _mod_97_10.is_valid(number)
    # The library's checksum (each character's value in base 36, written in decimal, mod 97)
    # with the characters replaced by one translation instead of a generator.
    return int(number.translate(_BASE_36_IN_DECIMAL)) % 97 == 1


_BASE_36_IN_DECIMAL = str.maketrans(
    {c: str(int(c, 36)) for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"}
)


def cn_resident_id_ok(value: str) -> bool:
    """GB 11643: the check digit and the birth date as ``stdnum.cn.ric`` checks them, and an
    area code that is or was a county's in GB/T 2260 (stdnum's table), whatever the birth
    year. ``stdnum.cn.ric.get_birth_place`` also wants the county to exist in the birth year,
    but the code is the household registration where the ID was issued, not the birthplace at
    birth: everyone registered in Pudong (310115, created 1993) and born before carries one.
    The birth date is read directly (the library cleans the number again first)."""
    compact = value.replace(" ", "").upper()
    if len(compact) != 18 or not compact[:17].isdigit():
        return False
    if _ric.calc_check_digit(compact) != compact[17]:
        return False
    try:  # _ric.get_birth_date, on a number already compact
        datetime.date(int(compact[6:10]), int(compact[10:12]), int(compact[12:14]))
    except ValueError:
        return False
    return compact[:6] in CN_AREAS


def _cn_areas() -> frozenset[str]:
    """Every six-digit code stdnum's GB/T 2260 table names a county for, in any year (its
    ``[1993-]`` and ``[-2010]`` marks are the years a code was in use). A code the table knows
    only as a province or prefecture (``110001``) names no county and is not one."""
    from stdnum import numdb

    areas: set[str] = set()
    for length, low, high, _, counties in numdb.get("cn/loc").prefixes:
        for county_length, county_low, county_high, props, _ in counties:
            if "county" not in props:
                continue
            for province in range(int(low), int(high) + 1):
                for county in range(int(county_low), int(county_high) + 1):
                    areas.add(f"{province:0{length}d}{county:0{county_length}d}")
    return frozenset(areas)


CN_AREAS = _cn_areas()


def us_ssn_ok(value: str) -> bool:
    """Not area 000, 666 or 900-999, group 00 or serial 0000, nor a known advertised SSN:
    ``stdnum.us.ssn``'s rules, on nine ASCII digits (the rest goes to the library)."""
    digits = _NOT_DIGIT.sub("", value)
    if len(digits) != 9 or not digits.isascii():
        return _ssn.is_valid(digits)
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    if area in ("000", "666") or area[0] == "9" or group == "00" or serial == "0000":
        return False
    return f"{area}-{group}-{serial}" not in _ssn._ssn_blacklist


def es_dni_ok(value: str) -> bool:
    if not value.isascii():
        return _dni.is_valid(value)
    number = value.replace(" ", "").replace("-", "").upper().strip()
    return (
        len(number) == 9
        and _ascii_digits(number[:-1])
        and _dni.calc_check_digit(number[:-1]) == number[-1]
    )


def es_nie_ok(value: str) -> bool:
    if not value.isascii():
        return _nie.is_valid(value)
    number = value.replace(" ", "").replace("-", "").upper().strip()
    return (
        len(number) == 9
        and number[0] in "XYZ"
        and _ascii_digits(number[1:-1])
        and _dni.calc_check_digit(str("XYZ".index(number[0])) + number[1:-1]) == number[-1]
    )


def in_aadhaar_ok(value: str) -> bool:
    """12 digits, not starting with 0 or 1, not a palindrome, Verhoeff check digit."""
    if not value.isascii():
        return _aadhaar.is_valid(value)
    number = value.replace(" ", "").replace("-", "").strip()
    if len(number) != 12 or not _ascii_digits(number) or number[0] in "01":
        return False
    if number == number[::-1]:
        return False
    return _verhoeff.checksum(number) == 0


def br_cpf_ok(value: str) -> bool:
    if not value.isascii():
        return _cpf.is_valid(value)
    number = value.replace(" ", "").replace("-", "").replace(".", "").strip()
    if len(number) != 11 or not _ascii_digits(number) or int(number) <= 0:
        return False
    return _cpf._calc_check_digits(number) == number[-2:]


def _ascii_digits(value: str) -> bool:
    """What ``stdnum.util.isdigits`` accepts: ASCII digits only, at least one."""
    return value.isascii() and value.isdigit()


_NINO = re.compile(r"([A-CEGHJ-PR-TW-Z])([A-CEGHJ-NPR-TW-Z])(\d{6})([A-D])")
_NINO_NEVER = frozenset({"BG", "GB", "KN", "NK", "NT", "TN", "ZZ"})


def uk_nino_ok(value: str) -> bool:
    """HMRC's rules: no D, F, I, Q, U or V in the prefix, no O second, seven prefixes never
    issued, suffix A-D."""
    compact = value.replace(" ", "").upper()
    match = _NINO.fullmatch(compact)
    return match is not None and compact[:2] not in _NINO_NEVER
