"""Phone numbers, validated against the ``phonenumbers`` library's metadata.

``phonenumbers.parse`` + ``is_valid_number`` cost ~25 µs a number, more than the rest of the
masking of a typical document. This module compiles the same metadata (the national number
patterns and possible lengths of every number type of a region) into one regular expression
per region and length, so a check is one ``fullmatch``. ``tests/traces/test_masking_phones.py``
holds it to ``phonenumbers.is_valid_number`` on thousands of numbers. For numbers written
nationally, the default regions' rules for each digit count are joined into one expression
(``_Screen``): most digit runs in a text are valid in no region and are turned away by one
match, and the regions a number is valid in are found one match each.

A number written nationally is tried against the default regions in order
(``HARNESS_PHONE_REGIONS``); the first region it is valid in gives its E.164 form. A region
whose national prefix is ``0`` (GB, DE, FR, JP, …) needs it written, as people do; China and
India write mobiles without it.
"""

from __future__ import annotations

import re
import secrets
import unicodedata
from functools import lru_cache
from typing import cast

import phonenumbers
from django.core.exceptions import ImproperlyConfigured
from mypy_extensions import mypyc_attr
from phonenumbers import PhoneMetadata
from phonenumbers.phonenumberutil import COUNTRY_CODE_TO_REGION_CODE

DEFAULT_REGIONS = ("CN", "US", "CA", "GB", "DE", "FR", "ES", "IT", "JP", "IN")
_TYPES = (
    "fixed_line",
    "mobile",
    "toll_free",
    "premium_rate",
    "shared_cost",
    "personal_number",
    "voip",
    "pager",
    "uan",
    "voicemail",
)
# A number written nationally is of a type people write: premium-rate, shared-cost, UAN,
# pager and personal numbers make too many order numbers and timestamps "valid" (Italy's 178…).
_NATIONAL_TYPES = ("fixed_line", "mobile", "toll_free", "voip")
# Regions whose mobiles are written without the national prefix.
_PREFIX_OPTIONAL_FOR_MOBILES = frozenset({"CN", "IN"})


class RegionRules:
    """The valid national significant numbers of one region, by length."""

    def __init__(self, metadata: PhoneMetadata) -> None:
        self.region = metadata.id
        self.country_code = str(metadata.country_code)
        self.national_prefix = metadata.national_prefix or ""
        general = metadata.general_desc
        assert general is not None  # every region's metadata has one
        lengths_default = tuple(general.possible_length or ())
        self._general = re.compile(general.national_number_pattern or r"\d+")
        self._valid = self._compile(metadata, _TYPES, lengths_default)
        self._national = self._compile(metadata, _NATIONAL_TYPES, lengths_default)
        self._mobile = self._compile(metadata, ("mobile",), lengths_default)
        self.nanpa = self.national_prefix == "1"
        # Lengths a number written nationally can have (with or without the prefix).
        self.written_lengths = frozenset(
            length + extra for length in self._national for extra in (0, len(self.national_prefix))
        )

    @staticmethod
    def _compile(
        metadata: PhoneMetadata, types: tuple[str, ...], lengths_default: tuple[int, ...]
    ) -> dict[int, re.Pattern[str]]:
        by_length: dict[int, list[str]] = {}
        for name in types:
            desc = getattr(metadata, name, None)
            if desc is None or not desc.national_number_pattern:
                continue
            lengths = tuple(desc.possible_length or ()) or lengths_default
            if lengths == (-1,):
                continue
            for length in lengths:
                by_length.setdefault(length, []).append(desc.national_number_pattern)
        return {
            length: re.compile("|".join(f"(?:{p})" for p in patterns))
            for length, patterns in by_length.items()
        }

    def valid(self, nsn: str, mobile_only: bool = False, national: bool = False) -> bool:
        table = self._mobile if mobile_only else self._national if national else self._valid
        pattern = table.get(len(nsn))
        return (
            pattern is not None
            and pattern.fullmatch(nsn) is not None
            and self._general.fullmatch(nsn) is not None
        )

    def national_expression(self, length: int, compact: bool) -> str | None:
        """A regular expression for the ``length`` digits that ``national`` accepts (below),
        or None if it accepts none: the same rules, as one pattern."""
        prefix = re.escape(self.national_prefix)
        if self.nanpa:
            if length == 10:
                return self._expression(self._national, 10)
            if length == 11 and not compact:
                national = self._expression(self._national, 10)
                return f"1{national}" if national else None
            return None
        if not prefix:
            return self._expression(self._national, length)
        alternatives = []
        prefixed = self._expression(self._national, length - len(self.national_prefix))
        if prefixed:
            alternatives.append(f"{prefix}{prefixed}")
        if self.region in _PREFIX_OPTIONAL_FOR_MOBILES:
            mobile = self._expression(self._mobile, length)
            if mobile:
                alternatives.append(f"(?!{prefix}){mobile}")
        return "|".join(f"(?:{a})" for a in alternatives) or None

    def national_e164(self, digits: str, compact: bool) -> str:
        """The E.164 form ``national`` gives ``digits`` (which ``national_expression``
        accepts), without checking them again."""
        if self.nanpa:
            return f"+{self.country_code}{digits[-10:]}"
        prefix = self.national_prefix
        if prefix and digits.startswith(prefix):
            return f"+{self.country_code}{digits[len(prefix) :]}"
        return f"+{self.country_code}{digits}"

    def _expression(self, table: dict[int, re.Pattern[str]], length: int) -> str | None:
        """``valid`` for numbers of ``length`` digits, as an expression to embed."""
        pattern = table.get(length)
        if pattern is None:
            return None
        return rf"(?=(?:{self._general.pattern})\Z)(?:{pattern.pattern})"

    def national(self, digits: str, compact: bool = False) -> str | None:
        """The E.164 form of ``digits`` written nationally in this region, or None.
        ``compact``: written without separators (then NANPA's optional 1 is not taken)."""
        prefix = self.national_prefix
        if self.nanpa:  # the leading 1 is optional, but not in a bare run of 11 digits
            if len(digits) == 11 and not compact and digits[0] == "1":
                digits = digits[1:]
            if len(digits) != 10:
                return None
            return f"+{self.country_code}{digits}" if self.valid(digits, national=True) else None
        if prefix and digits.startswith(prefix):
            nsn = digits[len(prefix) :]
            return f"+{self.country_code}{nsn}" if self.valid(nsn, national=True) else None
        if not prefix:
            return f"+{self.country_code}{digits}" if self.valid(digits, national=True) else None
        if self.region in _PREFIX_OPTIONAL_FOR_MOBILES and self.valid(digits, mobile_only=True):
            return f"+{self.country_code}{digits}"
        return None


@lru_cache(maxsize=512)
def rules_for_region(region: str) -> RegionRules | None:
    metadata = PhoneMetadata.metadata_for_region(region.upper())
    return RegionRules(metadata) if metadata is not None else None


@lru_cache(maxsize=512)
def rules_for_country_code(code: int) -> tuple[RegionRules, ...]:
    regions = COUNTRY_CODE_TO_REGION_CODE.get(code, ())
    return tuple(r for r in (rules_for_region(x) for x in regions if x != "001") if r)


# A plain class when compiled (``traces.masking.compiled``), not a native one: its methods are
# compiled all the same, but they are looked up on the class, so that what replaces one (as
# tests do, to count the verdicts a masker remembers) is what runs.
@mypyc_attr(native_class=False)
class PhoneValidator:
    """Phones written nationally (default regions) or internationally (any country)."""

    def __init__(self, regions: tuple[str, ...] = DEFAULT_REGIONS) -> None:
        unknown = [r for r in regions if rules_for_region(r) is None]
        if unknown:
            raise ImproperlyConfigured(
                f"HARNESS_PHONE_REGIONS: unknown phone regions: {', '.join(unknown)}"
            )
        self.regions = tuple(dict.fromkeys(r.upper() for r in regions))
        # None for none of them: unknown regions were refused above.
        self._rules = cast(
            "tuple[RegionRules, ...]", tuple(rules_for_region(r) for r in self.regions)
        )
        self._by_length: dict[int, tuple[RegionRules, ...]] = {
            length: tuple(r for r in self._rules if length in r.written_lengths)
            for length in range(4, 18)
        }
        self._screens: dict[tuple[int, bool], _Screen | None] = {}

    def national(self, digits: str, compact: bool = False, written: str = "") -> str | None:
        """The E.164 form of a number written nationally. When it is valid in several default
        regions (``06 12 34 56 78`` is French and German), the region that formats it the way
        it is ``written`` wins, then the first region in order.

        The regions are tried in order and the first that formats the number as written is
        taken at once: the regions after it could not change the answer, so they are not
        looked up (``tests/traces/test_masking_speed.py`` holds this to looking up every
        region first)."""
        if not digits.isascii():
            digits = _ascii_digits(digits)
        screen = self._screen(len(digits), compact)
        index = screen.first(digits, 0) if screen else None
        if index is None:
            return None  # most digit runs: valid in no region, one match
        rules = screen.regions[index]  # type: ignore[union-attr]
        e164 = rules.national_e164(digits, compact)
        if not written or compact:
            return e164
        shape = _shape_of(written)
        found = [(rules, e164)]
        shapes = [_written_shape(rules, e164, digits)]
        if shapes[0] == shape:
            return e164
        index = screen.first(digits, index + 1)  # type: ignore[union-attr]
        while index is not None:
            rules = screen.regions[index]  # type: ignore[union-attr]
            e164 = rules.national_e164(digits, compact)
            if all(e164 != f for _, f in found):  # the US and Canada: one country code
                formatted = _written_shape(rules, e164, digits)
                if formatted == shape:
                    return e164
                found.append((rules, e164))
                shapes.append(formatted)
            index = screen.first(digits, index + 1)  # type: ignore[union-attr]
        if len(found) > 1:
            # No region formats it as written: the first after the first whose groups of
            # digits are those written.
            groups = _groups(shape)
            for (_, e164), formatted in zip(found[1:], shapes[1:], strict=True):
                if _groups(formatted) == groups:
                    return e164
        return found[0][1]

    def grouped_as_formatted(self, e164: str, written: str) -> bool:
        """Whether the groups of digits ``written`` are those of the number ``e164`` formatted
        nationally or internationally (``020 7946 0958``, ``+44 20 7946 0958``), or, written
        nationally, of its digits as formatted in a default region that reads them (a number
        valid in several is taken for the first region's): what a phone read out of a longer
        run of numbers must show, where any digits valid somewhere would pass for one."""
        # "0044 20 7946 0958": the "00" before the country code is no group of the number.
        groups = _groups(_shape_of(written.removeprefix("00")))
        numbers = [phonenumbers.parse(e164)]
        if not written.startswith(("+", "00")):
            for region in self.regions:
                try:
                    number = phonenumbers.parse(written, region)
                except phonenumbers.NumberParseException:
                    continue
                if phonenumbers.is_valid_number(number):
                    numbers.append(number)
        return any(
            groups == _groups(_shape_of(phonenumbers.format_number(n, f)))
            for n in numbers
            for f in (
                phonenumbers.PhoneNumberFormat.NATIONAL,
                phonenumbers.PhoneNumberFormat.INTERNATIONAL,
            )
        )

    def _screen(self, length: int, compact: bool) -> _Screen | None:
        key = (length, compact)
        try:
            return self._screens[key]
        except KeyError:
            pass
        by_region = [
            (rules, e)
            for rules in self._by_length.get(length, ())
            if (e := rules.national_expression(length, compact)) is not None
        ]
        screen = self._screens[key] = _Screen(by_region) if by_region else None
        return screen

    def national_candidates(self, digits: str) -> list[str]:
        """Every E.164 form ``digits`` can have, written nationally in a default region."""
        found = []
        if not digits.isascii():
            digits = _ascii_digits(digits)
        for rules in self._by_length.get(len(digits), ()):
            for compact in (False, True):
                e164 = rules.national(digits, compact)
                if e164 and e164 not in found:
                    found.append(e164)
        return found

    @staticmethod
    def international(digits: str) -> str | None:
        """``digits`` after the ``+`` (or ``00``): country code then national number."""
        if not digits.isascii():
            digits = _ascii_digits(digits)
        for size in (1, 2, 3):
            code = int(digits[:size]) if len(digits) > size else 0
            regions = rules_for_country_code(code) if code else ()
            if not regions:
                continue
            nsn = digits[size:]
            for rules in regions:
                if rules.valid(nsn):
                    return f"+{code}{nsn}"
                # "+44 (0)20 …": the national prefix written after the country code.
                prefix = rules.national_prefix
                if prefix == "0" and nsn.startswith(prefix) and rules.valid(nsn[len(prefix) :]):
                    return f"+{code}{nsn[len(prefix) :]}"
            return None
        return None

    def e164(self, value: str) -> str | None:
        """The E.164 form of a phone number written any way, or None if it is none."""
        digits = "".join(c for c in value if c.isdigit())
        stripped = value.lstrip()
        if stripped.startswith("+"):
            return self.international(digits)
        if stripped.startswith("00"):
            return self.international(digits[2:])
        return self.national(digits, compact=digits == stripped, written=stripped)


class _Screen:
    """What the default regions accept of numbers of one length written nationally
    (``RegionRules.national_expression``), as one expression per suffix of the regions: the
    first region a number is valid in, then the next one after it, each in one match."""

    def __init__(self, by_region: list[tuple[RegionRules, str]]) -> None:
        self.regions = tuple(rules for rules, _ in by_region)
        self._expressions = tuple(e for _, e in by_region)
        self._chain: list[re.Pattern[str] | None] = [None] * len(by_region)

    def first(self, digits: str, start: int) -> int | None:
        """The index of the first region from ``start`` on that accepts ``digits``."""
        if start >= len(self._chain):
            return None
        pattern = self._chain[start]
        if pattern is None:
            # An empty group named after each region marks the alternative that matched.
            pattern = self._chain[start] = re.compile(
                "|".join(
                    f"(?:{e})(?P<r{i}>)" for i, e in enumerate(self._expressions[start:], start)
                )
            )
        match = pattern.fullmatch(digits)
        return None if match is None else int(match.lastgroup[1:])  # type: ignore[index]


def _ascii_digits(digits: str) -> str:
    """``digits`` in ASCII. The finder's runs and ``e164`` take any decimal digit (full-width
    ones in CJK text, U+FF10 to U+FF19), but the metadata's patterns and national prefixes
    are ASCII: a number written in other digits would be valid nowhere, and kept in clear."""
    return "".join(str(unicodedata.decimal(c, c)) for c in digits)


def _shape_of(written: str) -> str:
    """``written`` with its digits as ``d`` (``06 12 34 56 78`` → ``dd dd dd dd dd``)."""
    written = written.strip()
    return written.translate(_DIGIT_SHAPE) if written.isascii() else _SHAPE.sub("d", written)


def _written_shape(rules: RegionRules, e164: str, digits: str) -> str:
    """How ``rules``' region writes the number ``e164`` nationally, digits as ``d``, without
    the national prefix if ``digits`` were written without it."""
    formatted = _national_shape(rules.region, e164[1 + len(rules.country_code) :])
    prefix = rules.national_prefix
    if prefix and not rules.nanpa and not digits.startswith(prefix):
        formatted = formatted.replace("d" * len(prefix), "", 1)  # written without it
    return formatted


_DIGIT_SHAPE = str.maketrans("0123456789", "dddddddddd")


def _groups(shape: str) -> list[str]:
    """The groups of digits of a shape (``dd dd dd`` → three): few shapes recur, so cached."""
    groups = _GROUPS_OF.get(shape)
    if groups is None:
        if len(_GROUPS_OF) > 4096:
            _GROUPS_OF.clear()
        groups = _GROUPS_OF[shape] = _GROUPS.findall(shape)
    return groups


_GROUPS_OF: dict[str, list[str]] = {}


def _national_shape(region: str, nsn: str) -> str:
    """How the region writes ``nsn`` nationally, digits as ``d`` (``0d dd dd dd dd``). The
    format depends on the leading digits and the length only, so it is cached by those, for
    the process: under a keyed hash of them (SipHash, keyed by the process's secret and
    ``_SHAPE_SALT``), never the digits themselves, which would keep the first six digits of
    every tenant's numbers in memory. Two keys with one hash (one chance in 2**64 a pair)
    would give a number another format's shape, which only ever decides which default region
    a number valid in several is taken for."""
    key = hash(f"{_SHAPE_SALT}{region}{len(nsn)}:{nsn[:6]}")
    shape = _SHAPES.get(key)
    if shape is None:
        if len(_SHAPES) > 65536:
            _SHAPES.clear()
        shape = _SHAPES[key] = _shape_for(region, nsn)
    return shape


_SHAPES: dict[int, str] = {}
# Random per process: with PYTHONHASHSEED set, the hash is keyed by this alone.
_SHAPE_SALT = secrets.token_hex(16)


def _shape_for(region: str, nsn: str) -> str:
    metadata = PhoneMetadata.metadata_for_region(region)
    assert metadata is not None  # a region of a validator: rules_for_region found it
    number = phonenumbers.PhoneNumber(
        country_code=metadata.country_code,
        national_number=int(nsn),
        italian_leading_zero=nsn.startswith("0") or None,
        number_of_leading_zeros=(len(nsn) - len(nsn.lstrip("0"))) or None,
    )
    formatted = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.NATIONAL)
    return _SHAPE.sub("d", formatted)


_SHAPE = re.compile(r"\d")
_GROUPS = re.compile(r"d+")


def library_e164(value: str, region: str) -> str | None:
    """The library's own verdict (slow; for tests and declared fields)."""
    try:
        number = phonenumbers.parse(value, region)
    except phonenumbers.NumberParseException:
        return None
    if not phonenumbers.is_valid_number(number):
        return None
    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
