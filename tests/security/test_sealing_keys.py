"""Finding 6: sealing, fingerprint and audit-checkpoint keys are derived (HKDF), validated at
start-up, and rotate (several keys, newest first; ``manage.py reseal``)."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet, InvalidToken
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command

from harness.models import Run
from harness.settings.env import env_keys, hkdf
from tests.factories import create_tenant
from traces.chain import anchor_run, append_audit_record, verify_chain
from traces.queries import find_runs_by_identifier
from traces.sealing import seal, unseal
from traces.services import mask_for_storage

ROOT = Path(__file__).resolve().parents[2]
OLD = "old-sealing-key-0123456789abcdefghijklmnop"
NEW = "new-sealing-key-ZYXWVUTSRQPONMLKJIHGFEDCBA"


def _start_up(**env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    environ.update(env, DJANGO_SETTINGS_MODULE="harness.settings.test")
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_short_sealing_key_stops_start_up_naming_the_variable() -> None:
    result = _start_up(HARNESS_SEALING_KEY="0123456789abcdef")  # 16 characters
    assert result.returncode != 0
    assert "HARNESS_SEALING_KEY" in result.stderr
    assert "at least 32" in result.stderr


@pytest.mark.parametrize(
    "name", ["HARNESS_SEALING_KEY", "HARNESS_FINGERPRINT_KEY", "HARNESS_AUDIT_CHECKPOINT_KEY"]
)
def test_each_key_variable_is_validated_key_by_key(monkeypatch, name: str) -> None:
    monkeypatch.setenv(name, f"{NEW},short")
    with pytest.raises(ImproperlyConfigured, match=f"{name}: key 2 of 2 has 5 characters"):
        env_keys(name, "default")
    monkeypatch.setenv(name, f"{NEW}, {OLD}")
    assert env_keys(name, "default") == [NEW, OLD]


def test_any_long_key_text_seals_and_the_key_is_derived_not_truncated(settings) -> None:
    # 64 characters that are not hex used to fail every seal; longer keys were truncated.
    material = "z" * 64 + "the tail counts too"
    settings.HARNESS_SEALING_KEYS = [material]
    token = seal({"answer": "clear"})
    assert unseal(token) == {"answer": "clear"}
    truncated = base64.urlsafe_b64encode(material.encode()[:32])
    with pytest.raises(InvalidToken):
        Fernet(truncated).decrypt(token.encode())
    derived = base64.urlsafe_b64encode(hkdf(material, "harness.sealing.v2"))
    assert Fernet(derived).decrypt(token.encode()) == b'{"answer":"clear"}'


@pytest.mark.django_db
def test_rotation_unseals_with_older_keys_and_reseal_moves_everything_to_the_newest(
    settings,
) -> None:
    tenant = create_tenant()
    settings.HARNESS_SEALING_KEYS = [OLD]
    run = Run.objects.create(
        tenant=tenant,
        request_id="r-rotation",
        agent="a",
        user_id="u",
        max_steps=1,
        sealed=seal({"x": 1}),
    )
    settings.HARNESS_SEALING_KEYS = [NEW, OLD]
    run.refresh_from_db()
    assert unseal(run.sealed) == {"x": 1}
    call_command("reseal", stdout=open(os.devnull, "w"))  # noqa: SIM115
    settings.HARNESS_SEALING_KEYS = [NEW]
    run.refresh_from_db()
    assert unseal(run.sealed) == {"x": 1}
    settings.HARNESS_SEALING_KEYS = [OLD]
    assert unseal(run.sealed) is None


@pytest.mark.django_db
def test_reseal_fails_loudly_on_a_value_no_listed_key_opens(settings) -> None:
    tenant = create_tenant()
    settings.HARNESS_SEALING_KEYS = [OLD]
    Run.objects.create(
        tenant=tenant,
        request_id="r-lost",
        agent="a",
        user_id="u",
        max_steps=1,
        sealed=seal({"x": 1}),
    )
    settings.HARNESS_SEALING_KEYS = [NEW]
    with pytest.raises(Exception, match="sealed under no listed key"):
        call_command("reseal", stdout=open(os.devnull, "w"))  # noqa: SIM115


@pytest.mark.django_db
def test_searching_still_finds_runs_fingerprinted_with_an_older_key(settings) -> None:
    settings.HARNESS_FINGERPRINT_KEYS = [OLD]
    settings.HARNESS_FINGERPRINT_KEY = hkdf(OLD, "harness.fingerprint.v2").hex()
    mask_for_storage("req-old-key", "acme", "call me on 13812345678")
    settings.HARNESS_FINGERPRINT_KEYS = [NEW, OLD]
    settings.HARNESS_FINGERPRINT_KEY = hkdf(NEW, "harness.fingerprint.v2").hex()
    mask_for_storage("req-new-key", "acme", "call me on 13812345678")
    assert set(find_runs_by_identifier("acme", "+86 138 1234 5678")) == {
        "req-old-key",
        "req-new-key",
    }
    settings.HARNESS_FINGERPRINT_KEYS = [NEW]
    assert find_runs_by_identifier("acme", "13812345678") == ["req-new-key"]


@pytest.mark.django_db
def test_audit_heads_signed_with_an_older_key_verify_while_it_is_listed(settings) -> None:
    settings.HARNESS_AUDIT_CHECKPOINT_KEYS = [OLD]
    settings.HARNESS_AUDIT_CHECKPOINT_KEY = hkdf(OLD, "harness.audit-checkpoint.v2").hex()
    record = append_audit_record("req", "acme", "span", "tool_io", {"n": 1})
    anchor_run("req", "acme", (record.sequence, record.hash))  # the head is signed here
    settings.HARNESS_AUDIT_CHECKPOINT_KEYS = [NEW, OLD]
    settings.HARNESS_AUDIT_CHECKPOINT_KEY = hkdf(NEW, "harness.audit-checkpoint.v2").hex()
    assert verify_chain("acme").ok
    settings.HARNESS_AUDIT_CHECKPOINT_KEYS = [NEW]
    report = verify_chain("acme")
    assert not report.ok
    assert "signature" in report.broken.reason
