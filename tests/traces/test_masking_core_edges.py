"""Edges of the masker's core (``masker``, ``kinds``, ``gate``): what each kind normalises and
masks to at its bounds, the gate's engines and threads, and the masker's memos and settings.
Each case here was a mutant of ``masking_core`` that the other tests let pass
(docs/mutation.md)."""

from __future__ import annotations

import re
import threading
from concurrent.futures import ThreadPoolExecutor

import django.conf
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import traces.masking.gate as gate_module
import traces.masking.masker as masker_module
from traces.masking import Masker, normalize
from traces.masking.detectors import TEXT_DETECTORS, Detector
from traces.masking.gate import NeedleGate
from traces.masking.kinds import search_forms
from traces.masking.memo import SHORT_MEMO_SIZE
from traces.masking.plugins import registered_kind

KEY = b"test-key"


def declared(kind: str, value: str, masker: Masker | None = None) -> str:
    """``value`` as stored when a tool file declares it of ``kind``."""
    return (masker or Masker(KEY)).mask({"v": value}, {"/v": kind})["v"]


# --- normalised forms (what is fingerprinted) -------------------------------------------


@pytest.mark.parametrize(
    ("kind", "value", "normalized"),
    [
        ("email", "Zoe.Wu@Example.COM", "zoe.wu@example.com"),
        ("email", "no address here", None),
        ("national_id", "ab 123456-c", "AB123456C"),
        ("national_id", "12345", None),
        ("iban", "DE 12-34", "DE1234"),  # six characters: the shortest taken
        ("card", "1234 5678 901", None),  # 11 digits
        ("card", "1234 5678 9012", "123456789012"),  # 12: the shortest taken
        ("card", "1234 5678 9012 3456 789", "1234567890123456789"),  # 19: the longest
        ("card", "1234 5678 9012 3456 7890", None),  # 20
        ("name", "Zhang \t Wei", "zhang wei"),
        ("address", "Unter den  Linden 5", "unter den linden 5"),
        # Valid numbers: E.164, however they are written.
        ("phone", "(718) 951-1807", "+17189511807"),
        ("phone", "+1 718-951-1807", "+17189511807"),
        # Numbers no region takes: their digits, with "+" when written internationally.
        ("phone", "+999 123 4567", "+9991234567"),
        ("phone", "00999 123 4567", "+9991234567"),
        ("phone", "+13812345678", "+13812345678"),  # a CN mobile's digits after "+1"
        ("phone", "1234 5678", "12345678"),
        ("phone", "1234-5678 ext", "12345678"),
        ("phone", "123 4567", "1234567"),  # seven digits: the fewest taken
        ("phone", "12 3456", None),
    ],
)
def test_each_kind_normalises_to_its_canonical_form_within_its_bounds(kind, value, normalized):
    assert normalize(kind, value) == normalized


def test_a_chinese_mobile_written_nationally_is_taken_as_one_where_china_is_no_region(settings):
    settings.HARNESS_PHONE_REGIONS = ("US",)
    assert normalize("phone", "13812345678") == "+8613812345678"
    assert normalize("phone", "+13812345678") == "+13812345678"


def test_only_a_phone_number_written_nationally_is_searched_for_in_each_region():
    assert search_forms("name", "4155550100") == ["4155550100"]
    # "912345678" is a Madrid number written nationally; after "+" it is no such thing.
    assert search_forms("phone", "91 234 5678") == ["+34912345678"]
    assert search_forms("phone", "+91 234 5678") == ["+912345678"]
    # Japan's national 00xy service numbers start with 00: after 00, a number is international.
    assert search_forms("phone", "00 037 610 720") == ["+037610720"]


# --- stored forms -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "value", "masked"),
    [
        # The local part is what comes before the last "@" (RFC 5321 allows a quoted "@").
        ("email", '"zoe@home"@example.com', '"***@example.com'),
        ("email", "@example.com", "***"),
        # A card's last four digits, whatever else is written with them.
        ("card", "4111 1111 1111 1234 (Visa)", "****1234"),
        ("card", "12345", "****2345"),
        ("card", "1234", "****"),  # four digits or fewer: none kept
        ("card", "12", "****"),
        ("phone", "0049 30 12345678", "+49******5678"),
        ("phone", "+49 30 12345678", "+49******5678"),
        ("phone", "0086 138 1234 5678", "+86 138****5678"),
        ("phone", "86 13812345678", "861******5678"),  # no "+": not China's code
        ("phone", "555 1234", "*******"),  # fewer than eight digits: none kept
        ("phone", "555-12 (home)", "*****"),
    ],
)
def test_a_declared_value_is_stored_in_its_kinds_masked_form(kind, value, masked):
    assert declared(kind, value) == masked


def test_a_fingerprint_only_kind_is_stored_as_the_first_eight_hex_digits_of_its_digest():
    masker = Masker(KEY)
    stored = declared("national_id", "AB123456C", masker)
    [(kind, digest)] = masker.drain()
    assert (kind, stored) == ("national_id", f"[national_id:{digest[:8]}]")
    assert re.fullmatch(r"\[national_id:[0-9a-f]{8}\]", stored)


def test_a_declared_kind_no_plugin_registers_any_longer_is_removed_without_a_fingerprint():
    kind = "retired_ref"  # a tool file's kind whose detector is no longer configured
    assert registered_kind(kind) is None
    masker = Masker(KEY)
    assert masker.mask({"ref": "C-1001", "n": 7}, {"/ref": kind, "/n": kind}) == {
        "ref": f"[{kind}:]",
        "n": f"[{kind}:]",
    }
    assert masker.drain() == []


def test_a_lone_surrogate_in_a_declared_value_is_fingerprinted_not_refused():
    # Text that did not come through the boundary (traces.untrusted) may hold one.
    masker = Masker(KEY)
    assert declared("name", "Zoe\ud800 Wu", masker) == "Z*** W*"
    assert declared("name", "Zoe\udfff Wu", masker) == "Z*** W*"
    assert len(masker.drain()) == 2  # two values, two fingerprints


# --- the masker -------------------------------------------------------------------------


def test_each_fingerprint_is_drained_once_however_often_drain_is_called():
    masker = Masker(KEY)
    drained = []
    for phone in ("13812345678", "13812345679", "13812345670", "13812345671"):
        masker.mask_text(f"call {phone}")
        drained.append(masker.drain())
    assert [len(batch) for batch in drained] == [1, 1, 1, 1]
    assert len({digest for batch in drained for _, digest in batch}) == 4
    assert masker.drain() == []


def test_a_masker_looks_numbers_up_in_the_regions_it_is_given():
    assert Masker(KEY).mask_text("call 13812345678") == "call 138****5678"
    assert Masker(KEY, regions=("US",)).mask_text("call 13812345678") == "call 13812345678"
    assert Masker(KEY, regions=["CN"]).mask_text("call 13812345678") == "call 138****5678"


def test_a_masker_needs_no_detector_setting(settings):
    del settings.HARNESS_MASKING_DETECTORS
    assert Masker(KEY).mask_text("mail zoe@example.com") == "mail z***@example.com"


def test_a_masker_given_its_regions_works_without_django_settings(monkeypatch):
    # bench/ and scripts mask outside Django: settings are read only if configured.
    monkeypatch.delenv("DJANGO_SETTINGS_MODULE", raising=False)
    monkeypatch.setattr(django.conf, "settings", django.conf.LazySettings())
    masker = Masker(KEY, regions=("US",))
    assert masker.mask_text("call (718) 951-1807 or zoe@example.com") == (
        "call 718***1807 or z***@example.com"
    )


def test_the_secret_gate_is_built_when_first_needed(monkeypatch):
    monkeypatch.setattr(masker_module, "_GATE", None)
    assert Masker(KEY).mask_text("key AKIAIOSFODNN7EXAMPLE") == "key [api_key removed]"
    assert masker_module._GATE is not None
    assert Masker(KEY).mask_text("password=hunter22!") == "password=[secret removed]"


def test_two_members_masked_alike_are_both_kept_though_the_name_memo_was_emptied():
    # The nested object's keys fill the member-name memo, which starts again on the way.
    many = {f"k{i}": i for i in range(SHORT_MEMO_SIZE + 10)}
    masked = Masker(KEY).mask({"zoe@example.com": 1, "zhang@example.com": 2, "many": many})
    assert masked == {"z***@example.com": 1, "z***@example.com (2)": 2, "many": many}


def test_a_credential_member_is_removed_in_an_object_whose_members_are_renamed():
    masked = Masker(KEY).mask(
        {"zoe@example.com": 1, "zhang@example.com": 2, "password": "hunter2!", "pin": 1234}
    )
    assert masked == {
        "z***@example.com": 1,
        "z***@example.com (2)": 2,
        "password": "[secret removed]",
        "pin": 1234,
    }


# --- the gate ---------------------------------------------------------------------------

# The first detector of each kind (``secret`` has three: credential names, Basic, a bare
# authorization), and the one each needle belongs to.
_DETECTOR = {detector.kind: detector for detector in reversed(TEXT_DETECTORS)}
_BY_NEEDLE = {needle: detector for detector in TEXT_DETECTORS for needle in detector.needles}
_NEEDLES = sorted({needle for detector in TEXT_DETECTORS for needle in detector.needles})
needs_hyperscan = pytest.mark.skipif(gate_module.hyperscan is None, reason="no hyperscan wheel")


def test_a_gate_over_detectors_without_needles_finds_no_candidate():
    assert NeedleGate(()).candidates("Bearer abcdEFGH1234ijklMNOP") == []
    no_needles = Detector("ticket", re.compile(r"T-\d+"))
    assert NeedleGate((no_needles,)).candidates("T-1") == []


def test_a_text_that_is_just_a_needle_is_a_candidate():
    gate = NeedleGate(TEXT_DETECTORS)
    assert min(len(needle) for needle in _NEEDLES) == len("pwd")
    assert gate.candidates("pwd") == [_BY_NEEDLE["pwd"]]
    assert gate.candidates("eyJ") == [_DETECTOR["jwt"]]
    assert gate.candidates("pw") == []


@st.composite
def needle_soup(draw):
    """Needles in any case, between other characters."""
    parts = []
    for needle in draw(st.lists(st.sampled_from(_NEEDLES), max_size=4)):
        cases = draw(st.lists(st.booleans(), min_size=len(needle), max_size=len(needle)))
        parts.append(
            "".join(c.upper() if up else c.lower() for c, up in zip(needle, cases, strict=True))
        )
        parts.append(draw(st.text(alphabet="ab _-", max_size=3)))
    return "".join(parts)


@needs_hyperscan
@settings(max_examples=200, deadline=None)
@given(needle_soup())
@example("akia asia GHP_ XOX")  # needles of case-sensitive detectors, in the other case
@example("BEARER Token PRIVATE")
def test_hyperscan_and_substring_tests_pick_the_same_detectors(text):
    scanned = NeedleGate(TEXT_DETECTORS)
    assert scanned.engine == "hyperscan"
    substrings = NeedleGate(TEXT_DETECTORS)
    substrings._database = None  # the engine without the wheel
    assert scanned.candidates(text) == substrings.candidates(text)


@needs_hyperscan
def test_two_threads_scan_at_once_each_in_its_own_scratch_space(monkeypatch):
    """Hyperscan refuses a scratch space in use: a second thread scanning while the first is
    in its match callback must have its own."""
    gate = NeedleGate(TEXT_DETECTORS)
    text = "Authorization: Bearer abcdEFGH1234ijklMNOP"
    expected = [_DETECTOR["bearer_token"], _BY_NEEDLE["authoriz"]]
    other = ThreadPoolExecutor(max_workers=1)
    assert other.submit(gate.candidates, text).result() == expected  # its scratch exists
    assert gate.candidates(text) == expected  # so does this thread's
    on_match, seen, this = gate_module._on_match, [], threading.current_thread()

    def scan_elsewhere(index, start, end, flags, hits):
        if threading.current_thread() is this and not seen:
            seen.append(other.submit(gate.candidates, text).result(timeout=10))
        on_match(index, start, end, flags, hits)

    monkeypatch.setattr(gate_module, "_on_match", scan_elsewhere)
    try:
        assert gate.candidates(text) == expected
    finally:
        other.shutdown()
    assert seen == [expected]


def test_a_lone_surrogate_in_free_text_is_scanned_not_refused():
    masked = Masker(KEY).mask_text("Bearer abcdEFGH1234ijklMNOP \ud800 call 13812345678")
    assert masked == "Bearer [bearer_token removed] \ud800 call 138****5678"
