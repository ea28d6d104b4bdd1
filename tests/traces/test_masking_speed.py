"""The shortcuts that make masking fast give the answers of the slow paths they stand for:
fingerprints from precomputed HMAC states, one expression per length for national phone
numbers, the label and URL tests, checksums computed without the library's general code, and
what a masker remembers within a run."""

import hashlib
import hmac
import random
import re

import phonenumbers
import pytest
from stdnum import luhn, numdb, verhoeff
from stdnum.br import cpf
from stdnum.cn import ric
from stdnum.es import dni, nie
from stdnum.exceptions import ValidationError
from stdnum.in_ import aadhaar
from stdnum.iso7064 import mod_97_10
from stdnum.us import ssn

from traces.masking import Masker, checks
from traces.masking import emails as emails_module
from traces.masking import kinds as kinds_module
from traces.masking import masker as masker_module
from traces.masking import memo as memo_module
from traces.masking import numbers as numbers_module
from traces.masking.kinds import fingerprint
from traces.masking.numbers import _LABEL, _labelled
from traces.masking.phones import DEFAULT_REGIONS, PhoneValidator


@pytest.mark.parametrize("key", [b"", b"k", b"bench-key", b"x" * 64, b"y" * 65, bytes(range(200))])
def test_fingerprints_are_hmac_sha256_whatever_the_key_length(key):
    for normalized in ("+8613812345678", "zhang.wei@example.com", "张伟", ""):
        expected = hmac.digest(key, f"phone:{normalized}".encode(), "sha256").hex()

        assert fingerprint(key, "phone", normalized) == expected
        assert Masker(key).fingerprint("phone", normalized) == expected


def test_fingerprints_are_the_same_with_the_ssl_libraries_sha256(monkeypatch):
    expected = fingerprint(b"bench-key", "phone", "+8613812345678")
    monkeypatch.setattr(kinds_module, "_sha256", hashlib.sha256)
    kinds_module.hmac_states.cache_clear()
    try:
        assert fingerprint(b"bench-key", "phone", "+8613812345678") == expected
    finally:
        kinds_module.hmac_states.cache_clear()


def _walked_emails(text: str) -> list[tuple[int, int]]:
    """``find_emails`` with its local part found a character at a time (as it was)."""
    spans: list[tuple[int, int]] = []
    at = text.find("@")
    while at != -1:
        start = at
        while start > 0 and text[start - 1] in emails_module._LOCAL:
            start -= 1
        domain = emails_module._DOMAIN.match(text, at + 1)
        end = domain.end() if domain else at
        if start < at and domain:
            tld = text[text.rindex(".", at, end) + 1 : end]
            if tld.isalpha() and not (spans and start < spans[-1][1]):
                spans.append((start, end))
        at = text.find("@", max(end, at + 1))
    return spans


def test_the_local_part_found_by_window_is_the_one_found_a_character_at_a_time():
    rng = random.Random(13)  # noqa: S311 - reproducible test data
    pieces = ["a", "Zh.", "wei", "_", "%", "+", "-", "9", " ", "中", "@", "example.com", ".cn", ","]
    for _ in range(20000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        if rng.random() < 0.1:  # local parts longer than the window, and at the text's start
            text = "x" * rng.choice([79, 80, 81, 160, 161, 300]) + text
        assert emails_module.find_emails(text) == _walked_emails(text), text


def _national_candidates(rng: random.Random) -> list[str]:
    """Digit strings near valid national numbers of every default region, and random ones."""
    found = []
    for region in DEFAULT_REGIONS:
        prefix = phonenumbers.country_mobile_token(phonenumbers.country_code_for_region(region))
        national_prefix = phonenumbers.PhoneMetadata.metadata_for_region(region).national_prefix
        for kind in (phonenumbers.PhoneNumberType.MOBILE, phonenumbers.PhoneNumberType.FIXED_LINE):
            example = phonenumbers.example_number_for_type(region, kind)
            nsn = phonenumbers.national_significant_number(example)
            for _ in range(150):
                tail = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 5)))
                digits = nsn[: max(1, len(nsn) - len(tail))] + tail
                found += [digits, (national_prefix or "") + digits, prefix + digits, "1" + digits]
    found += [str(rng.randint(10**5, 10**15)) for _ in range(3000)]
    return found


def test_the_national_screens_accept_exactly_what_each_region_accepts():
    validator = PhoneValidator()
    rng = random.Random(13)  # noqa: S311 - reproducible test data
    checked = valid = 0
    for digits in _national_candidates(rng):
        for compact in (False, True):
            expected = [
                (rules.region, e164)
                for rules in validator._by_length.get(len(digits), ())
                if (e164 := rules.national(digits, compact)) is not None
            ]
            screen = validator._screen(len(digits), compact)
            got, index = [], screen.first(digits, 0) if screen else None
            while index is not None:
                rules = screen.regions[index]
                got.append((rules.region, rules.national_e164(digits, compact)))
                index = screen.first(digits, index + 1)

            assert got == expected, (digits, compact)
            checked += 1
            valid += bool(expected)
    assert valid > 500, "the candidates must include many valid numbers to prove anything"
    assert checked > 10000


def test_a_number_valid_in_several_regions_still_takes_the_first_unless_formatted():
    validator = PhoneValidator()

    assert validator.national("0612345678") == "+49612345678"  # Germany comes before France
    assert validator.national("0612345678", written="06 12 34 56 78") == "+33612345678"
    assert validator.national("0612345678", compact=True, written="0612345678") == "+49612345678"


def _national_looking_up_every_region(validator, digits, compact, written):
    """``PhoneValidator.national`` as it was: every region the number is valid in, then
    ``_best_written``."""
    screen = validator._screen(len(digits), compact)
    found = []
    index = screen.first(digits, 0) if screen else None
    while index is not None:
        rules = screen.regions[index]
        e164 = rules.national_e164(digits, compact)
        if not written or compact:
            return e164
        if all(e164 != f for _, f in found):
            found.append((rules, e164))
        index = screen.first(digits, index + 1)
    if len(found) > 1:
        return _best_written(written, found, digits)
    return found[0][1] if found else None


def _best_written(written, found, digits):
    """Of the forms ``found`` (region, E.164) a number is valid in, the one of the region
    that formats it the way it is ``written`` (as ``phones`` chose it before)."""
    from traces.masking import phones

    shape = phones._shape_of(written)
    groups = phones._groups(shape)
    best = found[0][1]
    for rules, e164 in found:
        formatted = phones._written_shape(rules, e164, digits)
        if formatted == shape:
            return e164
        if best == found[0][1] and phones._groups(formatted) == groups:
            best = e164
    return best


def _written_forms(rng: random.Random, digits: str) -> list[str]:
    """``digits`` grouped at random, and as each default region formats them nationally."""
    forms = []
    for _ in range(3):
        cuts = sorted(rng.sample(range(1, len(digits)), rng.randint(1, 4)))
        pieces = [digits[i:j] for i, j in zip([0, *cuts], [*cuts, len(digits)], strict=True)]
        forms.append(rng.choice([" ", "-", ".", "/"]).join(pieces))
    for region in DEFAULT_REGIONS:
        try:
            number = phonenumbers.parse(digits, region)
        except phonenumbers.NumberParseException:
            continue
        forms.append(phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.NATIONAL))
    return forms


def test_a_number_valid_in_several_regions_takes_the_region_it_took_with_every_region_known():
    validator = PhoneValidator()
    rng = random.Random(7)  # noqa: S311 - reproducible test data
    checked = several = 0
    for digits in _national_candidates(rng)[::3]:
        for written in _written_forms(rng, digits):
            expected = _national_looking_up_every_region(validator, digits, False, written)

            assert validator.national(digits, written=written) == expected, (digits, written)
            checked += 1
            several += expected is not None and len(validator.national_candidates(digits)) > 1
    assert checked > 20000
    assert several > 1000, "numbers valid in several regions are what this is about"


def test_the_label_shortcuts_agree_with_the_label_expression():
    rng = random.Random(7)  # noqa: S311 - reproducible test data
    words = ["order", "Order #", "ref", "tracking no.", "订单号", "created_at", '"ts": "', "date"]
    filler = ["", " ", ": ", "=", '"', "\n", "x", "A", "-", "(", "+", "，", "phone "]
    for _ in range(20000):
        text = "".join(rng.choice(words + filler) for _ in range(rng.randint(0, 5))) + "12345678"
        start = len(text) - 8
        expected = _LABEL.search(text[max(0, start - 24) : start].lower()) is not None

        assert _labelled(text, start) == expected, text


@pytest.mark.parametrize("padding", [0, 50, 63, 64, 65, 200])
def test_digits_in_a_long_url_are_the_urls_and_digits_after_one_are_not(padding):
    masker = Masker(b"test-key")
    url = "https://shop.example.com/" + "a" * padding + "/orders/13812345678?ref=mail"
    after_url = "https://shop.example.com/ " + "a" * padding + "/13812345678"

    assert masker.mask_text(f"see {url} now") == f"see {url} now"
    assert "13812345678" not in masker.mask_text(after_url)


def _in_url_by_token(text: str, start: int) -> bool:
    """The URL test as it was: the token the digits are in, from the last boundary before them
    (looked for in the 64 characters before, then in the whole text), holds "://" (and no "?"
    after it: digits in a query are not the URL's)."""
    bounds = " \n\"'<"
    window = max(0, start - 64)
    token_start = max(text.rfind(c, window, start) for c in bounds)
    if token_start < 0 and window:
        token_start = max(text.rfind(c, 0, window) for c in bounds)
    token = text[token_start + 1 : start]
    # Digits in a URL's query are classified like any others (values, not the URL's own).
    return "://" in token and "?" not in token[token.rfind("://") :]


def test_the_url_shortcut_agrees_with_the_token_it_stands_for():
    rng = random.Random(13)  # noqa: S311 - reproducible test data
    pieces = ["https://", "://", ":/", "http", "a.example.com", "/", "/orders/", "?", "=", "&",
              " ", "\n", '"', "'", "<", "x" * 30, "y" * 61, "12", "中"]  # fmt: skip
    checked = urls = 0
    for _ in range(20000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 12))) + "1234567"
        start = len(text) - 7
        if text[start - 1] not in "/=?&":
            continue
        expected = _in_url_by_token(text, start)

        assert numbers_module.NumberFinder._in_url_or_time(text, start, text[start - 1]) == (
            expected
        ), text
        checked += 1
        urls += expected
    assert checked > 5000
    assert urls > 1000


def _digit_strings(rng: random.Random, lengths: range, count: int) -> list[str]:
    return [
        "".join(rng.choice("0123456789") for _ in range(rng.choice(lengths))) for _ in range(count)
    ]


def test_the_luhn_shortcut_agrees_with_stdnum():
    rng = random.Random(13)  # noqa: S311 - reproducible test data
    numbers = _digit_strings(rng, range(1, 21), 20000)
    numbers += [body + luhn.calc_check_digit(body) for body in numbers[:5000]]  # valid ones
    numbers += ["", "\uff14" + "\uff11" * 15, "4111-1111", "٤١١١١١١١١١١١١١١١"]
    numbers += [n.translate(_FULL_WIDTH) for n in numbers[:300]]  # the library's: none valid

    assert [checks.luhn_ok(n) for n in numbers] == [luhn.is_valid(n) for n in numbers]
    assert sum(checks.luhn_ok(n) for n in numbers) > 5000


def test_the_mod_97_shortcut_agrees_with_stdnum():
    rng = random.Random(13)  # noqa: S311 - reproducible test data
    alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcxyz"
    values = [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 34))) for _ in range(20000)
    ]
    values += [v + mod_97_10.calc_check_digits(v) for v in values[:5000]]  # valid ones
    values += ["", "DE89 3704", "DE89-3704", "é1234", "12²", "+123", "1_000", " 12", "١٢٣"]

    assert [checks._mod_97_10_ok(v) for v in values] == [mod_97_10.is_valid(v) for v in values]


def test_the_resident_id_shortcut_agrees_with_stdnum():
    rng = random.Random(13)  # noqa: S311 - reproducible test data
    areas = ["110105", "310104", "440305", "310115", "999999", "110000", "000000", "110001"]
    values = []
    for _ in range(5000):
        birth = f"{rng.randint(1890, 2030)}{rng.randint(0, 13):02d}{rng.randint(0, 32):02d}"
        body = rng.choice(areas) + birth + f"{rng.randint(0, 999):03d}"
        values += [body + ric.calc_check_digit(body + "0"), body + rng.choice("0123456789X")]
    values += ["11010519491231002x", "110105 19491231 002X", "110105194912310021"]

    expected = [_resident_id_valid(v) for v in values]  # written with spaces too
    assert [checks.cn_resident_id_ok(v) for v in values] == expected
    assert sum(checks.cn_resident_id_ok(v) for v in values) > 1000
    # Pudong (310115) and Nanshan (440305) are younger than some holders: still valid.
    assert sum(checks.cn_resident_id_ok(v) and not ric.is_valid(v) for v in values) > 100


def _resident_id_valid(value: str) -> bool:
    """``stdnum.cn.ric.is_valid``, except that the area needs to name a county in some year,
    not in the birth year (``checks.cn_resident_id_ok``'s docstring says why)."""
    number = ric.compact(value.replace(" ", ""))
    if len(number) != 18 or not number[:17].isdigit():
        return False
    if ric.calc_check_digit(number) != number[17]:
        return False
    try:
        ric.get_birth_date(number)
    except ValidationError:
        return False
    places = numdb.get("cn/loc").info(number[:6])
    return any("county" in props for _, props in places)


def _near_valid(rng: random.Random, valid: list[str], alphabet: str) -> list[str]:
    """``valid`` values, and each with one character changed, dropped or doubled."""
    found = list(valid)
    for value in valid:
        i = rng.randrange(len(value))
        found += [
            value[:i] + rng.choice(alphabet) + value[i + 1 :],
            value[:i] + value[i + 1 :],
            value[:i] + value[i] + value[i:],
        ]
    return found


_FULL_WIDTH = {code: code + 0xFEE0 for code in range(ord("0"), ord("9") + 1)}
_ODD = ["", " ", "-", "0", "\uff11\uff12\uff13", "\u0661\u0662", "`", "12`4", " 123 ", "\t1"]
_ODD += ["078-05-1120", "219-09-9999", "457-55-5462", "666-12-3456", "900-12-3456"]  # SSNs never
_ODD += ["123-45-0000", "123-00-4567", "000-12-3456", "000.000.000-00"]  # zero fields
# A palindrome with a valid Verhoeff check digit (no Aadhaar number is one).
_ODD += [next(p for n in range(200000, 10**6) if verhoeff.checksum(p := f"{n}{str(n)[::-1]}") == 0)]


@pytest.mark.parametrize(
    ("check", "library", "make"),
    [
        (
            checks.us_ssn_ok,
            lambda v: ssn.is_valid(re.sub(r"\D", "", v)),  # given the digits only, as ever
            lambda r: f"{r.randint(0, 999):03d}-{r.randint(0, 99):02d}-{r.randint(0, 9999):04d}",
        ),
        (
            checks.es_dni_ok,
            dni.is_valid,
            lambda r: (b := f"{r.randint(0, 10**8 - 1):08d}") + dni.calc_check_digit(b),
        ),
        (
            checks.es_nie_ok,
            nie.is_valid,
            lambda r: (
                (b := r.choice("XYZ") + f"{r.randint(0, 10**7 - 1):07d}") + nie.calc_check_digit(b)
            ),
        ),
        (
            checks.in_aadhaar_ok,
            aadhaar.is_valid,
            lambda r: (b := str(r.randint(10**10, 10**11 - 1))) + verhoeff.calc_check_digit(b),
        ),
        (
            checks.br_cpf_ok,
            cpf.is_valid,
            lambda r: cpf.format(
                (b := f"{r.randint(0, 10**9 - 1):09d}") + cpf._calc_check_digits(b + "00")
            ),
        ),
    ],
)
def test_the_national_id_shortcuts_agree_with_stdnum(check, library, make):
    rng = random.Random(13)  # noqa: S311 - reproducible test data
    valid = [make(rng) for _ in range(3000)]
    values = _near_valid(rng, valid, "0123456789 -.XYZTRWx")
    values += [v.replace("-", " ") for v in valid[:300]] + [v.replace("-", "") for v in valid[:300]]
    values += _ODD + [v + "\uff11" for v in valid[:50]]
    # Written otherwise: separators where the format has none, and in full-width digits (the
    # library's path, which reads them as ASCII ones).
    values += [f"{v[:1]} {v[1:4]}-{v[4:]}" for v in valid[:100]]
    full_width = [v.translate(_FULL_WIDTH) for v in valid[:100]]
    values += full_width

    assert [check(v) for v in values] == [library(v) for v in values]
    assert sum(check(v) for v in values) > 2000
    assert sum(library(v) for v in full_width) > 50


def test_a_value_masked_again_in_a_run_is_not_fingerprinted_again(monkeypatch):
    calls = []
    masker = Masker(b"test-key")
    real = masker.fingerprint
    monkeypatch.setattr(masker, "fingerprint", lambda *a: calls.append(a) or real(*a))

    first = masker.mask_text("call 13812345678 or mail zhang.wei@example.com")
    again = masker.mask_text("call 13812345678 or mail zhang.wei@example.com")

    assert again == first
    assert len(calls) == 2  # one phone, one e-mail
    assert len(masker.drain()) == 2


def test_the_masked_values_a_masker_remembers_are_bounded(monkeypatch):
    monkeypatch.setattr(masker_module, "MASK_MEMO_SIZE", 8)
    texts = [f"call 1381234{i:04d}" for i in range(20)] * 2
    masker = Masker(b"test-key")

    masked = [masker.mask_text(text) for text in texts]

    assert len(masker._masks) <= 8
    assert masked == [Masker(b"test-key").mask_text(text) for text in texts]
    assert len(masker.drain()) == 20  # each number once, whatever was forgotten


def test_the_phone_verdicts_a_masker_remembers_are_bounded_and_reused(monkeypatch):
    monkeypatch.setattr(numbers_module, "PHONE_MEMO_SIZE", 8)
    calls = []
    real = PhoneValidator.national
    monkeypatch.setattr(
        PhoneValidator, "national", lambda *a, **k: calls.append(a) or real(*a, **k)
    )
    masker = Masker(b"test-key")

    masker.mask_text("call 13812345678, (718) 951-1807")
    masker.mask_text("call 13812345678, (718) 951-1807")
    assert len(calls) == 2

    texts = [f"call 1381234{i:04d} or +1 718 951 {i:04d}" for i in range(20)] * 2
    masked = [masker.mask_text(text) for text in texts]
    assert len(masker._numbers._phone_memo) <= 8
    assert masked == [Masker(b"test-key").mask_text(text) for text in texts]


def test_amounts_and_addresses_are_turned_away_only_where_classification_would():
    finder = Masker(b"test-key")._numbers
    rng = random.Random(13)  # noqa: S311 - reproducible test data
    befores = ['"', "额", "：", "(", "=", "/", "#", "$", "€", "\n", " ", "-", "x", "DE89", "GB82 "]
    checked = 0
    for _ in range(5000):
        value = rng.choice(
            [
                f"{rng.randint(0, 10**9)}.{rng.randint(0, 99):02d}",
                f"{rng.randint(0, 10**6)}.{rng.randint(0, 9)}",
                ".".join(str(rng.randint(0, 255)) for _ in range(4)),
            ]
        )
        text = rng.choice(befores) + value + rng.choice(['"', " ", "元", "Z", "X", ""])
        for match in _EVERY_RUN.finditer(text):
            start, end = match.span()
            before = text[start - 1] if start else " "
            if numbers_module._amount_or_address(match.group(0), before):
                assert finder._classify(text, start, end, match.group(0), before) is None, text
                checked += 1
    assert checked > 2000


def test_the_digit_groups_of_a_shape_are_those_of_the_expression_and_their_cache_is_bounded():
    from traces.masking import phones

    shapes = ["dd dd dd dd dd", "(ddd) ddd-dddd", "ddd-dddd-dddd", "d", ""]
    shapes += [f"{'d' * (i % 50 + 1)} {'d' * (i // 50 + 1)}" for i in range(5000)]  # distinct

    for shape in shapes:
        assert phones._groups(shape) == phones._GROUPS.findall(shape)
    assert len(phones._GROUPS_OF) <= 4097


# Every run, before ``RUN`` turns away the amounts and addresses no other run starts inside.
_EVERY_RUN = re.compile(
    numbers_module._RUN_START
    + f"(?:{numbers_module._RUN_BODY}|{numbers_module._IBAN_CHECK_DIGITS})"
)


def test_the_runs_the_expression_turns_away_are_those_the_loop_turned_away(monkeypatch):
    rng = random.Random(13)  # noqa: S311 - reproducible test data
    pieces = ["339,990.28", "1,234", ",", "990.28", "31382110.31", "12.5", "1.234",
              "192.168.86.103", "10.0.0.1", "1.2.3.4.5", "13812345678", "2026-11-30",
              "(718) 951-1807", " ", "  ", "-", ".", "/", "(", ")", '"', "'", ":", "=", "#",
              "金额", "元", "x", "X", "_", "DE", "\n", "\uff11\uff12", "9", "00",
              "DE89 3704 0044 0532 0130 00", "GB82 WEST 1234 5698 7654 32", "DE89",
              "NL91ABNA0417164300", "NINO AB 12 34 56"]  # fmt: skip
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 10))) for _ in range(30000)]
    with_every_run = Masker(b"test-key")._numbers
    monkeypatch.setattr(numbers_module, "RUN", _EVERY_RUN)
    expected = [with_every_run.find(t) for t in texts]
    monkeypatch.undo()

    finder = Masker(b"test-key")._numbers
    assert [finder.find(t) for t in texts] == expected
    removed = 0
    for text in texts:
        kept = {m.span() for m in numbers_module.RUN.finditer(text)}
        for match in _EVERY_RUN.finditer(text):
            if match.span() in kept:
                continue
            start, run = match.start(), match.group(0)  # turned away: as the loop would have
            before = text[start - 1] if start else " "
            thousands = before == "," and start > 1 and text[start - 2].isdigit()
            assert numbers_module._BREAK.search(run) is None, text
            assert (thousands and numbers_module._THOUSANDS.match(text, start)) or (
                numbers_module._amount_or_address(run, before)
            ), text
            removed += 1
        assert kept <= {m.span() for m in _EVERY_RUN.finditer(text)}
    assert removed > 5000, "the look-alikes turned away must be common in the texts"


def test_runs_are_found_where_an_expression_starting_with_any_digit_finds_them():
    slow = re.compile(r"\d(?<![a-z_\d]\d)(?<!\d[.:]\d)[\d ().\-/]{4,}\d")  # as it was
    rng = random.Random(13)  # noqa: S311 - reproducible test data
    pieces = ["1", "38", "12345", " ", "-", ".", ":", "(", ")", "/", "a", "X", "_", "中", "\n",
              "\uff11\uff12", "\u0661\u0662\u0663", "\u0967", "\U0001d7ce\U0001d7cf",
              "\U000104a0", "\U0001f600", "\u00b2", "\u2460"]  # fmt: skip
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 20))) for _ in range(20000)]
    texts += ["".join(chr(c) for c in range(start, start + 300)) for start in range(0, 0x11000, 97)]

    found = [[m.span() for m in _EVERY_RUN.finditer(t)] for t in texts]

    assert found == [[m.span() for m in slow.finditer(t)] for t in texts]
    assert sum(map(len, found)) > 5000


def _without_overlaps_sorting_all(spans):
    """``masker._without_overlaps`` as it was: every span sorted by start and priority."""
    ordered = sorted((span[0], priority, span) for priority, span in enumerate(spans))
    kept, priorities = [], []
    for start, priority, span in ordered:
        if kept and start < kept[-1][1]:
            if priority < priorities[-1] and (len(kept) < 2 or kept[-2][1] <= start):
                kept[-1], priorities[-1] = span, priority
            continue
        kept.append(span)
        priorities.append(priority)
    return kept


def test_spans_that_do_not_overlap_are_kept_as_when_all_were_sorted():
    rng = random.Random(13)  # noqa: S311 - reproducible test data
    disjoint = 0
    for _ in range(20000):
        spans = []
        for kind in rng.sample(["api_key", "email", "phone", "card"], rng.randint(1, 4)):
            position = rng.randint(0, 30)
            for _ in range(rng.randint(0, 4)):
                start = position + rng.randint(0, 12)
                position = start + rng.randint(0, 9)
                spans.append((start, position, kind, rng.choice([None, "x"])))
        expected = _without_overlaps_sorting_all(spans)

        assert masker_module._without_overlaps(spans) == expected, spans
        disjoint += len(expected) == len(spans)
    assert 2000 < disjoint < 18000, "both paths must be taken"


def test_the_iban_screen_turns_away_only_what_the_iban_search_would(monkeypatch):
    rng = random.Random(13)  # noqa: S311 - reproducible test data
    pieces = ["DE89", "GB82", "NL91", "YT12", "ID", " ", "WEST", "ABNA", "3704", "0044", "0532",
              "0130", "00", "12", "X", "²", "\uff11", "-", "ab", "DE89 3704 0044 0532 0130 00",
              "GB82 WEST 1234 5698 7654 32", "NL91ABNA0417164300"]  # fmt: skip
    cases = []
    for _ in range(20000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 9)))
        cases += [(text, start) for start in range(len(text)) if text[start].isdigit()]
    screened = [numbers_module.NumberFinder._iban_near(text, start) for text, start in cases]
    monkeypatch.setattr(numbers_module, "_IBAN_HEAD", re.compile(""))  # screens nothing out

    assert screened == [numbers_module.NumberFinder._iban_near(t, s) for t, s in cases]
    assert sum(span is not None for span in screened) > 100


def test_a_short_text_masked_again_in_a_run_is_not_scanned_again(monkeypatch):
    monkeypatch.setattr(memo_module, "SHORT_MEMO_SIZE", 8)
    masker = Masker(b"test-key")
    scans = []
    real = masker.find
    monkeypatch.setattr(masker, "find", lambda text: scans.append(text) or real(text))

    first = [masker.mask_text(t) for t in ("ok", "call 13812345678", "get_ticket")]
    again = [masker.mask_text(t) for t in ("ok", "call 13812345678", "get_ticket")]

    assert again == first
    assert len(scans) == 3
    for i in range(20):
        masker.mask_text(f"status {i}")
    assert len(masker._memo.short) <= 8


def test_a_value_learnt_from_a_declared_field_is_masked_in_texts_masked_before():
    masker = Masker(b"test-key")
    assert masker.mask_text("Zhang Wei called") == "Zhang Wei called"

    masker.mask({"name": "Zhang Wei"}, {"/name": "name"})

    assert "Zhang Wei" not in masker.mask_text("Zhang Wei called")
    assert "Zhang Wei" not in masker.mask({"note": "Zhang Wei called"})["note"]


def test_a_credential_member_is_removed_whatever_key_type_came_before():
    masker = Masker(b"test-key")
    masked = masker.mask({1: "x", 2.5: "y", "api_key": "abc123", "API_KEY": "def456"})
    assert masked["api_key"] == masked["API_KEY"] == "[secret removed]"
    assert masker.mask({"password": "hunter2"}) == {"password": "[secret removed]"}
