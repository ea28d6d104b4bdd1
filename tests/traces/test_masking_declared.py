"""Declared fields (a tool file's ``sensitive`` pointers): what each pointer reaches is masked
by its kind, whatever it holds, and learnt for the rest of the run."""

from __future__ import annotations

from traces.masking import Masker, under


def test_a_declared_root_value_is_masked_and_learnt():
    masker = Masker(b"key")

    assert masker.mask("Zhang Wei", {"": "name"}) == "Z**** W**"
    assert masker.mask_text("Dear Zhang Wei") == "Dear Z**** W**"


def test_every_value_inside_a_declared_list_or_object_is_masked_by_the_kind():
    masker = Masker(b"key")
    value = {
        "holders": ["Zhang Wei", "Li Na"],
        "home": {"street": "1 Main Street", "city": "Springfield"},
        "none": [],
        "empty": {},
    }

    masked = masker.mask(
        value, {"/holders": "name", "/home": "address", "/none": "name", "/empty": "address"}
    )

    assert masked["holders"] == ["Z**** W**", "L* N*"]
    assert set(masked["home"]) == {"street", "city"}
    assert all(v.startswith("[address:") for v in masked["home"].values())
    assert masked["none"] == []
    assert masked["empty"] == {}
    assert masker.mask_text("Li Na lives at 1 Main Street") == (
        f"L* N* lives at {masked['home']['street']}"
    )


def test_a_declared_field_holding_null_or_a_boolean_is_kept_as_it_is():
    value = {"holder": None, "vip": True, "blocked": False}

    assert Masker(b"key").mask(value, {"/holder": "name", "/vip": "name", "/blocked": "phone"}) == (
        value
    )


def test_pointers_re_rooted_under_a_member_mask_the_fields_below_it():
    sensitive = under("/result", {"/holder": "name", "/phones/*": "phone"})

    masked = Masker(b"key").mask(
        {"result": {"holder": "Zhang Wei", "phones": ["13812345678"]}, "holder": "Zhang Wei"},
        sensitive,
    )

    assert sensitive == {"/result/holder": "name", "/result/phones/*": "phone"}
    assert masked["result"] == {"holder": "Z**** W**", "phones": ["138****5678"]}
    assert masked["holder"] == "Z**** W**"  # learnt: masked wherever it shows up again
