"""`make run` prints the same API key at every start while it still works (kept sealed in
var/), and says so when it had to issue a new one."""

import stat

from harness.api_keys import authenticate_api_key
from harness.demo import demo_api_key
from harness.models import ApiKey


def test_the_demo_key_is_kept_sealed_and_reused(demo, tmp_path):
    path = tmp_path / "demo-api-key.sealed"

    first = demo_api_key("acme", path)
    second = demo_api_key("acme", path)

    assert not first.reused
    assert second.reused
    assert second.secret == first.secret
    assert authenticate_api_key(first.secret) is not None
    assert first.secret not in path.read_text()  # sealed, not in clear
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_revoked_demo_key_is_replaced_and_reported_as_new(demo, tmp_path):
    path = tmp_path / "demo-api-key.sealed"
    first = demo_api_key("acme", path)
    ApiKey.objects.filter(name="make-run").update(revoked_at="2026-01-01T00:00:00Z")

    second = demo_api_key("acme", path)

    assert not second.reused
    assert second.secret != first.secret
    assert authenticate_api_key(second.secret) is not None
    assert demo_api_key("acme", path).secret == second.secret


def test_a_kept_file_that_cannot_be_unsealed_gives_a_new_key(demo, tmp_path):
    path = tmp_path / "demo-api-key.sealed"
    path.write_text("not a sealed token")

    issued = demo_api_key("acme", path)

    assert not issued.reused
    assert authenticate_api_key(issued.secret) is not None


def test_a_key_of_another_tenant_is_not_reused(demo, tmp_path):
    path = tmp_path / "demo-api-key.sealed"
    globex = demo_api_key("globex", path)

    acme = demo_api_key("acme", path)

    assert not acme.reused
    assert authenticate_api_key(acme.secret).tenant.slug == "acme"
    assert authenticate_api_key(globex.secret) is not None  # another name's key is untouched
