"""The audit streamed to SIEM sinks (harness/siem/, docs/siem.md), against real receivers
started by the tests: an HTTP server (JSON lines, Splunk HEC) and a TCP syslog listener (TLS
with a trustme CA). Every kind of record arrives, in order per run, checkable against the
chain; a sink that is down and comes back gets every record at least once; a record a sink
refuses for good is a dead letter; the lag is measured."""

from __future__ import annotations

import json
import ssl
import time
from collections import defaultdict

import pytest
import trustme
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from harness.models import SecurityEvent, SiemCursor, SiemDeadLetter
from harness.services import create_api_key
from harness.siem.delivery import deliver_to_sinks, siem_status
from harness.siem.events import GENESIS_HASH, event_content, event_hash
from harness.siem.sinks import parse_sinks
from tests.runs import call, scripted_agent, start
from tests.support.siem_receivers import HttpReceiver, SyslogReceiver
from traces.chain import record_hash
from traces.models import AuditRecord

TOKEN = "hec-token-0123456789abcdef"


@pytest.fixture
def receiver():
    server = HttpReceiver().start()
    yield server
    server.stop()


def sink_settings(settings, *sinks: dict, secrets: dict | None = None) -> None:
    settings.HARNESS_SIEM_SINKS = list(sinks)
    settings.HARNESS_SIEM_SECRETS = secrets or {}
    settings.HARNESS_SIEM_SETTLE_S = 0
    settings.HARNESS_SIEM_RETRY_BASE_S = 0.1
    settings.HARNESS_SIEM_RETRY_MAX_S = 0.2


def hec_sink_settings(settings, url: str) -> None:
    """A Splunk HEC sink of the audit at ``url``, its token in the variable ``HEC``."""
    sink = {"name": "splunk", "type": "splunk_hec", "url": url, "token_env": "HEC",
            "streams": ["audit"]}  # fmt: skip
    sink_settings(settings, sink, secrets={"HEC": TOKEN})


def tls_syslog(settings, tmp_path, *, trusted: bool) -> SyslogReceiver:
    """A syslog listener over TLS with a certificate from a test CA, and a sink of the audit
    to it that trusts that CA (or, ``trusted=False``, another one)."""
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)
    ca_file = tmp_path / "ca.pem"
    (ca if trusted else trustme.CA()).cert_pem.write_to_path(str(ca_file))
    listener = SyslogReceiver(tls_context=server_context).start()
    sink_settings(settings, {"name": "syslog", "type": "syslog", "host": "127.0.0.1",
                             "port": listener.port, "tls": True, "ca_file": str(ca_file),
                             "streams": ["audit"]})  # fmt: skip
    return listener


def start_runs(acme, count: int) -> None:
    for n in range(count):
        response = acme.post(
            "/api/v1/runs",
            {"agent": "ticket-assistant", "user": "bob", "input": f"Why T-20250318-007? ({n})"},
        )
        assert response.status_code in (200, 202), response.content


def check_against_the_chain(record: dict) -> None:
    chain = record["chain"]
    assert (
        record_hash(
            tenant=chain["tenant"],
            sequence=chain["sequence"],
            prev_hash=chain["prev_hash"],
            request_id=chain["request_id"],
            span_id=chain["span_id"],
            kind=chain["kind"],
            payload=record["data"],
            created_at=_parse(chain["created_at"]),
        )
        == chain["hash"]
    )


def _parse(value: str):
    from datetime import datetime

    return datetime.fromisoformat(value)


def in_order_per_run(records: list[dict]) -> dict[str, list[int]]:
    sequences: dict[str, list[int]] = defaultdict(list)
    for record in records:
        if record["metadata"]["stream"] == "audit":
            sequences[record["resource"]["uid"]].append(record["chain"]["sequence"])
    return sequences


def test_every_kind_of_record_reaches_an_https_sink_as_json_lines(acme, receiver, settings, client):
    sink_settings(settings, {"name": "soc", "type": "https", "url": receiver.url})
    start_runs(acme, 2)
    acme.post(
        "/api/v1/policies/permissions",
        {"subject": "role:member", "scope": "ticket:read", "effect": "deny"},
        **{"X-Harness-User": "alice"},
    )
    create_api_key("acme", "siem-test")
    get_user_model().objects.create_superuser("root", password="root-pw-1234")
    client.post("/admin/login/", {"username": "root", "password": "wrong"})
    client.post("/admin/login/", {"username": "root", "password": "root-pw-1234"})

    results = deliver_to_sinks()

    records = receiver.lines
    assert all(r.error == "" for r in results)
    assert receiver.headers[0]["Content-Type"] == "application/x-ndjson"
    activities = {(r["metadata"]["stream"], r["activity"]) for r in records}
    assert {("audit", "model_request"), ("audit", "tool_io"), ("audit", "policy_decision")} <= (
        activities
    )
    assert ("policy_change", "policy_add") in activities
    assert ("security", "api_key_create") in activities
    assert ("security", "console_login_login") in activities
    assert ("security", "console_login_login_failed") in activities
    audit = [r for r in records if r["metadata"]["stream"] == "audit"]
    assert sorted(r["metadata"]["id"] for r in audit) == list(
        AuditRecord.objects.order_by("id").values_list("id", flat=True)
    )
    for record in audit:
        check_against_the_chain(record)
        assert {"class_uid", "class_name", "activity", "time", "actor", "resource", "outcome"} <= (
            record.keys()
        )
    for sequences in in_order_per_run(records).values():
        assert sequences == sorted(sequences) == list(range(1, len(sequences) + 1))
    # Masked as stored: the phone number of the input never leaves.
    assert "13812345678" not in "".join(receiver.bodies)
    assert all(c.lag_records == 0 for c in SiemCursor.objects.all())


def test_the_siem_copy_of_an_edited_record_no_longer_matches_its_hash(acme, receiver, settings):
    sink_settings(settings, {"name": "soc", "type": "https", "url": receiver.url,
                             "streams": ["audit"]})  # fmt: skip
    start_runs(acme, 1)
    deliver_to_sinks()
    record = next(r for r in receiver.lines if r["activity"] == "tool_io")

    record["data"] = {**record["data"], "error": "edited"}

    with pytest.raises(AssertionError):
        check_against_the_chain(record)


def test_security_events_are_chained(acme, settings):
    create_api_key("acme", "one")
    create_api_key("acme", "two")

    events = list(SecurityEvent.objects.order_by("id"))

    assert [e.activity for e in events][-2:] == ["create", "create"]
    previous = GENESIS_HASH
    for event in events:
        assert event.prev_hash == previous
        assert event.hash == event_hash(event.prev_hash, event_content(event))
        previous = event.hash
    assert "hk_" not in json.dumps([e.detail for e in events])  # prefixes, never a secret


def test_splunk_hec_gets_events_with_its_token(acme, receiver, settings):
    hec_sink_settings(settings, receiver.url)
    start_runs(acme, 1)

    deliver_to_sinks()

    assert receiver.headers[0]["Authorization"] == f"Splunk {TOKEN}"
    events = receiver.lines
    assert {e["sourcetype"] for e in events} == {"harness:ocsf"}
    assert [e["event"]["metadata"]["id"] for e in events] == list(
        AuditRecord.objects.order_by("id").values_list("id", flat=True)
    )
    assert all(e["time"] == e["event"]["time_ms"] / 1000 for e in events)


def test_syslog_over_tls_gets_rfc5424_messages(acme, settings, tmp_path):
    listener = tls_syslog(settings, tmp_path, trusted=True)
    try:
        start_runs(acme, 1)
        deliver_to_sinks()
        deadline = time.monotonic() + 10
        expected = AuditRecord.objects.count()
        while len(listener.messages) < expected and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        listener.stop()

    assert [r["metadata"]["id"] for r in listener.records] == list(
        AuditRecord.objects.order_by("id").values_list("id", flat=True)
    )
    first = listener.messages[0]
    assert int(first["pri"]) // 8 == 13  # log audit
    assert first["app"] == "harness"
    assert first["time"].endswith("Z")


def test_syslog_over_tls_refuses_a_listener_the_ca_did_not_sign(acme, settings, tmp_path):
    listener = tls_syslog(settings, tmp_path, trusted=False)
    try:
        start_runs(acme, 1)
        [result] = deliver_to_sinks()
    finally:
        listener.stop()

    assert "CERTIFICATE_VERIFY_FAILED" in result.error
    assert listener.messages == []
    assert SiemCursor.objects.get(sink="syslog").position == 0


def test_a_sink_that_is_down_backs_off_and_the_lag_grows(acme, settings):
    down = HttpReceiver()  # never started
    sink_settings(settings, {"name": "soc", "type": "https", "url": down.url,
                             "streams": ["audit"]})  # fmt: skip
    # A back-off the second attempt surely falls within, however slow the machine.
    settings.HARNESS_SIEM_RETRY_BASE_S = settings.HARNESS_SIEM_RETRY_MAX_S = 60
    start_runs(acme, 1)

    [first] = deliver_to_sinks()
    [second] = deliver_to_sinks()  # within the back-off: not tried

    cursor = SiemCursor.objects.get(sink="soc", stream="audit")
    assert "ConnectError" in first.error
    assert second.error == ""
    assert second.records == 0
    assert (cursor.position, cursor.failures) == (0, 1)
    assert cursor.lag_records == AuditRecord.objects.count()
    assert cursor.lag_seconds > 0
    assert siem_status()[0]["lag_records"] == cursor.lag_records


def test_a_record_the_sink_refuses_for_good_is_a_dead_letter_and_can_be_sent_again(
    acme, settings, client
):
    refusing = HttpReceiver(answer=lambda body: 400 if "siem-refused" in body else 200).start()
    sink_settings(settings, {"name": "soc", "type": "https", "url": refusing.url,
                             "streams": ["policy_change", "security"]})  # fmt: skip
    try:
        acme.post(
            "/api/v1/policies/permissions",
            {"subject": "role:siem-refused", "scope": "ticket:read", "effect": "deny"},
            **{"X-Harness-User": "alice"},
        )
        create_api_key("acme", "after-the-edit")
        deliver_to_sinks()
        letter = SiemDeadLetter.objects.get()
        delivered = [r["activity"] for r in refusing.lines]

        root = get_user_model().objects.create_superuser("root", password="root-pw-1234")
        client.force_login(root)
        page = client.get("/admin/harness/siemdeadletter/")
        refusing.answer = lambda body: 200
        client.post(
            "/admin/harness/siemdeadletter/",
            {"action": "send_again", "_selected_action": [letter.pk]},
        )
    finally:
        refusing.stop()

    assert letter.stream == "policy_change"
    assert "HTTP 400" in letter.error
    assert "security_api_key_create" not in delivered  # a stream of its own
    assert SiemCursor.objects.get(stream="policy_change").position == letter.position
    assert page.status_code == 200
    assert b"HTTP 400" in page.content
    letter.refresh_from_db()
    assert letter.redelivered_at is not None
    assert refusing.lines[-1]["activity"] == "policy_add"
    assert refusing.lines[-1]["data"]["rule"][1] == "role:siem-refused"


def test_a_sink_token_never_reaches_the_record_or_the_error(acme, settings):
    failing = HttpReceiver(answer=lambda body: 503).start()
    hec_sink_settings(settings, failing.url)
    try:
        start_runs(acme, 1)
        [result] = deliver_to_sinks()
    finally:
        failing.stop()

    cursor = SiemCursor.objects.get()
    assert "HTTP 503" in result.error
    assert TOKEN not in cursor.last_error
    assert TOKEN not in json.dumps(siem_status())


@pytest.mark.parametrize(
    ("sinks", "message"),
    [
        ({"name": "x", "type": "kafka"}, "'type' must be one of"),
        ({"name": "x", "type": "https", "url": "ftp://siem"}, "'url' must be an http(s) URL"),
        ({"name": "x", "type": "syslog", "host": "siem"}, "syslog needs 'host' and 'port'"),
        ({"name": "x", "type": "https", "url": "https://s", "streams": ["runs"]}, "unknown"),
        ({"name": "x", "type": "https", "url": "https://s", "token_env": "NOPE"}, "NOPE"),
    ],
)
def test_a_bad_sink_setting_stops_start_up_naming_the_sink(settings, sinks, message):
    with pytest.raises(ImproperlyConfigured) as raised:
        parse_sinks([sinks], {})
    assert message in str(raised.value)
    assert "HARNESS_SIEM_SINKS[1]" in str(raised.value)
    settings.HARNESS_SIEM_SINKS = [sinks]
    settings.HARNESS_SIEM_SECRETS = {}
    with pytest.raises(SystemCheckError, match=r"harness\.E120"):
        call_command("check")


def test_an_approval_reaches_the_sink_with_who_decided(acme, agent_dir, receiver, settings):
    sink_settings(settings, {"name": "soc", "type": "https", "url": receiver.url,
                             "streams": ["approval"]})  # fmt: skip
    escalation = {"ticket_id": "T-20250318-007", "action": "escalate", "escalate_reason": "twice"}
    run = start(acme, scripted_agent(agent_dir, [call("update_ticket", **escalation),
                                                 {"text": "ok"}])).json()  # fmt: skip
    [approval] = acme.get(run["links"]["approvals"]).json()
    decided = acme.post(
        f"/api/v1/runs/{run['id']}/approvals/{approval['call_id']}",
        {"decision": "deny", "arguments_sha256": approval["arguments_sha256"]},
        **{"X-Harness-User": "admin"},
    )
    assert decided.status_code == 200, decided.content

    deliver_to_sinks()

    [record] = receiver.lines
    assert record["activity"] == "approval_denied"
    assert record["outcome"] == "failure"
    assert record["actor"] == {"tenant": "acme", "user": "admin"}
    assert record["resource"]["uid"] == run["request_id"]
    assert record["resource"]["name"] == "update_ticket"


def test_delivery_stops_at_a_gap_in_the_ids_until_it_has_settled():
    from datetime import timedelta
    from types import SimpleNamespace

    from django.utils import timezone

    from harness.siem.sources import STREAMS, settled

    now = timezone.now()
    old, new = now - timedelta(seconds=60), now
    settle = timedelta(seconds=30)

    def ids(after: int, *rows: tuple[int, object]) -> list[int]:
        found = [SimpleNamespace(id=i, created_at=t) for i, t in rows]
        return [row.id for row in settled(found, after, settle, STREAMS["policy_change"])]

    # Id 3 not visible yet (a transaction still open) and id 4 is young: wait at the gap.
    assert ids(0, (1, old), (2, old), (4, new)) == [1, 2]
    # Id 4 is older than the settle time: id 3 was rolled back, pass the gap.
    assert ids(0, (1, old), (2, old), (4, old)) == [1, 2, 4]
    # A gap right after the cursor counts too.
    assert ids(5, (7, new)) == []
    assert ids(5, (6, new), (7, new)) == [6, 7]
