"""Agent files are data: a bad one stops start-up with a message naming the file."""

import json

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from tests.factories import write_agent


def run_checks():
    call_command("check")


def test_an_agent_file_that_is_not_json_is_named_with_line_and_column(agent_dir):
    (agent_dir / "broken.json").write_text('{"name": "x",\n  oops}', encoding="utf-8")

    with pytest.raises(SystemCheckError) as error:
        run_checks()

    assert "broken.json" in str(error.value)
    assert "line 2" in str(error.value)


def test_an_agent_file_missing_a_key_is_named_with_the_fault(agent_dir):
    (agent_dir / "thin.json").write_text(json.dumps({"name": "thin"}), encoding="utf-8")

    with pytest.raises(SystemCheckError) as error:
        run_checks()

    assert "thin.json" in str(error.value)
    assert "'description' is a required property" in str(error.value)


def test_an_agent_naming_a_tool_that_does_not_exist_is_an_error(agent_dir):
    write_agent(agent_dir, name="lost", tools=["teleport"])

    with pytest.raises(SystemCheckError) as error:
        run_checks()

    assert "'teleport'" in str(error.value)


def test_two_agents_with_one_name_are_an_error(agent_dir):
    write_agent(agent_dir, name="ticket-assistant")

    with pytest.raises(SystemCheckError) as error:
        run_checks()

    assert "already defined" in str(error.value)


def test_agent_files_from_harness_agent_dirs_can_be_run(acme, agent_dir):
    spec = write_agent(agent_dir, model="scripted:demo")

    response = acme.post(
        "/api/v1/runs", {"agent": spec["name"], "user": "bob", "input": "T-20250318-007?"}
    )

    assert response.status_code == 200
    assert response.json()["agent"] == spec["name"]


def test_harness_agent_dirs_is_read_from_the_environment(tmp_path, monkeypatch):
    import os

    from harness.settings.env import env_paths

    monkeypatch.setenv("HARNESS_AGENT_DIRS", f"{tmp_path / 'a'}{os.pathsep}{tmp_path / 'b'}")

    assert env_paths("HARNESS_AGENT_DIRS") == [tmp_path / "a", tmp_path / "b"]
