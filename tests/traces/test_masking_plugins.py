"""Detectors added by configuration (HARNESS_MASKING_DETECTORS) and tenants' custom patterns."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from traces.errors import MaskingPatternInvalid, MaskingPatternNotFound, TraceErrorCode
from traces.masking import Masker
from traces.masking.patterns import remove_pattern, save_pattern, try_pattern
from traces.models import MaskingPattern, MaskingPatternChange
from traces.queries import identifier_digests

DETECTORS = (
    "tests.traces.masking_detectors.ContractNumber",
    "tests.traces.masking_detectors.EMPLOYEE_ID",
    "tests.traces.masking_detectors.make_phone_detector",
)


@pytest.fixture
def configured(settings):
    settings.HARNESS_MASKING_DETECTORS = DETECTORS
    return Masker(settings.HARNESS_FINGERPRINT_KEY.encode())


def test_configured_detectors_mask_with_their_own_form_and_check(configured):
    masked = configured.mask_text("contract K-1234561, not K-1234567")

    assert masked.startswith("contract K-******1 [")
    assert masked.endswith("not K-1234567")  # fails the detector's check


def test_a_new_kind_defaults_to_a_fingerprint_form_and_is_searchable(configured, settings):
    masked = configured.mask_text("employee EMP123456 called")
    found = configured.drain()

    assert masked.startswith("employee EMP[employee_id:")
    assert "123456" not in masked
    assert [kind for kind, _ in found] == ["employee_id"]
    assert found[0][1] in identifier_digests("123456")


def test_a_detector_of_a_builtin_kind_masks_like_that_kind(configured):
    assert configured.mask_text("PHONE#7189511807") == "PHONE#718***1807"


def test_a_bad_detector_path_stops_with_a_clear_error(settings):
    settings.HARNESS_MASKING_DETECTORS = ("tests.traces.masking_detectors.MISSING",)

    with pytest.raises(ImproperlyConfigured, match="HARNESS_MASKING_DETECTORS"):
        Masker(b"test-key")


def test_an_object_without_the_interface_is_refused(settings):
    settings.HARNESS_MASKING_DETECTORS = ("tests.traces.masking_detectors.NOT_A_DETECTOR",)

    with pytest.raises(ImproperlyConfigured, match="kind"):
        Masker(b"test-key")


def test_a_pattern_is_tried_on_its_sample():
    trial = try_pattern("customer_number", r"CUST-\d{6}", "for CUST-123456 and CUST-654321")

    assert trial.found == ["CUST-123456", "CUST-654321"]
    assert "CUST-123456" not in trial.masked_sample
    assert trial.masked_sample.startswith("for [customer_number:")


@pytest.mark.parametrize(
    ("kind", "pattern", "sample", "field"),
    [
        ("Customer Number", r"CUST-\d{6}", "CUST-123456", "kind"),
        ("phone", r"CUST-\d{6}", "CUST-123456", "kind"),
        ("customer_number", r"CUST-(\d{6}", "CUST-123456", "pattern"),
        ("customer_number", r"\d*", "CUST-123456", "pattern"),
        ("customer_number", r"(a+)+b", "aaab", "pattern"),
        ("customer_number", r"(?:\w+\s?)*$", "abc", "pattern"),
        ("customer_number", r"(C)(\d+)", "C1", "pattern"),
        ("customer_number", "x" * 501, "x", "pattern"),
        ("customer_number", r"CUST-\d{6}", "no value here", "sample"),
        ("customer_number", r"CUST-\d{6}", "", "sample"),
    ],
)
def test_a_bad_pattern_is_refused_with_the_field_at_fault(kind, pattern, sample, field):
    with pytest.raises(MaskingPatternInvalid) as refused:
        try_pattern(kind, pattern, sample)

    assert refused.value.code == TraceErrorCode.MASKING_PATTERN_INVALID
    assert refused.value.details == {"field": field}


@pytest.mark.django_db
def test_every_edit_of_a_pattern_is_audited():
    save_pattern("acme", "customer_number", r"CUST-\d{6}", "CUST-123456", "alice")
    save_pattern("acme", "customer_number", r"CUST-\d{6}", "CUST-123456", "alice")  # no change
    save_pattern("acme", "customer_number", r"CUST-\d{7}", "CUST-1234567", "bob")
    remove_pattern("acme", "customer_number", "carol")

    changes = list(MaskingPatternChange.objects.order_by("id"))
    assert [(c.action, c.actor) for c in changes] == [
        ("add", "alice"),
        ("update", "bob"),
        ("remove", "carol"),
    ]
    assert changes[1].before["pattern"] == r"CUST-\d{6}"
    assert changes[1].after["pattern"] == r"CUST-\d{7}"
    assert changes[2].after is None
    assert not MaskingPattern.objects.exists()


@pytest.mark.django_db
def test_an_edit_of_a_pattern_records_its_tenant_its_kind_and_the_whole_pattern():
    save_pattern("acme", "customer_number", r"CUST-\d{6}", "CUST-123456", "alice")
    remove_pattern("acme", "customer_number", "carol")

    added, removed = MaskingPatternChange.objects.order_by("id")
    whole = {
        "kind": "customer_number",
        "pattern": r"CUST-\d{6}",
        "sample": "CUST-123456",
        "enabled": True,
    }
    assert (added.tenant, added.kind, added.before, added.after) == (
        "acme",
        "customer_number",
        None,
        whole,
    )
    assert (removed.tenant, removed.kind, removed.before, removed.after) == (
        "acme",
        "customer_number",
        whole,
        None,
    )


@pytest.mark.django_db
def test_removing_a_pattern_removes_that_tenants_pattern_of_that_kind_only():
    save_pattern("acme", "badge", r"BADGE-\d{4}", "BADGE-1234", "alice")
    save_pattern("acme", "customer_number", r"CUST-\d{6}", "CUST-123456", "alice")
    with pytest.raises(MaskingPatternNotFound) as missing:
        remove_pattern("globex", "customer_number", "bob")
    save_pattern("globex", "customer_number", r"CUST-\d{7}", "CUST-1234567", "bob")

    remove_pattern("globex", "customer_number", "bob")
    remove_pattern("acme", "customer_number", "alice")

    assert missing.value.details == {"tenant": "globex", "kind": "customer_number"}
    assert list(MaskingPattern.objects.values_list("tenant", "kind")) == [("acme", "badge")]


@pytest.mark.django_db
def test_a_removed_pattern_no_longer_masks_the_tenants_text():
    save_pattern("acme", "customer_number", r"CUST-\d{6}", "CUST-123456", "alice")
    masked = Masker(b"k", tenant="acme").mask_text("ref CUST-123456")

    remove_pattern("acme", "customer_number", "alice")

    assert "123456" not in masked
    assert Masker(b"k", tenant="acme").mask_text("ref CUST-123456") == "ref CUST-123456"


@pytest.mark.django_db
def test_an_invalid_pattern_is_not_saved():
    with pytest.raises(MaskingPatternInvalid):
        save_pattern("acme", "customer_number", r"CUST-\d{6}", "nothing", "alice")

    assert not MaskingPattern.objects.exists()
    assert not MaskingPatternChange.objects.exists()


@pytest.mark.django_db
def test_removing_a_pattern_that_does_not_exist_is_an_error():
    with pytest.raises(MaskingPatternNotFound):
        remove_pattern("acme", "customer_number", "alice")


@pytest.mark.django_db
def test_a_tenants_masker_uses_its_enabled_patterns_only():
    save_pattern("acme", "customer_number", r"CUST-\d{6}", "CUST-123456", "alice")
    save_pattern("acme", "badge", r"BADGE-\d{4}", "BADGE-1234", "alice", enabled=False)

    acme = Masker(b"k", tenant="acme")
    globex = Masker(b"k", tenant="globex")

    assert acme.mask_text("CUST-123456 BADGE-1234").startswith("[customer_number:")
    assert acme.mask_text("CUST-123456 BADGE-1234").endswith(" BADGE-1234")
    assert globex.mask_text("CUST-123456") == "CUST-123456"


@pytest.mark.django_db
def test_the_admin_tries_the_pattern_before_saving_and_audits_it(admin_client):
    url = "/admin/traces/maskingpattern/add/"
    refused = admin_client.post(
        url, {"tenant": "acme", "kind": "customer_number", "pattern": r"CUST-\d{6}", "sample": "x"}
    )
    assert refused.status_code == 200
    assert "finds nothing in the sample" in refused.content.decode()
    assert not MaskingPattern.objects.exists()

    saved = admin_client.post(
        url,
        {
            "tenant": "acme",
            "kind": "customer_number",
            "pattern": r"CUST-\d{6}",
            "sample": "see CUST-123456",
            "enabled": "on",
        },
        follow=True,
    )

    assert saved.status_code == 200
    assert "stored as: see [customer_number:" in saved.content.decode()
    change = MaskingPatternChange.objects.get()
    assert (change.tenant, change.action, change.actor) == ("acme", "add", "admin")
    row = MaskingPattern.objects.get()
    deleted = admin_client.post(f"/admin/traces/maskingpattern/{row.pk}/delete/", {"post": "yes"})
    assert deleted.status_code == 302
    assert MaskingPatternChange.objects.filter(action="remove").count() == 1


@pytest.mark.django_db
def test_the_admin_edits_a_pattern_through_the_same_checks_and_audit(admin_client):
    save_pattern("acme", "customer_number", r"CUST-\d{6}", "CUST-123456", "alice")
    row = MaskingPattern.objects.get()
    url = f"/admin/traces/maskingpattern/{row.pk}/change/"

    refused = admin_client.post(url, {"pattern": r"(a+)+", "sample": "aaa", "enabled": "on"})
    assert refused.status_code == 200
    assert "exponential time" in refused.content.decode()

    saved = admin_client.post(url, {"pattern": r"CUST-\d{7}", "sample": "CUST-1234567"})
    assert saved.status_code == 302
    row.refresh_from_db()
    assert (row.pattern, row.enabled) == (r"CUST-\d{7}", False)
    change = MaskingPatternChange.objects.order_by("-id").first()
    assert (change.action, change.actor, change.after["enabled"]) == ("update", "admin", False)


def test_a_detector_with_a_validator_masks_only_the_values_it_validates():
    import re

    from stdnum import luhn

    from traces.masking.detectors import Detector
    from traces.masking.plugins import register

    badge = Detector("badge_number", re.compile(r"\bBADGE-(\d{8})\b"), luhn.is_valid, group=1)
    valid = "1234567" + luhn.calc_check_digit("1234567")
    invalid = "1234567" + str((int(luhn.calc_check_digit("1234567")) + 1) % 10)

    masked = Masker(b"key", detectors=(register(badge),)).mask_text(
        f"badges BADGE-{valid} and BADGE-{invalid}"
    )

    assert masked.startswith("badges BADGE-[badge_number:")
    assert masked.endswith(f"] and BADGE-{invalid}")


def test_re2s_words_are_shown_as_text_whatever_its_binding_hands_over():
    import re2

    from traces.masking.plugins import re2_message

    assert re2_message(re2.error(b"missing ): (\\d")) == "missing ): (\\d"
    assert re2_message(re2.error("already text")) == "already text"
    assert re2_message(re2.error()) == ""


def test_a_pattern_detector_finds_its_whole_match_or_its_group_where_its_check_accepts_it():
    import re

    from traces.masking.plugins import PatternDetector

    whole = PatternDetector("badge", re.compile(r"B-\d{4}"))
    checked = PatternDetector("badge", re.compile(r"B-(\d{4})?"), check=lambda v: "8" not in v)

    assert list(whole.find("badge B-1234 and B-5678")) == [(6, 12), (17, 23)]
    assert list(checked.find("B-1234 B-5678 B-")) == [(2, 6)]  # no empty value, no 5678


@pytest.mark.parametrize(
    ("pattern", "positions"),
    [
        ("abc", 3),
        ("xa?", 2),  # an optional item counts once
        ("a{3,}", 4),  # an unbounded one: its minimum plus one
        ("a{2,5}", 5),
        ("x(ab)", 3),
        ("xay|xbz", 5),  # x, then the alternatives' four
        (r"\pN{1000}", 1009),  # RE2-only syntax: its length plus the counts written
    ],
)
def test_a_patterns_positions_are_counted_with_its_repetitions_spelt_out(pattern, positions):
    from traces.masking.plugins import expanded_positions

    assert expanded_positions(pattern) == positions


def test_a_pattern_of_exactly_the_most_positions_compiles_and_one_more_is_refused():
    import re2

    from traces.masking.plugins import MAX_EXPANDED_POSITIONS, compile_tenant_pattern

    assert MAX_EXPANDED_POSITIONS == 2000
    assert compile_tenant_pattern("a{1000}b{1000}").match("a" * 1000 + "b" * 1000)
    with pytest.raises(re2.error, match="pattern too large: 2001 positions"):
        compile_tenant_pattern("a{1000}b{1000}c")


def test_re2_refusing_a_pattern_writes_nothing_to_the_processs_error_output(capfd):
    with pytest.raises(MaskingPatternInvalid):
        try_pattern("customer_number", r"CUST-(\d{6}", "CUST-123456")

    assert capfd.readouterr().err == ""


def test_a_scans_budget_is_a_fixed_part_and_a_part_per_character_shared_by_the_patterns():
    from traces.masking.plugins import scan_budget_s

    assert scan_budget_s(1000) == pytest.approx(0.251, rel=1e-9)
    assert scan_budget_s(1000, 2) == pytest.approx(0.1255, rel=1e-9)
    assert scan_budget_s(0, 0) == pytest.approx(0.25, rel=1e-9)


class _Clock:
    """``time`` for plugins: each reading ``step`` seconds after the last."""

    def __init__(self, step):
        self.now, self.step = 100.0, step

    def monotonic(self):
        self.now += self.step
        return self.now


def test_a_scan_past_its_share_of_the_budget_says_so_and_masks_what_it_did_not_read(
    monkeypatch,
):
    from traces.masking import plugins

    monkeypatch.setattr(plugins, "time", _Clock(0.4))
    text = "O-1 " + "x" * 300_000
    alone = plugins.TenantPattern("order_ref", r"O-\d", report=False)
    shared = plugins.TenantPattern("order_ref", r"O-\d", patterns=2, report=False)

    assert list(alone.find(text)) == [(0, 3)]  # 0.4 s of its 0.55
    assert alone.exceeded is None
    assert list(shared.find(text)) == [(0, 3), (3, len(text))]  # 0.4 s of its 0.275
    assert shared.exceeded == (
        f"scan budget exceeded: 0.400 s (budget 0.275 s) on a text of {len(text)} characters, "
        "stopped at character 3"
    )


def test_a_scan_that_read_to_the_end_of_the_text_is_within_its_budget(monkeypatch):
    from traces.masking import plugins

    monkeypatch.setattr(plugins, "time", _Clock(0.0))
    monkeypatch.setattr(plugins, "TENANT_SCAN_BUDGET_S", 0.0)
    monkeypatch.setattr(plugins, "TENANT_SCAN_BUDGET_PER_CHAR_S", 0.0)
    detector = plugins.TenantPattern("order_ref", r"O-\d", report=False)

    assert list(detector.find("O-1 O-2")) == [(0, 3), (4, 7)]  # no time spent: within 0 s
    monkeypatch.setattr(plugins, "time", _Clock(1.0))
    assert list(detector.find("at O-1")) == [(3, 6)]  # past it, but nothing left unread
    assert detector.exceeded is None


def test_a_tenant_pattern_finds_its_group_and_no_empty_value():
    from traces.masking.plugins import TenantPattern

    detector = TenantPattern("order_ref", r"ID-(\d*)", report=False)

    assert list(detector.find("ID-123 ID- ID-4")) == [(3, 6), (14, 15)]


def test_a_pattern_past_its_budget_is_disabled_once(monkeypatch):
    from traces.masking import plugins

    disabled = []
    monkeypatch.setattr(plugins, "_disable", lambda *args: disabled.append(args))
    monkeypatch.setattr(plugins, "time", _Clock(1.0))
    detector = plugins.TenantPattern("order_ref", r"O-\d", tenant="acme")

    list(detector.find("O-1 O-2 O-3"))
    list(detector.find("O-1 O-2 O-3"))

    assert [args[:3] for args in disabled] == [("acme", "order_ref", r"O-\d")]


def test_trying_a_pattern_on_its_sample_disables_and_logs_nothing(monkeypatch, caplog):
    from traces.masking import plugins

    monkeypatch.setattr(plugins, "time", _Clock(1.0))

    with pytest.raises(MaskingPatternInvalid, match="On the sample: scan budget exceeded"):
        try_pattern("order_ref", r"O-\d", "O-1 O-2 O-3")

    assert not [r for r in caplog.records if r.name == "traces.masking.plugins"]


@pytest.mark.parametrize(
    ("kind", "pattern", "sample", "message"),
    [
        (
            "Customer Number",
            r"CUST-\d{6}",
            "CUST-123456",
            "The kind must be 2-40 characters: a-z, 0-9 and _, starting with a letter.",
        ),
        (
            "phone",
            r"CUST-\d{6}",
            "CUST-123456",
            "'phone' is a built-in kind; choose another name.",
        ),
        ("customer_number", "x" * 501, "x", "The pattern must be 1-500 characters."),
        ("customer_number", "", "x", "The pattern must be 1-500 characters."),
        (
            "customer_number",
            r"\pN+",
            "1",
            "Use syntax that Python's re reads too (patterns stay portable): "
            "bad escape \\p at position 0.",
        ),
        (
            "customer_number",
            r"(C)(\d+)",
            "C1",
            "Use at most one capturing group (the value); (?:…) groups otherwise.",
        ),
        ("customer_number", r"\d*", "1", "The pattern matches the empty string."),
        (
            "customer_number",
            r"CUST-\d{6}",
            "",
            "Give a sample text (up to 10000 characters) with a value.",
        ),
        (
            "customer_number",
            r"CUST-\d{6}",
            "x" * 10_001,
            "Give a sample text (up to 10000 characters) with a value.",
        ),
        (
            "customer_number",
            r"CUST-\d{6}",
            "no value here",
            "The pattern finds nothing in the sample.",
        ),
    ],
)
def test_a_bad_pattern_is_refused_saying_what_is_wrong(kind, pattern, sample, message):
    with pytest.raises(MaskingPatternInvalid) as refused:
        try_pattern(kind, pattern, sample)

    at_fault = (
        "kind" if kind != "customer_number" else "sample" if "sample" in message else "pattern"
    )
    assert refused.value.details == {"field": at_fault}
    assert refused.value.message == message


def test_a_construct_re2_lacks_is_refused_saying_why_with_re2s_words():
    with pytest.raises(MaskingPatternInvalid) as refused:
        try_pattern("customer_number", r"\d++X", "12X")

    assert refused.value.message.startswith(
        "Uses a possessive quantifier (a*+, a++), which tenant patterns do not support: they "
        "run on RE2, which matches in linear time and has no lookarounds or backreferences "
        "(RE2: "
    )


@pytest.mark.parametrize(
    ("pattern", "sample", "found"),
    [
        ("x" * 500, "x" * 500, ["x" * 500]),  # the longest pattern
        (r"(X+)", "aXXb", ["XX"]),  # a group that matches no empty text
        (r"\d{4}", "1234" + "." * 9_996, ["1234"]),  # the longest sample
    ],
)
def test_a_pattern_and_sample_at_their_limits_are_tried(pattern, sample, found):
    assert try_pattern("customer_number", pattern, sample).found == found


def test_the_sample_is_shown_masked_as_the_trial_masker_stores_it():
    trial = try_pattern("customer_number", r"CUST-\d{6}", "for CUST-123456")

    assert trial.masked_sample == "for [customer_number:d503c186]"


class _Badges:
    """A detector of ``B:`` and the rest of the word, with the optional parts of the interface."""

    kind = "badge_code"

    def __init__(self, **parts):
        self.__dict__.update(parts)

    def find(self, text):
        import re

        return (m.span(1) for m in re.finditer(r"B:(\S+)", text))


def _masked(detector, text):
    from traces.masking.plugins import register

    return Masker(b"key", detectors=(register(detector),)).mask_text(text)


def test_a_new_kinds_values_are_fingerprinted_by_their_letters_and_digits_in_capitals():
    masked = _masked(_Badges(), "B:ab-12--34 B:AB1234 B:ab1235").split()

    assert masked[0] == masked[1] != masked[2]
    assert masked[0].startswith("B:[badge_code:")
    assert len(masked[0]) == len("B:[badge_code:]") + 8


def test_a_detectors_normalize_decides_what_is_fingerprinted_or_the_value_if_it_gives_nothing():
    by_prefix = _Badges(normalize=lambda value: value[:2] if value[0] != "-" else None)
    masked = _masked(by_prefix, "B:ab1 B:ab2 B:-x B:-x B:-y").split()

    assert masked[0] == masked[1] != masked[2]  # ab… alike
    assert masked[2] == masked[3] != masked[4]  # no normal form: the value itself


def test_a_kind_that_is_not_fingerprinted_is_removed_or_masked_by_its_own_mask():
    removed = _masked(_Badges(fingerprinted=False), "B:ab12")
    own = _masked(_Badges(fingerprinted=False, mask=lambda v, d: f"<{v[0]}{d}>"), "B:ab12")

    assert (removed, own) == ("B:[badge_code removed]", "B:<a>")


def test_a_detector_without_find_is_refused_by_name():
    from traces.masking.plugins import register

    class NoFind:
        kind = "badge_code"

    with pytest.raises(ImproperlyConfigured) as refused:
        register(NoFind())

    assert str(refused.value) == "masking detector 'badge_code' has no find(text)"


class _CallableDetector:
    kind = "ticket_ref"

    def __call__(self):
        raise AssertionError("a detector that is callable is used as it is, not called")

    def find(self, text):
        import re

        return (m.span() for m in re.finditer(r"TKT-\d+", text))


CALLABLE_DETECTOR = _CallableDetector()


def test_a_configured_detector_that_is_callable_is_used_as_it_is(settings):
    settings.HARNESS_MASKING_DETECTORS = ("tests.traces.test_masking_plugins.CALLABLE_DETECTOR",)

    assert Masker(b"key").mask_text("see TKT-42").startswith("see [ticket_ref:")


@pytest.mark.django_db
def test_a_tenants_patterns_are_read_again_once_they_are_five_seconds_old(monkeypatch):
    from types import SimpleNamespace

    from traces.masking import plugins

    clock = SimpleNamespace(now=1000.0)
    monkeypatch.setattr(plugins, "time", SimpleNamespace(monotonic=lambda: clock.now))
    plugins.forget_tenant_patterns("acme")
    MaskingPattern.objects.create(tenant="acme", kind="badge", pattern=r"B-\d", sample="B-1")
    first = plugins.tenant_detectors("acme")
    MaskingPattern.objects.create(tenant="acme", kind="ticket", pattern=r"T-\d", sample="T-1")

    clock.now = 1004.9
    kept = plugins.tenant_detectors("acme")
    clock.now = 1005.0
    again = plugins.tenant_detectors("acme")

    assert kept is first
    assert [d.kind for d in again] == ["badge", "ticket"]
    assert [d._patterns for d in again] == [2, 2]  # one budget shared by the two


@pytest.mark.django_db
def test_a_saved_pattern_is_used_by_the_tenants_next_masker_at_once():
    from traces.masking.plugins import forget_tenant_patterns, tenant_detectors

    forget_tenant_patterns("acme")
    assert tenant_detectors("acme") == ()

    save_pattern("acme", "customer_number", r"CUST-\d{6}", "CUST-123456", "alice")

    assert [d.kind for d in tenant_detectors("acme")] == ["customer_number"]
