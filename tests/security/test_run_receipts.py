"""Run receipts: signed (Ed25519 over RFC 8785 JCS), verified offline by one script that needs
only Python and ``cryptography``; any single changed field fails naming it; rotated keys keep
old receipts verifiable; another tenant's receipt is not found; nothing personal in clear."""

from __future__ import annotations

import base64
import copy
import importlib.util
import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import rfc8785
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings as django_settings
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.receipts import signing
from harness.runs import execute_run
from tests.runs import TICKET, call, scripted_agent, start

SCRIPT = Path(django_settings.BASE_DIR) / "scripts" / "harness_verify.py"
ESCALATION = {"ticket_id": TICKET, "action": "escalate", "escalate_reason": "charged twice"}
EMAIL, PHONE = "jane.doe@example.com", "+44 20 7946 0958"


def load_verifier():
    spec = importlib.util.spec_from_file_location("harness_verify", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


verifier = load_verifier()


@pytest.fixture
def finished_run(acme, agent_dir):
    """A run that read a ticket, had an escalation held, approved with an edit by ``admin``,
    and answered; its input carries an e-mail address and a phone number."""
    agent = scripted_agent(
        agent_dir,
        [
            call("get_ticket", ticket_id=TICKET),
            call("update_ticket", **ESCALATION),
            {"text": "Done."},
        ],
    )
    response = start(acme, agent, input=f"Escalate it; reach me at {EMAIL} or {PHONE}.")
    assert response.status_code == 202, response.content
    run = response.json()
    [held] = acme.get(f"/api/v1/runs/{run['id']}/approvals").json()
    decided = acme.post(
        f"/api/v1/runs/{run['id']}/approvals/{held['call_id']}",
        {
            "decision": "approve",
            "arguments_sha256": held["arguments_sha256"],
            "arguments_patch": {"escalate_reason": "refund owed"},
        },
        **{"X-Harness-User": "admin"},
    )
    assert decided.status_code == 200, decided.content
    assert execute_run(run["id"]).status == "succeeded"
    return run["id"]


def download(acme, run_id: str, folder: Path) -> dict[str, Path]:
    receipt = acme.get(f"/api/v1/runs/{run_id}/receipt")
    assert receipt.status_code == 200, receipt.content
    keys = Client().get("/.well-known/harness-receipt-keys")
    assert keys.status_code == 200
    trace = acme.get(f"/api/v1/runs/{run_id}/trace")
    files = {"receipt": receipt.content, "keys": keys.content, "trace": trace.content}
    for name, content in files.items():
        (folder / f"{name}.json").write_bytes(content)
    return {name: folder / f"{name}.json" for name in files}


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> Path:
    """A Python with ``cryptography`` (and what it imports) but no Django, no Harness."""
    folder = tmp_path_factory.mktemp("bare")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()
    )  # fmt: skip
    ours = Path(sysconfig.get_paths()["purelib"])
    for name in ("cryptography", "cffi", "pycparser"):
        (site / name).symlink_to(ours / name)
    for backend in ours.glob("_cffi_backend*"):
        (site / backend.name).symlink_to(backend)
    assert subprocess.run([python, "-c", "import django"], env={}, capture_output=True).returncode
    return python


def verify_in(python: Path, files: dict[str, Path], *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [python, str(SCRIPT), str(files["receipt"]), "--keys", str(files["keys"]), *extra],
        env={}, cwd=files["receipt"].parent, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_a_receipt_of_a_real_run_verifies_offline_with_its_trace(
    acme, finished_run, tmp_path, bare_python
):
    files = download(acme, finished_run, tmp_path)
    done = verify_in(bare_python, files, "--trace", str(files["trace"]))
    assert done.returncode == 0, done.stderr
    assert f"receipt of run {finished_run}" in done.stdout
    receipt = json.loads(files["receipt"].read_text())["receipt"]
    [approval] = receipt["approvals"]
    assert (approval["decided_by"], approval["edited_fields"]) == ("admin", ["/escalate_reason"])
    verdicts = {c["tool"]: c["verdict"] for c in receipt["tool_calls"]}
    assert verdicts == {"get_ticket": "executed", "update_ticket": "executed"}
    assert receipt["model_routes"]
    assert receipt["chain"]["tenant_link"]["final"] is True


def test_a_changed_byte_in_the_trace_fails_naming_the_record(
    acme, finished_run, tmp_path, bare_python
):
    files = download(acme, finished_run, tmp_path)
    trace = json.loads(files["trace"].read_text())
    record = next(r for s in trace["spans"] for r in s["audit"] if r["kind"] == "tool_io")
    record["payload"]["arguments"]["ticket_id"] += "X"
    files["trace"].write_text(json.dumps(trace))
    done = verify_in(bare_python, files, "--trace", str(files["trace"]))
    assert done.returncode == 1
    assert f"trace record {record['sequence']} (tool_io" in done.stderr
    assert "content was changed" in done.stderr


def _pointer_get(document, pointer):
    node = document
    for part in pointer.lstrip("/").split("/"):
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def _pointer_set(document, pointer, value):
    *parents, last = pointer.lstrip("/").split("/")
    node = _pointer_get(document, "/" + "/".join(parents)) if parents else document
    node[int(last) if isinstance(node, list) else last] = value


def _first(receipt, test):
    return next(i for i, c in enumerate(receipt["receipt"]["tool_calls"]) if test(c))


# Ten (and more) single fields an editor might change, each a JSON pointer into the receipt.
def edited_fields(receipt):
    ran = _first(receipt, lambda c: "arguments_sha256" in c)
    return [
        f"/receipt/tool_calls/{ran}/verdict",
        f"/receipt/tool_calls/{ran}/decisions/0/verdict",
        f"/receipt/tool_calls/{ran}/decisions/0/rule",
        f"/receipt/tool_calls/{ran}/decisions/0/policy_version",
        f"/receipt/tool_calls/{ran}/arguments_sha256",
        f"/receipt/tool_calls/{ran}/result_sha256",
        "/receipt/approvals/0/decided_by",
        "/receipt/approvals/0/edited_arguments_sha256",
        "/receipt/chain/head/hash",
        "/receipt/chain/tenant_link/hash",
        "/receipt/answer_sha256",
        "/receipt/input_sha256",
        "/receipt/run/outcome",
        "/receipt/run/tenant",
        "/receipt/model_routes/0",
        "/signature/value",
        "/signature/kid",
    ]


def _changed(value, replacement):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1 + abs(replacement) % 1000
    if value is None:
        return f"x{replacement}"
    text = str(value)
    if not text:
        return "x"
    swapped = f"{replacement:x}"[0]
    if text[-1] == swapped:  # another last character, whichever the draw ("…0" and 0)
        swapped = "1" if swapped == "0" else "0"
    return text[:-1] + swapped


@pytest.fixture
def signed_files(acme, finished_run, tmp_path):
    return download(acme, finished_run, tmp_path)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_each_single_field_edit_fails_verification_naming_the_field(signed_files, tmp_path, data):
    original = json.loads(signed_files["receipt"].read_text())
    pointer = data.draw(st.sampled_from(edited_fields(original)))
    document = copy.deepcopy(original)
    old = _pointer_get(document, pointer)
    new = _changed(old, data.draw(st.integers(0, 2**31)))
    if pointer == "/signature/value":  # another well-formed signature
        new = base64.urlsafe_b64encode(bytes(64)).rstrip(b"=").decode()
    assert new != old
    _pointer_set(document, pointer, new)
    edited = tmp_path / f"edited-{abs(hash(pointer))}.json"
    edited.write_text(json.dumps(document))
    problems, _ = verifier.verify(str(edited), str(signed_files["keys"]))
    assert problems, pointer
    assert any(pointer in problem for problem in problems), (pointer, problems)


def test_the_untouched_receipt_verifies_in_process_too(signed_files):
    problems, summary = verifier.verify(
        str(signed_files["receipt"]), str(signed_files["keys"]), str(signed_files["trace"])
    )
    assert problems == []
    assert summary


def _pem(key: Ed25519PrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def _public_pem(key: Ed25519PrivateKey) -> str:
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def test_after_rotation_old_receipts_verify_with_the_old_key_still_published(
    acme, finished_run, tmp_path, settings
):
    old_key, new_key = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    (tmp_path / "before").mkdir()
    (tmp_path / "after").mkdir()
    settings.HARNESS_RECEIPT_SIGNING_KEY = _pem(old_key)
    before = download(acme, finished_run, tmp_path / "before")
    settings.HARNESS_RECEIPT_SIGNING_KEY = _pem(new_key) + _public_pem(old_key)
    after = download(acme, finished_run, tmp_path / "after")

    published = json.loads(after["keys"].read_text())["keys"]
    assert [k["status"] for k in published] == ["current", "retired"]
    assert [k["kid"] for k in published] == [
        signing.key_id(new_key.public_key()),
        signing.key_id(old_key.public_key()),
    ]
    assert json.loads(before["receipt"].read_text())["signature"]["kid"] == published[1]["kid"]
    assert json.loads(after["receipt"].read_text())["signature"]["kid"] == published[0]["kid"]
    assert verifier.verify(str(before["receipt"]), str(after["keys"]))[0] == []
    assert verifier.verify(str(after["receipt"]), str(after["keys"]))[0] == []
    # A key withdrawn from the published set (compromised) no longer vouches for anything.
    problems, _ = verifier.verify(str(before["receipt"]), str(_only_current(after["keys"])))
    assert any("/signature/kid" in problem for problem in problems)


def _only_current(path: Path) -> Path:
    keys = json.loads(path.read_text())
    keys["keys"] = [k for k in keys["keys"] if k["status"] == "current"]
    out = path.with_name("current-only.json")
    out.write_text(json.dumps(keys))
    return out


def test_another_tenants_receipt_is_not_found(acme, globex, finished_run):
    response = globex.get(f"/api/v1/runs/{finished_run}/receipt")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "run_not_found"


def test_a_run_that_has_not_ended_has_no_receipt_yet(acme, agent_dir):
    agent = scripted_agent(agent_dir, [call("update_ticket", **ESCALATION), {"text": "Done."}])
    run = start(acme, agent).json()
    response = acme.get(f"/api/v1/runs/{run['id']}/receipt")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "receipt_unavailable"


def test_a_receipt_holds_no_personal_data_in_clear(acme, finished_run):
    text = acme.get(f"/api/v1/runs/{finished_run}/receipt").content.decode()
    for clear in (EMAIL, "jane.doe", PHONE, PHONE.replace(" ", ""), "7946", "charged twice"):
        assert clear not in text


# Member names where UTF-16 order and code point order differ (astral vs. U+E000 to U+FFFF),
# and numbers around where ECMAScript switches between plain and exponent notation.
NAMES = st.text(st.characters(exclude_categories=["Cs"])) | st.text(
    st.sampled_from("a\u00e9\ue000\uffff\U00010000\U0001f600"), max_size=3
)
NEAR_SWITCHES = st.builds(
    lambda mantissa, exponent: mantissa * 10.0**exponent,
    st.floats(1, 10, exclude_max=True) | st.integers(1, 9).map(float),
    st.integers(-9, 23),
)


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-(2**53) + 1, 2**53 - 1)
        | st.floats(allow_nan=False, allow_infinity=False)
        | NEAR_SWITCHES
        | st.text(st.characters(exclude_categories=["Cs"])),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(NAMES, inner, max_size=4),
        max_leaves=12,
    )
)
def test_the_verifiers_own_jcs_is_rfc_8785(value):
    """The script cannot import the library the server signs with: its canonical form must be
    the library's byte for byte (numbers in ECMAScript form, keys in UTF-16 order)."""
    assert verifier.jcs(value) == rfc8785.dumps(value)


@pytest.mark.parametrize(
    ("key", "fault"),
    [
        ("not a key", "holds no PEM block"),
        (_public_pem(Ed25519PrivateKey.generate()), "first PEM block must be the Ed25519 private"),
        ("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----", "block 1 cannot be read"),
    ],
)
def test_a_bad_signing_key_stops_start_up_naming_the_variable(settings, key, fault):
    from harness.checks import check_receipt_signing_key

    settings.HARNESS_RECEIPT_SIGNING_KEY = key
    [error] = check_receipt_signing_key(None)
    assert error.id == "harness.E004"
    assert "HARNESS_RECEIPT_SIGNING_KEY" in error.msg
    assert fault in error.msg
