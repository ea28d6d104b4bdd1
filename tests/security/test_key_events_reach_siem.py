"""Every change to an API key's validity is a security event for the SIEM: a key revoked by
issuing a replacement (``create_api_key(replace=True)``, ``create_api_key --replace``) was
revoked with one ``update()`` that sent no signal, and a key retired by a rotation left no
event at all, so an auditor's SIEM never saw either."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from hypothesis.extra.django import TestCase

from harness.api_keys import create_api_key, rotate_api_key
from harness.models import ApiKey, Tenant
from harness.siem.models import SecurityEvent


def _events(activity: str) -> list[SecurityEvent]:
    return list(SecurityEvent.objects.filter(category="api_key", activity=activity).order_by("id"))


class KeyEventsTests(TestCase):
    def setUp(self) -> None:
        Tenant.objects.get_or_create(slug="acme", defaults={"name": "Acme"})

    @hypothesis_settings(max_examples=8, deadline=None)
    @given(earlier=st.integers(min_value=1, max_value=4))
    def test_each_key_a_replacement_revokes_is_an_event(self, earlier: int) -> None:
        SecurityEvent.objects.all().delete()
        ApiKey.objects.all().delete()
        old = [create_api_key("acme", "svc").api_key.prefix for _ in range(earlier)]
        create_api_key("acme", "svc", replace=True)
        revoked = _events("revoke")
        assert sorted(e.detail["uid"] for e in revoked) == sorted(old)
        assert all(e.tenant == "acme" and e.detail["name"] == "svc" for e in revoked)
        assert ApiKey.objects.filter(revoked_at__isnull=True).count() == 1

    def test_a_rotation_records_when_the_old_key_stops(self) -> None:
        old = create_api_key("acme", "svc").api_key
        new = rotate_api_key("acme", "svc", timedelta(hours=2))
        (event,) = _events("rotate")
        old.refresh_from_db()
        assert event.detail == {
            "uid": old.prefix,
            "name": "svc",
            "replaced_by": new.api_key.prefix,
            "expires_at": old.expires_at.isoformat(),
        }
        assert new.secret not in str(event.detail)


@pytest.mark.django_db
def test_a_last_used_stamp_is_no_event(acme):
    before = SecurityEvent.objects.count()
    acme.get("/api/v1/runs")
    assert SecurityEvent.objects.count() == before
