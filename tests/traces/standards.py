"""Valid values generated from the standards themselves (``hypothesis`` strategies), and the
contexts a run's text puts them in: what the masking recall tests draw from.

Nothing here comes from the masker: the IBAN registry and the national checks are
``python-stdnum``'s (``iban.dat``, ``stdnum.<cc>.iban``), the county codes are its GB/T 2260
table, the card ranges are the schemes' published IIN ranges, the phones ``phonenumbers``'
example numbers (with their last digits varied, kept where the library says they are still
valid numbers of the same type)."""

from __future__ import annotations

import datetime
import json
import re
import string
from collections.abc import Callable
from pathlib import Path

import phonenumbers
from hypothesis import assume
from hypothesis import strategies as st
from stdnum import iban, luhn, numdb
from stdnum.es import ccc
from stdnum.no import kontonr

# --- IBAN ------------------------------------------------------------------------------


def iban_registry() -> dict[str, list[tuple[int, str]]]:
    """Each country's BBAN structure from the IBAN registry as stdnum ships it:
    ``[(length, "n" | "a" | "c"), …]``."""
    registry = {}
    for line in Path(iban.__file__).with_name("iban.dat").read_text().splitlines():
        bban = re.search(r'bban="([^"]+)"', line)
        if line[:2].isalpha() and bban:
            registry[line[:2]] = [(int(n), c) for n, c in re.findall(r"(\d+)!([nac])", bban[1])]
    return registry


IBAN_REGISTRY = iban_registry()
_ALPHABETS = {"n": "0123456789", "a": "ABCDEFGHIJKLMNOPQRSTUVWXYZ"}
_ALPHABETS["c"] = _ALPHABETS["n"] + _ALPHABETS["a"]
_BELGIAN_BANKS = [
    f"{code:03d}"
    for _, low, high, props, _ in numdb.get("be/banks").prefixes
    if props
    for code in range(int(low), int(high) + 1)
]
# Italy's and San Marino's CIN (the BBAN's first letter): odd positions' values.
_CIN_ODD = [
    1,
    0,
    5,
    7,
    9,
    13,
    15,
    17,
    19,
    21,
    2,
    4,
    18,
    20,
    11,
    3,
    6,
    8,
    12,
    14,
    16,
    10,
    22,
    25,
    24,
    23,
]


def _cin(rest: str) -> str:
    total = 0
    for position, char in enumerate(rest):
        value = int(char) if char.isdigit() else ord(char) - ord("A")
        total += _CIN_ODD[value] if position % 2 == 0 else value
    return chr(ord("A") + total % 26)


def _with_national_checks(country: str, bban: str) -> str:
    """The BBAN with its national check digits, where the country has them."""
    if country == "BE":  # a known bank, then mod 97 of the rest
        body = bban[:10]
        check = int(body) % 97 or 97
        return f"{body}{check:02d}"
    if country == "ES":  # the CCC's two check digits
        return bban[:8] + ccc.calc_check_digits(bban) + bban[10:]
    if country == "ME":  # the whole BBAN is 1 mod 97
        body = bban[:-2]
        return f"{body}{(1 - int(body) * 100) % 97:02d}"
    if country == "NO":  # the account number's mod-11 digit
        check = kontonr._calc_check_digit(bban[:-1])
        assume(len(check) == 1 and check.isdigit() and kontonr.is_valid(bban[:-1] + check))
        return bban[:-1] + check
    if country in ("IT", "SM"):  # the CIN over ABI, CAB and account
        return _cin(bban[1:]) + bban[1:]
    return bban


@st.composite
def ibans(draw: st.DrawFn, country: str) -> str:
    """A valid IBAN of ``country`` (compact), valid by ``stdnum.iban``."""
    parts = []
    for length, kind in IBAN_REGISTRY[country]:
        parts.append(draw(st.text(_ALPHABETS[kind], min_size=length, max_size=length)))
    bban = "".join(parts)
    if country == "BE":
        bban = draw(st.sampled_from(_BELGIAN_BANKS)) + bban[3:]
    bban = _with_national_checks(country, bban)
    value = country + iban.calc_check_digits(country + "00" + bban) + bban
    assert iban.is_valid(value), value
    return value


def grouped_in_fours(value: str) -> str:
    return " ".join(value[i : i + 4] for i in range(0, len(value), 4))


# --- cards -----------------------------------------------------------------------------

# (brand, IIN ranges as (low, high) prefixes of equal length, lengths)
CARD_BRANDS = [
    ("visa", [("4", "4")], [16, 19]),
    ("mastercard", [("51", "55"), ("2221", "2720")], [16]),
    ("amex", [("34", "34"), ("37", "37")], [15]),
    ("discover", [("6011", "6011"), ("644", "649"), ("65", "65")], [16, 17, 18, 19]),
    ("unionpay", [("62", "62")], [16, 17, 18, 19]),
    ("jcb", [("3528", "3589")], [16, 17, 18, 19]),
    ("diners", [("300", "305"), ("36", "36"), ("38", "39")], [14]),
]


@st.composite
def cards(draw: st.DrawFn, brand: str) -> str:
    """A Luhn-valid card number of ``brand`` (digits only)."""
    _, ranges, lengths = next(b for b in CARD_BRANDS if b[0] == brand)
    low, high = draw(st.sampled_from(ranges))
    prefix = str(draw(st.integers(int(low), int(high)))).zfill(len(low))
    length = draw(st.sampled_from(lengths))
    body = prefix + draw(
        st.text("0123456789", min_size=length - len(prefix) - 1, max_size=length - len(prefix) - 1)
    )
    return body + luhn.calc_check_digit(body)


def card_groupings(number: str) -> list[str]:
    """The customary ways of writing ``number``: plain, and its length's grouping (4-4-4-4
    and 4-4-4-4-3 for 16 to 19 digits, 4-6-5 for 15, 4-6-4 for 14) with spaces or dashes."""
    if len(number) == 15 or len(number) == 14:
        groups = [number[:4], number[4:10], number[10:]]
    else:
        groups = [number[i : i + 4] for i in range(0, 16, 4)] + (
            [number[16:]] if number[16:] else []
        )
    return [number, " ".join(groups), "-".join(groups)]


# --- Chinese resident IDs --------------------------------------------------------------


def county_codes() -> list[str]:
    """Every code stdnum's GB/T 2260 table names a county for, in any year."""
    codes = []
    for length, low, high, _, counties in numdb.get("cn/loc").prefixes:
        for county_length, county_low, county_high, props, _ in counties:
            if "county" in props:
                for province in range(int(low), int(high) + 1):
                    for county in range(int(county_low), int(county_high) + 1):
                        codes.append(f"{province:0{length}d}{county:0{county_length}d}")
    return sorted(set(codes))


COUNTY_CODES = county_codes()
BIRTH_DATES = st.dates(datetime.date(1930, 1, 1), datetime.date.today())


def resident_id(area: str, birth: datetime.date, sequence: int) -> str:
    from stdnum.cn import ric

    body = f"{area}{birth:%Y%m%d}{sequence:03d}"
    return body + ric.calc_check_digit(body + "0")


@st.composite
def resident_ids(draw: st.DrawFn) -> str:
    return resident_id(
        draw(st.sampled_from(COUNTY_CODES)), draw(BIRTH_DATES), draw(st.integers(0, 999))
    )


# --- phones ----------------------------------------------------------------------------

PHONE_TYPES = {
    "fixed_line": phonenumbers.PhoneNumberType.FIXED_LINE,
    "mobile": phonenumbers.PhoneNumberType.MOBILE,
    "toll_free": phonenumbers.PhoneNumberType.TOLL_FREE,
    "voip": phonenumbers.PhoneNumberType.VOIP,
    "premium_rate": phonenumbers.PhoneNumberType.PREMIUM_RATE,
    "shared_cost": phonenumbers.PhoneNumberType.SHARED_COST,
    "personal_number": phonenumbers.PhoneNumberType.PERSONAL_NUMBER,
    "uan": phonenumbers.PhoneNumberType.UAN,
}
# Written nationally, the masker takes the types people write (phones.py's _NATIONAL_TYPES).
NATIONAL_TYPES = ("fixed_line", "mobile", "toll_free", "voip")


def _types_of(number: phonenumbers.PhoneNumber) -> int:
    return phonenumbers.number_type(number)


@st.composite
def phones(draw: st.DrawFn, region: str, kind: str) -> phonenumbers.PhoneNumber:
    """The region's example number of ``kind``, its last one to four digits varied, kept
    when ``phonenumbers`` still says it is a valid number of that type."""
    example = phonenumbers.example_number_for_type(region, PHONE_TYPES[kind])
    assume(example is not None)
    nsn = phonenumbers.national_significant_number(example)
    changed = draw(st.integers(0, min(4, len(nsn) - 3)))
    tail = draw(st.text("0123456789", min_size=changed, max_size=changed))
    number = phonenumbers.parse("+" + str(example.country_code) + nsn[: len(nsn) - changed] + tail)
    assume(phonenumbers.is_valid_number_for_region(number, region))
    assume(
        _types_of(number) in (PHONE_TYPES[kind], phonenumbers.PhoneNumberType.FIXED_LINE_OR_MOBILE)
    )
    return number


def phone_forms(number: phonenumbers.PhoneNumber, national: bool) -> list[str]:
    """How people write ``number``: internationally (``+44 20 7946 0958``, E.164) and, when
    ``national``, nationally (``020 7946 0958``, and its digits alone)."""
    fmt = phonenumbers.PhoneNumberFormat
    forms = [
        phonenumbers.format_number(number, fmt.INTERNATIONAL),
        phonenumbers.format_number(number, fmt.E164),
    ]
    if national:
        written = phonenumbers.format_number(number, fmt.NATIONAL)
        forms += [written, "".join(c for c in written if c.isdigit())]
    return forms


# --- e-mail ----------------------------------------------------------------------------


def email_local_parts() -> st.SearchStrategy[str]:
    """Local parts of the shape most addresses have (RFC 5322's dot-atom, lower case): a
    letter, then letters, digits, dots and underscores, ending with a letter or digit."""
    return st.builds(
        "{}{}{}".format,
        st.sampled_from(string.ascii_lowercase),
        st.text(string.ascii_lowercase + string.digits + "._", max_size=10),
        st.sampled_from(string.ascii_lowercase + string.digits),
    )


# --- contexts --------------------------------------------------------------------------


def _url_value(value: str) -> str:
    """A value in a URL's query: no spaces (a query encodes them), "+" as "%2B"."""
    return value.replace(" ", "").replace("+", "%2B")


CONTEXTS: dict[str, Callable[[str], str]] = {
    "prose": lambda v: f"Hi, the customer asked us to use {v} for the refund. Thanks!",
    "json": lambda v: json.dumps(
        {"customer": "张伟", "value": v, "note": f"账号 {v}。"}, ensure_ascii=False
    ),
    "json_escaped": lambda v: json.dumps({"备注": f"客户账号{v}，请核对", "v": v}),
    "json_in_json": lambda v: json.dumps(
        json.dumps({"备注": f"账号：{v}\n谢谢", "v": v}, ensure_ascii=False)
    ),
    "cjk": lambda v: f"客户的号码是{v}，请核对后回复。",
    "markdown": lambda v: f"| 客户 | 号码 | 状态 |\n|---|---|---|\n| 张伟 | {v} | 已核对 |\n",
    # A CSV row: the value after a number and a comma, where an amount's thousands would be.
    "csv": lambda v: f"id,value,customer,status\n1042,{v},张伟,open\n",
    "url_query": lambda v: (
        f"see https://crm.example.com/customers/view?value={_url_value(v)}&lang=zh now"
    ),
}


def leaks(masked: str, value: str) -> list[str]:
    """The spellings of ``value`` still in ``masked``: as written, without separators."""
    compact = re.sub(r"[\s\-().]", "", value)
    forms = {value, compact, _url_value(value), compact.lstrip("+")}
    return [form for form in forms if len(form) >= 6 and form in masked]
