"""An object's member names are masked like its values: a tool result or a model's arguments
keyed by e-mail address or phone number (``{"zhang.wei@example.com": {...}}``) was stored with
those keys in clear in the audit records (issue 20, found by the mutation work on the masker).
"""

from __future__ import annotations

import phonenumbers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.traces import standards
from traces.masking import Masker

EMAILS = st.builds(
    "{}@{}".format,
    st.from_regex(r"[a-z][a-z0-9._]{0,10}[a-z0-9]", fullmatch=True),
    st.sampled_from(["example.com", "mail.example.cn", "qq.com"]),
)
PHONES = (
    st.sampled_from(["CN", "US", "GB", "DE", "FR"])
    .flatmap(lambda region: standards.phones(region, "mobile"))
    .map(lambda number: phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164))
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(keys=st.lists(st.one_of(EMAILS, PHONES), min_size=1, max_size=5, unique=True))
def test_an_object_keyed_by_identifiers_keeps_none_in_clear_and_loses_no_member(keys):
    payload = {"customers": {key: {"orders": 2, "status": "ok"} for key in keys}, "ok": True}

    masked = Masker(b"key").mask(payload)

    stored = masked["customers"]
    assert not set(stored) & set(keys)
    assert all(standards.leaks(name, key) == [] for name in stored for key in keys)
    assert sorted(stored.values(), key=str) == sorted(payload["customers"].values(), key=str)
    assert len(stored) == len(keys)  # two keys masked alike are both kept
    assert masked["ok"] is True


def test_two_addresses_masked_alike_are_both_kept_under_distinct_names():
    masked = Masker(b"key").mask(
        {"zoe@example.com": 1, "zhang.wei@example.com": 2, "z***@example.com (2)": 3}
    )

    assert sorted(masked.values()) == [1, 2, 3]
    assert "z***@example.com" in masked
    assert all(name.startswith("z***@example.com") for name in masked)


def test_member_names_that_are_no_identifiers_stay_as_they_are():
    payload = {"order 7189511807": 1, "2026-11-30": 2, "SKU-4471-BLK-XL": 3, 17: 4, "ok": 5}

    assert Masker(b"key").mask(payload) == payload


def test_a_declared_value_learnt_later_is_masked_in_member_names_seen_before():
    masker = Masker(b"key")
    assert masker.mask({"Zhang Wei": 1}) == {"Zhang Wei": 1}  # a name is found where declared

    masker.mask({"holder": "Zhang Wei"}, {"/holder": "name"})

    assert masker.mask({"Zhang Wei": 1}) == {"Z**** W**": 1}


def test_a_phone_number_member_name_sent_as_a_number_is_masked():
    assert Masker(b"key").mask({13812345678: "vip"}) == {"138****5678": "vip"}


def test_a_run_whose_tool_arguments_and_result_are_keyed_by_identifiers_stores_none_in_clear(
    acme, agent_dir, tmp_path, settings
):
    from harness.models import Run
    from tests.factories import write_agent, write_script, write_tool
    from tests.traces.test_masking_at_rest import stored_text_by_table
    from traces.models import AuditRecord

    tools = tmp_path / "tools"
    tools.mkdir()
    settings.HARNESS_TOOL_DIRS = [*settings.HARNESS_TOOL_DIRS, tools]
    parameters = {"type": "object", "additionalProperties": {"type": "string"}}
    tool = write_tool(tools, parameters=parameters)  # echoes its arguments back
    keyed = {"zhang.wei@example.com": "VIP", "+8613812345678": "callback"}
    script = write_script(
        tmp_path,
        [{"tool_calls": [{"name": tool["name"], "arguments": keyed}]}, {"text": "Noted."}],
    )
    agent = write_agent(agent_dir, model=f"scripted:{script}", tools=[tool["name"]])

    response = acme.post("/api/v1/runs", {"agent": agent["name"], "user": "alice", "input": "go"})

    assert response.status_code == 200, response.content
    run = Run.objects.get(request_id=response.json()["request_id"])
    io = AuditRecord.objects.get(request_id=run.request_id, kind="tool_io")
    stored = {"z***@example.com": "VIP", "+86 138****5678": "callback"}
    assert io.payload["result"]["echo"] == stored
    leaks = [
        (clear, table)
        for table, text in stored_text_by_table().items()
        for clear in ("zhang.wei@example.com", "13812345678")
        if clear in text
    ]
    assert leaks == []
