"""Finding 10 (and issue 26): the API is exactly as documented. Schemathesis runs every check it
has against the live schema served by a live server, in both generation modes (positive: a
request the schema allows must be taken; negative: one it forbids must be refused), through all
its phases: examples, coverage (boundary values, missing required headers and bodies, methods
the path does not declare, requests without the key), fuzzing and stateful sequences. Every
answer must be documented (status, content type, headers, body), none a server error. 0
findings; the budget is bounded (examples per operation, a wall-time cap).

Two settings say how the API reads text, not what it skips:
- NUL is refused anywhere in a body (harness/api/parsers.py); the schema says so of every free
  string (`^[^\\x00]*$`), but OpenAPI 3.0 cannot say it of an object's keys, so none is generated.
- 422 counts as taking a well-formed request: it is the answer for one the schema allows but
  whose meaning is refused (an Idempotency-Key reused for another body, an exclusive rule naming
  one label twice), which no schema can express.

Not covered here: ``GET /runs/{id}/events`` (a stream that stays open while a run is going;
its bad cursors are tested in test_bad_input.py). The experiments API (``/datasets``,
``/experiments``) is covered: its assertion shapes are in the schema (a regex assertion's value
is text; one that does not compile is well formed but refused, 422)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
import yaml

from harness.api_keys import create_api_key

EXAMPLES_PER_OPERATION = 8
TIME_CAP_S = 600  # with the experiments API's 11 operations (240 before them)
SEED = 26
CONFIG = """
[generation]
allow-x00 = false

[checks.positive_data_acceptance]
expected-statuses = ["2xx", "3xx", "401", "403", "404", "409", "422", "429"]
"""


def run_schemathesis(url: str, key: str, workdir: Path) -> tuple[dict, str]:
    config = workdir / "schemathesis.toml"
    config.write_text(CONFIG, encoding="utf-8")
    st = Path(sys.executable).with_name("st")
    command = [
        str(st),
        "--config-file",
        str(config),
        "run",
        f"{url}/api/v1/schema",
        "--checks",
        "all",
        "--mode",
        "all",
        "--phases",
        "examples,coverage,fuzzing,stateful",
        "--max-examples",
        str(EXAMPLES_PER_OPERATION),
        "--seed",
        str(SEED),
        "--workers",
        "1",
        "--exclude-path-regex",
        "/events$",
        "--header",
        f"Authorization: Bearer {key}",
        "--header",
        "X-Harness-User: alice",
        "--report",
        "json",
        "--report-json-path",
        str(workdir / "report.json"),
        "--no-color",
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=TIME_CAP_S, cwd=workdir, check=False
    )
    report = json.loads((workdir / "report.json").read_text(encoding="utf-8"))
    return report, done.stdout[-20000:] + done.stderr[-5000:]


def test_every_operation_answers_exactly_as_its_schema_says(live_server, demo, tmp_path):
    key = create_api_key("acme", "schemathesis").secret
    started = time.monotonic()
    report, output = run_schemathesis(live_server.url, key, tmp_path)
    elapsed = time.monotonic() - started
    assert report["operations"]["tested"] >= 20, output
    assert report["operations"]["errored"] == 0, output
    ran = {name for name, phase in report["phases"].items() if phase["status"] != "skip"}
    assert {"coverage", "fuzzing", "stateful"} <= ran, (report["phases"], output)
    assert report["test_cases"]["generated"] >= 500, output
    assert not report["failures"], output
    assert not report["errors"], output
    assert report["exit_code"] == 0, output
    assert elapsed < TIME_CAP_S


def test_get_runs_is_documented_as_a_page_and_the_key_as_a_bearer_scheme(client):
    schema = yaml.safe_load(client.get("/api/v1/schema").content)
    page = schema["paths"]["/api/v1/runs"]["get"]["responses"]["200"]["content"]
    ref = page["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    assert set(schema["components"]["schemas"][ref]["properties"]) == {"results", "next_cursor"}
    assert schema["components"]["securitySchemes"]["TenantApiKey"] == {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "hk_…",
        "description": "A tenant's API key (`manage.py create_api_key --tenant …`).",
    }
    assert "Effect960Enum" not in schema["components"]["schemas"]
    assert {"PermissionEffectEnum", "RuleEffectEnum"} <= set(schema["components"]["schemas"])


def test_every_operation_documents_a_dependency_outage_with_the_error_body(client):
    """503 service_unavailable (with Retry-After) can answer any operation; 413 any body."""
    schema = yaml.safe_load(client.get("/api/v1/schema").content)
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            answer = operation["responses"]["503"]["content"]["application/json"]["schema"]
            assert answer == {"$ref": "#/components/schemas/Error"}, (method, path)
            if "requestBody" in operation:
                assert "413" in operation["responses"], (method, path)


@pytest.mark.parametrize("path", ["/api/v1/runs", "/api/v1/policies/rules", "/api/v1/schema"])
@pytest.mark.parametrize("authenticated", [True, False])
def test_trace_is_method_not_allowed_over_http(live_server, acme, path, authenticated):
    headers = {"Authorization": f"Bearer {acme.key}", "X-Harness-User": "alice"}
    response = requests.request(
        "TRACE", f"{live_server.url}{path}", headers=headers if authenticated else {}, timeout=10
    )
    assert response.status_code == 405, response.text
    assert response.json()["error"]["code"] == "method_not_allowed"
