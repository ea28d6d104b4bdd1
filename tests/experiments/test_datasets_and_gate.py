"""Datasets (tenant-scoped, their own permission), and the CI gate ``run_experiment``."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import call_command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from experiments.models import Dataset, Experiment
from experiments.recorded import canonical
from experiments.services import recording_of
from tests.experiments.helpers import SEARCH_FIRST, demo_variant, make_dataset, recorded_runs
from tests.runs import ADMIN


def gate(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("run_experiment", *args, stdout=out, stderr=io.StringIO())
    except SystemExit as exit_:
        return int(exit_.code or 0), out.getvalue()
    return 0, out.getvalue()


def test_run_experiment_exits_1_only_when_regressions_exceed_the_maximum(acme, tmp_path):
    make_dataset(acme, recorded_runs(acme), "gate")
    base = ["--tenant", "acme", "--dataset", "gate", "--max-regressions", "0"]

    code, out = gate(*base, "--model", "scripted:demo")
    assert code == 0, out
    assert "regressions 0" in out
    assert "same 3" in out

    worse = demo_variant(tmp_path, lambda s: s["responses"].insert(0, SEARCH_FIRST))
    code, out = gate(*base, "--model", worse)
    assert "same 0" in out
    regressions = int(out.split("regressions ")[1].split()[0])
    assert code == (1 if regressions > 0 else 0), out
    assert regressions > 0, out  # the off-record error makes the outcome tool_failed
    assert gate(*base[:-1], "3", "--model", worse)[0] == 0


def test_a_dataset_holds_the_recording_sealed_and_shows_masked_fields(acme):
    runs = recorded_runs(acme)
    created = make_dataset(acme, runs)
    assert set(created) == {"id", "name", "items"}

    detail = acme.get(f"/api/v1/datasets/{created['id']}").json()
    assert detail["items"] == 3
    masked = detail["item_list"][1]
    assert "13812345678" not in json.dumps(detail)  # the masked copy, as the run's
    assert masked["tool_calls"] == [{"step": 1, "tool": "get_ticket"}]
    stored = Dataset.objects.get(id=created["id"]).items.get(run_id=runs[1])
    assert "13812345678" not in stored.recording  # sealed
    assert "13812345678" in recording_of(stored)["input"]
    assert recording_of(stored)["calls"][0]["result"]["ticket_id"] == "T-20250320-011"
    listed = acme.get("/api/v1/datasets").json()["datasets"]
    assert [d["name"] for d in listed] == ["demo-three"]


def test_items_can_be_added_removed_and_given_expectations(acme):
    runs = recorded_runs(acme)
    created = make_dataset(acme, runs[:1])
    url = f"/api/v1/datasets/{created['id']}"
    added = acme.post(f"{url}/items", {"runs": runs}, **ADMIN)
    assert added.status_code == 200
    assert added.json()["items"] == 3
    item = acme.get(url).json()["item_list"][0]["id"]
    expectations = {
        "must_call": ["get_ticket"],
        "assertions": [{"type": "regex", "value": "T-\\d+"}],
    }
    edited = acme.send("patch", f"{url}/items/{item}", {"expectations": expectations}, **ADMIN)
    assert edited.status_code == 200, edited.content
    assert edited.json()["expectations"] == expectations
    bad = {"expectations": {"assertions": [{"type": "regex", "value": "("}]}}
    refused = acme.send("patch", f"{url}/items/{item}", bad, **ADMIN)
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "invalid_assertion"
    not_text = {"expectations": {"assertions": [{"type": "regex", "value": 5}]}}
    assert acme.send("patch", f"{url}/items/{item}", not_text, **ADMIN).status_code == 400
    assert acme.get(url).json()["item_list"][0]["expectations"] == expectations  # kept
    assert acme.send("delete", f"{url}/items/{item}", **ADMIN).status_code == 204
    assert acme.get(url).json()["items"] == 2


@pytest.mark.parametrize(
    ("headers", "status", "code"),
    [({}, 400, "acting_user_required"), ({"X-Harness-User": "bob"}, 403, "permission_denied")],
)
def test_making_datasets_and_experiments_needs_their_own_scopes(acme, headers, status, code):
    runs = recorded_runs(acme)
    refused = acme.post("/api/v1/datasets", {"name": "x", "runs": runs}, **headers)
    assert (refused.status_code, refused.json()["error"]["code"]) == (status, code)
    assert not Dataset.objects.exists()
    make_dataset(acme, runs)
    body = {"dataset": "demo-three", "candidate": {"model": "scripted:demo"}}
    refused = acme.post("/api/v1/experiments", body, **headers)
    assert (refused.status_code, refused.json()["error"]["code"]) == (status, code)
    assert not Experiment.objects.exists()


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)


# No deadline or speed health check: on a loaded shared machine, slow is not wrong.
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.text(alphabet="abcxyz_", max_size=4), _json, max_size=5))
def test_canonical_arguments_ignore_key_order(arguments: dict[str, Any]) -> None:
    shuffled = dict(reversed(list(arguments.items())))
    assert canonical(shuffled) == canonical(arguments)
    assert json.loads(canonical(arguments)) == json.loads(canonical(shuffled))


def test_canonical_arguments_normalise_numbers_and_unicode() -> None:
    assert canonical({"limit": 1.0}) == canonical({"limit": 1})
    assert canonical({"q": "e\u0301"}) == canonical({"q": "\u00e9"})
    assert canonical({"limit": 1.5}) != canonical({"limit": 1})
    assert canonical({"a": "1"}) != canonical({"a": 1})


def test_adding_nothing_is_refused_and_a_patch_without_expectations_changes_nothing(acme):
    runs = recorded_runs(acme)
    created = make_dataset(acme, runs[:1])
    url = f"/api/v1/datasets/{created['id']}"
    refused = acme.post(f"{url}/items", {}, **ADMIN)
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "nothing_to_add"
    item = acme.get(url).json()["item_list"][0]
    kept = acme.send("patch", f"{url}/items/{item['id']}", {}, **ADMIN)
    assert kept.status_code == 200
    assert kept.json() == item
