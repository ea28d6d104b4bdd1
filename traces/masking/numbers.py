"""Identifiers written with digits, found in one pass over the text.

One regular expression finds every *run*: digits with single spaces, dashes, dots, slashes
or parentheses between them. Python scans for it fast (it starts with a digit class), and
most text has few runs. Each run is then classified in plain Python by what it looks like
(how many digits, how they are grouped, the characters just around it) and only the kinds
it can be are checked: a resident ID's check digit, a card's issuer and Luhn digit, an SSN's
ranges, an Aadhaar's Verhoeff digit, a CPF's two check digits, a NINO's prefix, an IBAN's
country format and mod-97, a phone number's validity in its region (``phones``).

What keeps look-alikes readable: dates at the start of a run are skipped (``2026-11-30 14``
is no Washington number), dotted quads are IP addresses, a single dot is a decimal, digits
glued to letters are part of a word (a SKU, a tracking number, a hex id) unless the letters
are the start of an IBAN, NINO or NIE, and a digits-only number right after a label such as
``order``, ``invoice``, ``tracking``, ``ref``, ``#`` or ``订单号`` is that label's number,
and one after ``created_at``, ``timestamp``, ``date``… is a time.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable

from traces.masking import checks
from traces.masking.phones import PhoneValidator

Span = tuple[int, int, str, str | None]  # (start, end, kind, normalised form if known)


def _digit_or_astral() -> str:
    """A class of every decimal digit of the Basic Multilingual Plane, and every character
    beyond it. The engine scans for a pattern's first character class before trying the rest:
    ``\\d`` costs a Unicode table lookup per character scanned, a class of ranges within the
    BMP one bitmap test (a scan in 0.7 of the time). ``RUN`` checks the character with ``\\d``
    next, so that it matches exactly what it matched when it began with ``\\d``."""
    ranges: list[tuple[int, int]] = []
    for code in range(0x10000):
        if chr(code).isdecimal():  # what ``\\d`` matches (Unicode category Nd)
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1] = (ranges[-1][0], code)
            else:
                ranges.append((code, code))
    return "[" + "".join(f"\\u{a:04x}-\\u{b:04x}" for a, b in ranges) + "\\U00010000-\\U0010ffff]"


# A digit not glued to a lower-case word and not the decimals of an amount (or the seconds of a
# clock time), then digits and separators. The look-behinds come after the
# first digit so that the engine's fast scan for a digit still applies. "0-9" beside "\d":
# ASCII digits are then found in the class's bitmap, before the Unicode lookup "\d" costs.
_RUN_START = _digit_or_astral() + r"(?<=\d)(?<![a-z_\d]\d)(?<!\d[.:]\d)"
_RUN_BODY = r"[0-9\d ().\-/]{4,}[0-9\d]"
# Where a run ends: no separators then a digit follow.
_RUN_END = r"(?![ ().\-/]*[0-9\d])"
# Two look-alikes the loop in ``NumberFinder.find`` would turn away, whole runs that no other run
# can start inside (after a digit, or a dot after a digit, none can), turned away by the
# expression instead, so that they never reach Python: the decimals of an amount after its
# thousands ("339,990.28": "990.28" after an ASCII digit and a comma, ``_THOUSANDS``) and an
# amount or a dotted quad after a character that is no ASCII letter, digit, "_", space or "-"
# (``"31382110.31"``, ``金额90720742.53``, ``"ip": "192.168.86.103"``: ``_amount_or_address``).
# A quarter of the runs of a dense corpus; ``tests/traces/test_masking_speed.py`` holds the
# finder's answers to those it gives with every run.
_TURNED_AWAY = (
    r"(?!(?<=[0-9],\d)\d\d\.\d++" + _RUN_END + r"|(?<=[^A-Za-z0-9_ \-]\d)"
    r"(?:\d*+\.\d{1,2}+|\d{0,2}+\.\d{1,3}+\.\d{1,3}+\.\d{1,3}+)" + _RUN_END + ")"
)
# Or an IBAN's check digits, after two capitals and before a group of four: where its BBAN
# holds letters among its digits (``AZ21NABZ0000…``, ``IT60X0542…``, ``MT84MALT0110…``) no
# other run of six characters need begin before, or in, it (``NumberFinder._iban_near``).
_IBAN_CHECK_DIGITS = r"(?<=[A-Z][A-Z]\d)\d(?= ?[A-Z0-9]{4})"
RUN = re.compile(_RUN_START + _TURNED_AWAY + "(?:" + _RUN_BODY + "|" + _IBAN_CHECK_DIGITS + ")")
# Two separators in a row, other than a parenthesis and a space ("(718) 951", "+1 (718)").
_BREAK = re.compile(r"[ \-./]{2,}|[\-./]\(|\)[.(/]|\([ \-./]")
_PART = re.compile(r"\d(?:\d|[ \-./](?=\d)|\) ?(?=\d)|[ \-./]?\((?=\d))*")
_SEPARATORS = str.maketrans("", "", " -./()")
_DATE_AT_START = re.compile(
    r"(?:19|20)\d\d([-/.])(?:0?[1-9]|1[0-2])\1(?:0?[1-9]|[12]\d|3[01])(?!\d)"
    r"|(?:0?[1-9]|[12]\d|3[01])([-/.])(?:0?[1-9]|1[0-2])\2(?:19|20)\d\d(?!\d)"
)
_IP = re.compile(r"\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}")
_DECIMAL = re.compile(r"\d+\.\d{1,2}")
_SSN = re.compile(r"\d{3}([- ])\d\d\1\d{4}")
_AADHAAR = re.compile(r"\d{12}|\d{4}([ -])\d{4}\1\d{4}")
_CPF = re.compile(r"\d{3}\.\d{3}\.\d{3}-\d\d|\d{11}")
_CARD_SHAPE = re.compile(
    r"\d{13,19}|\d{4}([ -])\d{4}\1\d{4}\1\d{4}(?:\1\d{1,3})?|\d{4}([ -])\d{6}\2\d{4,5}"
)
_RESIDENT = re.compile(r"\d{17}[\dXx]|\d{6} \d{8} \d{3}[\dXx]")
_IBAN = re.compile(r"[A-Z]{2}\d\d(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![A-Za-z0-9])")
_IBAN_COUNTRIES = frozenset(checks.IBAN_COUNTRIES)
_IBAN_HEAD = re.compile(r"[A-Z]{2}\d\d")
_NINO_BEFORE = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2} ?$")
_NINO_AFTER = re.compile(r" ?[A-D](?![A-Za-z0-9])")
_LABEL = re.compile(
    r"(?:order|invoice|ticket|tracking|shipment|parcel|sku|ean|upc|isbn|pn|part|ref|reference|"
    r"订单|单号|编号|工单)(?:[ _-]?(?:id|no|nr|number|num))?[\"'\s:=#.]*$"
    r"|(?:created|updated|modified|deleted|sent|paid)(?:[ _-]?(?:at|on))?[\"'\s:=]*$"
    r"|(?:timestamp|epoch|ts|time|date)[\"'\s:=]*$"
    r"|#$"
)
# The decimals of an amount after its thousands ("339,990.28", "1,500.00-2,000.00"): a run of
# digits after "<digit>," is an amount's only where a decimal point follows its first group,
# and no second one its decimals; a space, dash or parenthesis there is a phone's
# ("42,646-770-1943" in a CSV row), and so are two dots ("42,646.770.1943").
_THOUSANDS = re.compile(r"\d{3}\.\d++(?!\.\d)")
# The most digits a phone number written after its "+" has: E.164's 15, and the trunk "0" some
# write after the country code ("+49 (0)711 123456-7890", "+44 (0)20 …").
_PLUS_DIGITS = 16
# The longest value written with single spaces: an IBAN of 34 characters in groups of four.
_MOST_SPACED = 42
# The methods the number finder's loop calls for every run of digits, looked up once.
_unbroken, _thousands = _BREAK.search, _THOUSANDS.match
_URL_OR_TIME = frozenset(":/=?&")
_URL_BOUNDS = " \n\"'<"
_NO_BOUND = re.compile(r"[^ \n\"'<]*")
_MASKED_FORM = re.compile(r"\[[a-z][a-z0-9_]{1,39}:$")
_WORD = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def _ascii_word(char: str) -> bool:
    return char in _WORD


# How many phone verdicts a finder remembers (then it starts again).
PHONE_MEMO_SIZE = 512
_UNKNOWN = object()


class NumberFinder:
    """Finds phones, cards, IBANs and national IDs in a text (see the module doc).

    A masker has its own, for the run it masks: the phone rules' verdict on each number as
    written is remembered, since a run holds the same numbers again and again (a customer's
    phone in the tool result, in the answer, in the next request)."""

    def __init__(self, phones: PhoneValidator) -> None:
        self.phones = phones
        self._phone_memo: dict[tuple[str, bool, str], str | None] = {}

    def find(self, text: str) -> list[Span]:
        if "\\" in text:
            # JSON written with its escapes (``json.dumps``' default): "\u8bc1510107…" reads as
            # "证510107…". Same length, so every span found is where it is in ``text``.
            text = _ESCAPE.sub(_unescaped, text)
        spans: list[Span] = []
        last_end = 0
        countries, word = _IBAN_COUNTRIES, _WORD
        for match in RUN.finditer(text):
            start, end = match.span()
            if start < last_end:
                # Inside a value already found ("NL91ABNA0417164300  13812345678", found from
                # its check digits): what follows the value in the run is a run of its own.
                if end - last_end < 6:
                    continue
                inner = RUN.search(text, last_end, end)
                if inner is None:
                    continue
                match = inner
                start, end = match.span()
            before = text[start - 1] if start else " "
            run = match.group(0)
            whole = run.isdigit() or _unbroken(run) is None
            if start > 1 and whole:
                # The commonest look-alikes, turned away before any call: digits glued to
                # capitals that cannot start an IBAN, NIE or NINO ("JD4778…", "SKU5789…"),
                # and the numbers of labels such as "ORD-2025-…" or "T-20251014-…". Not a
                # run that two separators in a row break: its values are read one by one
                # ("SKU12  646-770-1943", a table's columns).
                if "A" <= before <= "Z":
                    if (
                        text[start - 2 : start] not in countries
                        and before not in "XYZ"
                        and end - start != 6
                        and text[start - 8 : start - 6] not in countries
                        and not (before == "B" and text[start - 3 : start - 1] == "%2")
                    ):
                        if " " in run:  # "SKU5789 0612345678": what follows
                            found = self._spaced_values(text, start, end, 1, True)
                            last_end = _extended(spans, found, last_end)
                        continue
                elif before == "-" and text[start - 2] in word:
                    continue
            if whole:
                if (
                    before == ","
                    and start > 1
                    and text[start - 2].isdigit()
                    and _thousands(text, start)
                ):
                    # "339,990.28": the thousands of an amount, and what follows it
                    # ("2,000.00 4111 1111 1111 1111").
                    if " " in run:
                        found = self._spaced_values(text, start, end, 1, False)
                        last_end = _extended(spans, found, last_end)
                    continue
                if "." in run and _amount_or_address(run, before):
                    continue
                span = self._classify(text, start, end, run, before)
                if span is not None:
                    spans.append(span)
                    last_end = span[1]
                elif " " in run:
                    # From the first number on: a label's own number is read too (after a
                    # label only a card, a resident ID or a CPF is masked: see _plain).
                    found = self._spaced_values(text, start, end, 0, _labelled(text, start))
                    last_end = _extended(spans, found, last_end)
                continue
            # "718.951.1807 / 503-204-4660": two separators in a row end a value.
            for part in _PART.finditer(text, start, end):
                part_start, part_end = part.span()
                if part_start < last_end or part_end - part_start < 6:
                    continue
                before = text[part_start - 1] if part_start else " "
                if (
                    before == ","
                    and part_start > 1
                    and text[part_start - 2].isdigit()
                    and _THOUSANDS.match(text, part_start)
                ):
                    continue  # "339,990.28": the thousands of an amount
                span = self._classify(text, part_start, part_end, part.group(0), before)
                if span is not None:
                    spans.append(span)
                    last_end = span[1]
        return spans

    def _spaced_values(
        self, text: str, start: int, end: int, first: int, standalone: bool
    ) -> list[Span]:
        """The values among numbers written one after another with single spaces ("Room 12
        0612345678", "tel 0612345678 13812345678", "qty 3 646 770 1943"), a run that is no value
        as a whole. A number that begins a value is read with the rest of the run, up to a
        later number ("+44 20 7946 0958 24 hours", "4111 1111 1111 1111 0612345678"), or alone,
        the longest first; a phone read up to a later number must be grouped as its region
        writes it. The groups of one number ("YT22 3344 5566 7788 99", a tracking number) are
        not read from inside. Values are looked for from the run's number ``first`` on (1
        after an amount's thousands or a code's number); with ``standalone`` (after a label,
        "order 55 13812345678", "Ticket 20 (718) 951-1807", or a code's number, "SKU5789
        0612345678") only a number that stands alone (seven digits or more, or an area code in
        parentheses) or a card's first group begins one, so that a label's number written in
        groups ("ref 123 456 7890") stays readable."""
        numbers: list[tuple[int, int]] = []
        at = start
        for number in text[start:end].split(" "):
            numbers.append((at, at + len(number)))
            at += len(number) + 1
        found: list[Span] = []
        for index in range(first, len(numbers)):
            number_start, number_end = numbers[index]
            if found and number_start < found[-1][1]:
                continue
            if (
                standalone
                and number_end - number_start < 7
                and text[number_start] != "("
                and not _begins_a_card(numbers, index)
            ):
                continue
            if index and self._inside_a_grouping(numbers, index):
                continue
            # "(718) 951-1807" is read from its first digit, as a run would be.
            part_start = number_start + (text[number_start] == "(")
            before = text[part_start - 1] if part_start else " "
            # The longest first: the rest of the run, up to each later number's end ("+44 20
            # 7946 0958 24 hours", "4111 1111 1111 1111 0612345678"), the number alone.
            ends = [(end, 0)] if index and end - part_start <= _MOST_SPACED else []
            ends += [
                (numbers[later][1], later)
                for later in range(len(numbers) - 2, index, -1)
                if numbers[later][1] - part_start <= _MOST_SPACED
            ]
            if number_end != end:
                ends.append((number_end, 0))
            for part_end, later in ends:
                part = text[part_start:part_end]
                if part_end - part_start < 6 or not (part[0].isdigit() and part[-1].isdigit()):
                    continue
                span = self._classify(text, part_start, part_end, part, before)
                if span is None or (later and not self._written_as_one(text, span, numbers, later)):
                    continue
                found.append(span)
                break
        return found

    def _written_as_one(
        self, text: str, span: Span, numbers: list[tuple[int, int]], last: int
    ) -> bool:
        """Whether a value read out of a run, up to its number ``last``, is written as one: a
        phone grouped as its region writes it (not "see 0612 345678 12"), a card, or another
        value that does not stop inside groups of one length ("9883 1818 0859 2132")."""
        _, _, kind, e164 = span
        if kind == "phone":
            return self.phones.grouped_as_formatted(e164, text[span[0] : span[1]])  # type: ignore[arg-type]
        return kind == "card" or not self._inside_a_grouping(numbers, last)

    @staticmethod
    def _inside_a_grouping(numbers: list[tuple[int, int]], index: int) -> bool:
        """Whether number ``index`` is a group of one number written in groups of one length
        ("3344 5566 7788" of "YT22 3344 5566 7788 99"): as long as the numbers before and
        after it (or the last), and short: seven digits or more are a number of their own. A
        phone after a number its first group is as long as ("Flight 1425 0121 234 5678") goes
        on otherwise."""
        start, end = numbers[index]
        length = end - start
        if length >= 7 or numbers[index - 1][1] - numbers[index - 1][0] != length:
            return False
        return index + 1 == len(numbers) or numbers[index + 1][1] - numbers[index + 1][0] == length

    # --- classification ---------------------------------------------------------------

    def _classify(self, text: str, start: int, end: int, run: str, before: str) -> Span | None:
        """What the digits ``run`` at ``start:end`` are; ``before`` is the character before
        them (a space at the start), which is no thousands separator of an amount."""
        after = text[end] if end < len(text) else " "
        if before in _URL_OR_TIME and self._in_url_or_time(text, start, before):
            return None
        if before == "B" and start > 2 and text[start - 3 : start - 1] == "%2":
            # "?phone=%2B8613812345678": "%2B" is a "+" written in a URL's query.
            digits = run if run.isdigit() else run.translate(_SEPARATORS)
            if not 7 <= len(digits) <= _PLUS_DIGITS:
                return None
            e164 = self._e164(digits, True, "")
            return (start, end, "phone", e164) if e164 else None
        if before in _WORD or (before == "-" and start > 1 and text[start - 2] in _WORD):
            # Glued to letters: only an IBAN, NIE or resident-ID-like start is of interest.
            return self._letter_led(text, start, end, before)
        if before == " " and start > 1 and "A" <= text[start - 2] <= "Z":
            found = self._iban_near(text, start)
            if found:
                return found
            # A NINO's six digits, perhaps spaced ("XS 62 85 73 A"): six characters or spaces.
            if end - start == 6 or (end - start <= 11 and " " in run):
                found = self._nino(text, start, end)
                if found:
                    return found
        # A date's first separator is its second, third or fifth character.
        maybe_date = run[4] in "-/." or run[2] in "-/." or run[1] in "-/."
        date = _DATE_AT_START.match(run) if maybe_date else None
        if date:
            rest = RUN.search(text, start + date.end(), end)
            if rest is None or rest.end() - rest.start() < 6:
                return None
            start, end, run = rest.start(), rest.end(), rest.group(0)
            before = text[start - 1]
            after = text[end] if end < len(text) else " "
        if after in _WORD:
            return self._letter_trailed(text, start, end, run, after)
        if (
            after == "-"
            and end + 1 < len(text)
            and "A" <= text[end + 1] <= "Z"
            and (end + 2 >= len(text) or not _ascii_word(text[end + 2]))
            and checks.es_dni_ok(run + text[end + 1])
        ):
            # "12345678-Z": a DNI written with a dash before its letter; any other number
            # before a dash and capitals is read as such ("13812345678-ZHANG WEI").
            return (start, end + 2, "national_id", None)
        return self._plain(text, start, end, run, before)

    def _plain(self, text: str, start: int, end: int, run: str, before: str) -> Span | None:
        digits = run if run.isdigit() else run.translate(_SEPARATORS)
        count = len(digits)
        if count < 7 and not (count == 6 and before == " "):
            return None
        if "." in run and (_IP.fullmatch(run) or _DECIMAL.fullmatch(run)):
            return None
        if count > 12:
            # A resident ID or a card; or, up to 15 digits (16 after a "+"), a phone number (no
            # SSN, Aadhaar or CPF is as long).
            if count in (17, 18) and _RESIDENT.fullmatch(run) and checks.cn_resident_id_ok(run):
                return (start, end, "national_id", None)
            if count <= 19 and _CARD_SHAPE.fullmatch(run) and checks.card_ok(digits):
                # Issuer, length and Luhn are evidence enough: no label makes it an order number.
                return (start, end, "card", digits)
            if count > (_PLUS_DIGITS if before == "+" else 15) or _labelled(text, start):
                return None
            return self._phone(text, start, end, run, digits, before)
        if count == 11 and "." in run and _CPF.fullmatch(run) and checks.br_cpf_ok(run):
            return (start, end, "national_id", None)
        if count == 6:
            return self._nino(text, start, end)
        # Every other kind right after a label is that label's number ("order 4111…", "#…"):
        # asked before any checksum, as most labelled numbers would fail them anyway.
        if _labelled(text, start):
            return None
        if count == 9 and _SSN.fullmatch(run):  # an SSN's shape, and nothing else's
            return (start, end, "national_id", None) if checks.us_ssn_ok(run) else None
        if count == 12 and _AADHAAR.fullmatch(run) and checks.in_aadhaar_ok(digits):
            return (start, end, "national_id", None)
        phone = self._phone(text, start, end, run, digits, before)
        if phone:
            return phone
        if count == 11 and _CPF.fullmatch(run) and checks.br_cpf_ok(run):
            return (start, end, "national_id", None)
        return None

    def _phone(
        self, text: str, start: int, end: int, run: str, digits: str, before: str
    ) -> Span | None:
        """A phone number of 7 to 15 ``digits`` (``_plain`` asks only those): remembered by
        ``(digits, international, written)``, a pure function of them (see ``_e164``)."""
        if "/" in run and run.count("/") > 1:
            return None
        if before == "+":
            key = (digits, True, "")
            start -= 1
        elif digits[0] == "0" and digits[1] == "0" and not run.startswith("0 "):
            key = (digits[2:], True, "")
        elif len(run) == 10 and run[0] == "1" and run.isdigit():
            return None  # written bare, that is a Unix time (2001-2033), not India's 160x…
        else:
            if before == "(":
                start -= 1
            key = (digits, False, run)
        e164 = self._phone_memo.get(key, _UNKNOWN)
        if e164 is _UNKNOWN:
            e164 = self._e164(*key)
        if e164 is None or (before in "(+" and _labelled(text, start)):
            return None  # (without its "(" or "+", the number was not labelled: see _plain)
        return (start, end, "phone", e164)  # type: ignore[return-value]

    def _e164(self, digits: str, international: bool, written: str) -> str | None:
        """``phones.international(digits)``, or ``phones.national`` of ``digits`` as
        ``written``: remembered (a pure function of its arguments)."""
        key = (digits, international, written)
        memo = self._phone_memo
        e164 = memo.get(key, _UNKNOWN)
        if e164 is not _UNKNOWN:
            return e164  # type: ignore[return-value]
        if international:
            e164 = self.phones.international(digits)
        else:
            e164 = self.phones.national(
                digits, compact=len(digits) == len(written), written=written
            )
        if len(memo) >= PHONE_MEMO_SIZE:
            memo.clear()
        memo[key] = e164
        return e164

    def _letter_led(self, text: str, start: int, end: int, before: str) -> Span | None:
        if "A" <= before <= "Z":
            iban = self._iban_near(text, start)
            if iban:
                return iban
            prefix_start = start - 1
            if (
                before in "XYZ"
                and (prefix_start == 0 or not _ascii_word(text[prefix_start - 1]))
                and end - start == 7
                and end < len(text)
                and "A" <= text[end] <= "Z"
            ):  # NIE: X/Y/Z, seven digits, a letter.
                tail = end + 1
                if (tail >= len(text) or not _ascii_word(text[tail])) and checks.es_nie_ok(
                    text[prefix_start:tail]
                ):
                    return (prefix_start, tail, "national_id", None)
            if end - start == 6:
                return self._nino(text, start, end)
        return None

    def _letter_trailed(self, text: str, start: int, end: int, run: str, after: str) -> Span | None:
        tail = end + 1
        if tail < len(text) and _ascii_word(text[tail]):
            return None  # digits inside a word
        if (
            after in "Xx"
            and len(run) in (17, 19)
            and _RESIDENT.fullmatch(run + after)
            and checks.cn_resident_id_ok(run + after)
        ):  # "11010519491231002X", "110105 19491231 002X"
            return (start, tail, "national_id", None)
        if "A" <= after <= "Z" and len(run) == 8 and checks.es_dni_ok(run + after):
            return (start, tail, "national_id", None)
        return None

    @staticmethod
    def _iban_near(text: str, start: int) -> Span | None:
        """An IBAN whose digits begin at ``start`` (``DE89 3704…``, and the check digits of
        every IBAN: ``RUN`` begins a run there even when letters follow them, ``IT60X054…``,
        ``AZ21NABZ…``) or a few characters later (``GB82 WEST 1234…``, ``NL91ABNA0417…``)."""
        if _IBAN_HEAD.search(text, max(0, start - 10), start + 2) is None:
            return None  # no country code and check digits near: most calls
        for head in (start - 2, start - 3, start - 8, start - 10):
            if head < 0 or text[head : head + 2] not in _IBAN_COUNTRIES:
                continue
            if not text[head + 2 : head + 4].isdigit():
                continue
            # Glued to a word ("IBANDE89…", "statement_DE89….pdf") it is still an IBAN: its
            # check digits and the country's BBAN structure tell it from a word's letters.
            match = _IBAN.match(text, head)
            if match is None or match.end() <= start:
                continue
            value = match.group(0)
            if checks.iban_ok(value):
                return (head, match.end(), "iban", None)
            # The last group may be followed by more digits that belong to the text.
            shorter = value.rsplit(" ", 1)[0] if " " in value else ""
            if shorter and checks.iban_ok(shorter):
                return (head, head + len(shorter), "iban", None)
        return None

    @staticmethod
    def _nino(text: str, start: int, end: int) -> Span | None:
        run = text[start:end]
        if len(run.replace(" ", "")) != 6 or "-" in run or "." in run:
            return None
        prefix = _NINO_BEFORE.search(text, max(0, start - 3), start)
        suffix = _NINO_AFTER.match(text, end)
        if prefix is None or suffix is None:
            return None
        value = text[prefix.start() : suffix.end()]
        if checks.uk_nino_ok(value):
            return (prefix.start(), suffix.end(), "national_id", None)
        return None

    @staticmethod
    def _in_url_or_time(text: str, start: int, before: str) -> bool:
        """Digits of a clock time (``08:53:04.664450``), of a URL's path or query, or of a
        fingerprint in a masked form (``[national_id:03012345]``: masking is idempotent)."""
        if before == ":":
            return (start > 1 and text[start - 2].isdigit()) or _MASKED_FORM.search(
                text, max(0, start - 42), start
            ) is not None
        # In a URL's query (``?iban=…&phone=…``) values are what they look like, labels
        # included (``?ts=…``, ``&order_id=…``): only a path's digits are the URL's.
        # The token starts after the last space, newline, quote or "<". In the 64 characters
        # before (a URL is rarely longer): the last "://" there, if no boundary follows it.
        window = max(0, start - 64)
        scheme = text.rfind("://", window, start)
        if scheme >= 0:
            return (
                _NO_BOUND.fullmatch(text, scheme + 3, start) is not None
                and text.find("?", scheme + 3, start) < 0
            )
        if not window or _NO_BOUND.fullmatch(text, window, start) is None:
            return False  # the token starts in the window, and holds no "://"
        # A token longer than the window: where it starts, from the whole text.
        token_start = max(text.rfind(c, 0, window) for c in _URL_BOUNDS)
        token = text[token_start + 1 : start]
        scheme = token.rfind("://")
        return scheme >= 0 and token.find("?", scheme) < 0


def _amount_or_address(run: str, before: str) -> bool:
    """``金额123456.78``, ``"ip": "10.0.12.7"``: an amount or an IP address, which ``_plain``
    would turn away, after a character that makes no other reading possible (after a letter or
    a space it could be the end of an IBAN, ``DE89…``, so those are left to ``_classify``)."""
    return (
        before not in _WORD
        and before not in " -"
        and (_DECIMAL.fullmatch(run) is not None or _IP.fullmatch(run) is not None)
    )


Check = Callable[[str], bool]

# What a label can end with, other than an ASCII letter (``_LABEL``).
_LABEL_ENDS = frozenset("\"':=#.单号")


# How a card is written in groups (4-4-4-4 and up to three digits more, 4-6-5, 4-6-4): the
# lengths of the numbers a card written with spaces is read as.
_CARD_GROUPINGS = ((4, 4, 4, 4), (4, 6, 5), (4, 6, 4))


def _begins_a_card(numbers: list[tuple[int, int]], index: int) -> bool:
    """Whether number ``index`` and those after it have the lengths of a card's groups."""
    lengths = tuple(stop - start for start, stop in numbers[index : index + 5])
    return any(lengths[: len(grouping)] == grouping for grouping in _CARD_GROUPINGS)


def _extended(spans: list[Span], found: list[Span], last_end: int) -> int:
    """``spans`` with the values ``found`` among a run's numbers; where the last one ends."""
    spans.extend(found)
    return found[-1][1] if found else last_end


def _labelled(text: str, start: int) -> bool:
    """A number right after ``order``, ``tracking``, ``#``… is that label's number. What
    precedes a number repeats (``"created_at": "``), in a run and from run to run, so the
    answer is remembered for the process: by a keyed hash of the 24 characters before the
    number (``_MEMO_SALT``), never by the characters, which would keep fragments of every
    tenant's text in memory. Two texts with one hash (one chance in 2**64 a pair) would give
    one the other's answer."""
    if start == 0:
        return False
    last = text[start - 1]
    if last == "#":
        return True
    if not (last in _WORD or last in _LABEL_ENDS or last.isspace()):
        return False
    before = text[max(0, start - 24) : start]
    key = hash(_MEMO_SALT + before)
    labelled = _LABELLED.get(key)
    if labelled is None:
        if len(_LABELLED) >= LABEL_MEMO_SIZE:
            _LABELLED.clear()
        labelled = _LABELLED[key] = _LABEL.search(before.lower()) is not None
    return labelled


_LABELLED: dict[int, bool] = {}
# Random per process: str hashes are SipHash keyed by the process's own secret, and by this
# alone where PYTHONHASHSEED fixes that secret.
_MEMO_SALT = secrets.token_hex(16)
# How many label verdicts are remembered (then it starts again).
LABEL_MEMO_SIZE = 4096


# JSON's escapes (``_unescaped``).
_ESCAPE = re.compile(r"\\(?:u([0-9A-Fa-f]{4})|[\\\"bfnrt])")


def _unescaped(match: re.Match[str]) -> str:
    """A JSON escape as what it stands for, padded to its length with NULs before it, so
    that what is around a number is what it would be unescaped (``\\n`` a newline,
    ``\\u8bc1`` "证", ``\\"`` a quote); a digit, an ASCII letter or a surrogate becomes a NUL
    (no number starts or continues in an escape)."""
    escaped = match.group(0)
    code = match.group(1)
    if code is None:
        char = {"n": "\n", "r": "\r", "t": "\t", '"': '"'}.get(escaped[1], "\x00")
    else:
        value = int(code, 16)
        char = "\x00" if 0xD800 <= value <= 0xDFFF else chr(value)
        if char.isdigit() or (char.isascii() and char.isalnum()):
            char = "\x00"
    return "\x00" * (len(escaped) - 1) + char
