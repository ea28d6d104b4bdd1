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
