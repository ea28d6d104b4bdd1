"""The commands of the README and of the docs/ pages, run as written against the demo `make run`
serves, so that the documentation cannot drift from the product again.

The test does what `make run` does (migrate, load the demo, `scripts/run-demo.sh`: a real
gunicorn and a real Celery worker) on embedded defaults in a temporary `var/` and on a free
port that is never the default 8000, twice: the second start must print the same API key, and
the first key must still work. Then it runs every command block of `PAGES` that talks to the
server (each block that calls `curl`, and the one-machine callback recipe) or runs an agent
from the terminal (`manage.py run_agent`, on the same embedded database), page by page in the
order of `PAGES` and in file order within a page, in bash, with `HARNESS_URL` and `HARNESS_KEY`
exported exactly as the banner's `export` line prints them: nothing of the installation is
written into the blocks. Variables and functions a block defines are kept for the next blocks
of the same page (one terminal session per page; a page never needs another page's), without
running the block's commands again. One substitution remains: the callback receiver's port
`9100` becomes a free port, because a fixed port may be taken on a shared CI machine. Every
`curl` must answer 2xx.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.servers import free_port

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
# The pages whose command blocks run, in this order (README first: it sets up nothing the
# others need; the policy page's chain rule changes scenario 5, see AFTER_THE_BLOCKS).
# docs/policies.md and docs/costs.md come from other branches of issue 23: a page not there
# yet has no blocks to run.
PAGES = [
    "README.md",
    "docs/runs.md",
    "docs/policy-reference.md",
    "docs/policies.md",
    "docs/console.md",
    "docs/costs.md",
    "docs/replay-reference.md",
    "docs/experiments.md",
    "docs/evidence.md",
]
BANNER_END = "Ctrl-C stops the server and the worker."
# An async run calls back a receiver on this machine: let loopback through.
ALLOWED_NETWORKS = "127.0.0.1/32"

pytestmark = pytest.mark.skipif(
    not (ROOT / ".venv" / "bin" / "celery").exists(),
    reason="scripts/run-demo.sh needs the project's .venv (make install)",
)


# What makes a block one the test runs: it needs only the demo `make run` serves.
RUNNABLE = ("curl ", "webhook-receiver.py", "manage.py run_agent")


@dataclass
class Block:
    heading: str
    line: int
    text: str
    page: str = "README.md"


def command_blocks(readme: str, page: str = "README.md") -> list[Block]:
    """Fenced ``sh``/``bash``/``console`` blocks that call the server (``curl``), run the
    webhook receiver or run an agent from the terminal, with the nearest heading. ``console``
    blocks keep their ``$`` commands (and continuation lines), not the output shown under
    them."""
    blocks: list[Block] = []
    heading, fence, start, body = "", None, 0, []
    for number, line in enumerate(readme.splitlines(), start=1):
        if fence is None:
            if line.startswith("#"):
                heading = line.lstrip("#").strip()
            elif line.startswith("```"):
                fence, start, body = line[3:].strip(), number, []
            continue
        if line.startswith("```"):
            text = _commands(body) if fence == "console" else "\n".join(body)
            runs_something = any(command in text for command in RUNNABLE)
            if fence in ("sh", "bash", "console") and runs_something:
                blocks.append(Block(heading, start, text, page))
            fence = None
            continue
        body.append(line)
    return blocks


def _commands(lines: list[str]) -> str:
    kept, continued = [], False
    for line in lines:
        if line.startswith("$ ") or continued:
            kept.append(line[2:] if line.startswith("$ ") else line)
            continued = line.rstrip().endswith("\\")
    return "\n".join(kept)


@dataclass
class Demo:
    url: str
    key: str
    env: dict[str, str]
    banners: list[str]
    var: Path


def demo_env(var: Path, port: int) -> dict[str, str]:
    """The embedded defaults, whatever tier the suite runs on."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE")
    }
    return env | {
        "HARNESS_VAR_DIR": str(var),
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "HARNESS_WEBHOOK_ALLOWED_NETWORKS": ALLOWED_NETWORKS,
    }


def start_demo(env: dict[str, str], log: Path) -> tuple[subprocess.Popen, str]:
    """`scripts/run-demo.sh` in its own process group; returns it and its banner."""
    out = log.open("w")
    process = subprocess.Popen(
        ["scripts/run-demo.sh"],
        cwd=ROOT,
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    # Generous: on a loaded machine (CI, or several suites at once) start-up takes minutes.
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        text = log.read_text(encoding="utf-8", errors="replace")
        if BANNER_END in text:
            return process, text
        if process.poll() is not None:
            break
        time.sleep(0.3)
    stop(process)
    pytest.fail(f"run-demo.sh did not come up:\n{log.read_text(errors='replace')}")


def stop(process: subprocess.Popen) -> None:
    """SIGTERM to the script's group (its trap stops gunicorn and the worker), then wait."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def printed_key(banner: str) -> str:
    match = re.search(r"API key\s+(hk_\S+)", banner)
    assert match, banner
    return match.group(1)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    """`make run`, stopped and started again (the second start is the one the README's
    commands are run against)."""
    var = tmp_path_factory.mktemp("var")
    port = free_port()
    env = demo_env(var, port)
    python = str(ROOT / ".venv" / "bin" / "python")
    # As `make run` does before scripts/run-demo.sh.
    for command in (
        ["migrate", "--no-input", "-v0"],
        ["collectstatic", "--no-input", "-v0"],
        ["load_demo"],
    ):
        subprocess.run([python, "manage.py", *command], cwd=ROOT, env=env, check=True)
    banners = []
    process, banner = start_demo(env, var / "run-1.log")
    banners.append(banner)
    stop(process)
    process, banner = start_demo(env, var / "run-2.log")
    banners.append(banner)
    try:
        yield Demo(f"http://127.0.0.1:{port}", printed_key(banner), env, banners, var)
    finally:
        stop(process)


def api(demo: Demo, method: str, path: str, body: object = None, **headers: str) -> dict:
    request = urllib.request.Request(
        demo.url + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={
            "Authorization": f"Bearer {demo.key}",
            "Content-Type": "application/json",
            **headers,
        },
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read() or b"null")


def test_make_run_prints_the_same_key_after_a_restart_and_it_still_works(demo):
    first, second = demo.banners

    assert printed_key(first) == printed_key(second)
    assert "NEW key" in first
    assert "the same key as at the last start" in second
    assert api(demo, "GET", "/api/v1/runs?limit=1")["results"] == []


def printed_scenarios(banner: str) -> list[tuple[str, str]]:
    """Each demo scenario's title and ``curl`` command, as ``make run`` printed them."""
    found = re.findall(
        r"^  \d+\. (.+)\n(?:.*\n)*?(  curl -s \S+/api/v1/runs .*\\\n.*)$", banner, re.M
    )
    return [(title, command.replace("\\\n", "")) for title, command in found]


def tool_outcomes(demo: Demo, run: dict) -> dict[str, dict]:
    """The audited outcome of each tool call of the run (the last call of each tool)."""
    spans = api(demo, "GET", f"/api/v1/runs/{run['id']}/trace")["spans"]
    return {s["name"]: s["audit"][0]["payload"] for s in spans if s["kind"] == "tool_call"}


def finished_run(demo: Demo, run: dict) -> dict:
    """A run held for approval, approved (by alice: not the run's user) and finished by the
    worker; any other run as it is."""
    if run["status"] != "awaiting_approval":
        return run
    [held] = api(demo, "GET", f"/api/v1/runs/{run['id']}/approvals")
    decision = {"decision": "approve", "arguments_sha256": held["arguments_sha256"]}
    path = f"/api/v1/runs/{run['id']}/approvals/{held['call_id']}"
    api(demo, "POST", path, decision, **{"X-Harness-User": "alice"})
    # Generous: the worker (concurrency 2) may still be busy with what earlier blocks queued.
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        run = api(demo, "GET", f"/api/v1/runs/{run['id']}")
        if run["status"] not in ("queued", "running", "awaiting_approval"):
            return run
        time.sleep(0.3)
    pytest.fail(f"the worker did not finish the approved run {run['id']}")


# Per scenario: what each tool must have answered, and what the answer must then say.
SCENARIO_TRUTHS = {
    "The ticket case": (
        {"get_ticket": "ok", "update_ticket": "ok", "notify_user": "ok"},
        "agent-li",
    ),
    "The ticket case, in Chinese": (
        {"get_ticket": "ok", "update_ticket": "ok", "notify_user": "ok"},
        "agent-li",
    ),
    "Personal data, masked everywhere": ({"get_ticket": "ok"}, "assigned to agent-chen"),
    "An escalation held for approval": ({"update_ticket": "ok"}, "is now escalated"),
    "A prompt-injected customer message, refused by the chain rule": (
        {"get_ticket_messages": "ok", "get_customer": "ok"},
        "only half of the duplicate charge",
    ),
    "A tool that fails, and an answer the honesty guard corrects": (
        {"update_ticket": "error"},
        "The tool update_ticket failed",
    ),
}


# Runs before the README's blocks, as a newcomer would: those edit the demo's policy.
def test_make_run_leaves_the_terminal_to_its_banner(demo):
    """The servers' logs go to var/: after the banner, the terminal stays quiet, even when
    pages, static files and a missing favicon are asked for (which used to print warnings)."""
    for path in ["/admin/login/", "/static/admin/css/base.css", "/favicon.ico"]:
        urllib.request.urlopen(demo.url + path, timeout=30).read()
    with pytest.raises(urllib.error.HTTPError):  # a 404: Django logs a warning
        urllib.request.urlopen(demo.url + "/nowhere", timeout=30)
    api(demo, "POST", "/api/v1/runs", {"agent": "ticket-assistant", "user": "bob", "input": "hi"})
    time.sleep(2)
    printed = (demo.var / "run-2.log").read_text(encoding="utf-8")
    after_banner = printed[printed.index(BANNER_END) + len(BANNER_END) :]
    assert after_banner.strip() == ""
    assert f"export HARNESS_URL={demo.url} HARNESS_KEY={demo.key}" in printed
    assert "Not Found" in (demo.var / "web.log").read_text(encoding="utf-8")  # kept, in var/
    assert "StreamingHttpResponse" not in (demo.var / "web.log").read_text(encoding="utf-8")
    assert "No hostname was supplied" not in (demo.var / "worker.log").read_text(encoding="utf-8")


def test_every_printed_scenario_curl_answers_true_to_its_tools_twice(demo):
    scenarios = printed_scenarios(demo.banners[-1])
    assert [title for title, _ in scenarios] == list(SCENARIO_TRUTHS)
    for _ in range(2):  # the second time on the tickets the first one changed
        for title, command in scenarios:
            printed = subprocess.run(
                ["bash", "-c", command], capture_output=True, text=True, check=True, timeout=120
            )
            run = finished_run(demo, json.loads(printed.stdout))
            outcomes = tool_outcomes(demo, run)
            statuses, said = SCENARIO_TRUTHS[title]
            assert {tool: outcomes[tool]["status"] for tool in statuses} == statuses, (
                title,
                outcomes,
            )
            assert run["status"] == "succeeded", (title, run)
            assert said in run["answer"], (title, run["answer"])
            assert (run["outcome"], run["outcome_counts"]) == SCENARIO_OUTCOMES[title], title
            if "prompt-injected" in title:
                customer_says = outcomes["get_ticket_messages"]["result"]["messages"][0]["text"]
                assert "only half of the duplicate charge" in customer_says
                assert "send_external_email" not in outcomes  # refused before it ran


# What each scenario's run says happened inside it, on the demo's own policy.
SCENARIO_OUTCOMES = {
    "The ticket case": ("clean", {}),
    "The ticket case, in Chinese": ("clean", {}),
    "Personal data, masked everywhere": ("clean", {}),
    "An escalation held for approval": ("clean", {}),
    "A prompt-injected customer message, refused by the chain rule": ("refused", {"refused": 1}),
    "A tool that fails, and an answer the honesty guard corrects": (
        "corrected",
        {"tool_failed": 1, "corrected": 1},
    ),
}


def run_printed_scenario(demo: Demo, command: str) -> tuple[dict, dict[str, dict]]:
    printed = subprocess.run(
        ["bash", "-c", command], capture_output=True, text=True, check=True, timeout=120
    )
    run = finished_run(demo, json.loads(printed.stdout))
    return run, tool_outcomes(demo, run)


def all_blocks() -> list[Block]:
    return [
        block
        for page in PAGES
        if (ROOT / page).exists()
        for block in command_blocks((ROOT / page).read_text(encoding="utf-8"), page)
    ]


def test_every_page_with_commands_is_run():
    """A docs page whose blocks talk to the server is in PAGES, so none is skipped unseen."""
    with_commands = {
        f"docs/{path.name}"
        for path in (ROOT / "docs").glob("*.md")
        if command_blocks(path.read_text(encoding="utf-8"))
    }
    assert with_commands <= set(PAGES), sorted(with_commands - set(PAGES))


# What a block must not hold: the server, the key or a held call written into it, or a
# variable the reader was never told to set. (127.0.0.1:9100 is the callback receiver's.)
WRITTEN_IN = re.compile(r"127\.0\.0\.1:(?!9100)|localhost:|hk_|\$KEY\b|9f2c|call_1_1|<id>|…")


def commands(block: Block) -> list[str]:
    """The block's commands, continuation lines joined, comments left out."""
    joined = re.sub(r"\\\n", " ", block.text)
    return [
        line.split(" # ")[0] for line in joined.splitlines() if not line.lstrip().startswith("#")
    ]


def test_command_blocks_reach_the_server_only_through_harness_url_and_key():
    for block in all_blocks():
        for command in commands(block):
            assert not WRITTEN_IN.search(command), f"{block.page}:{block.line}: {command}"
            if re.search(r"\bcurl ", command):
                assert "$HARNESS_URL" in command, f"{block.page}:{block.line}: {command}"


def test_the_readme_and_docs_command_blocks_run_as_written(demo):
    blocks = all_blocks()
    places = {(block.page, block.heading) for block in blocks}
    # The parser still finds what it must: an edit that hides a block fails here.
    assert len(blocks) >= 14, [(b.page, b.heading, b.line) for b in blocks]
    assert {
        ("README.md", "Quickstart"),
        ("README.md", "Demo scenarios"),
        ("docs/policy-reference.md", "Granting a scope"),
        ("docs/policy-reference.md", "Approvals"),
        ("docs/replay-reference.md", "What-if: preview a policy change before saving it"),
    } <= places
    assert any("webhook-receiver.py" in block.text for block in blocks)
    assert any("manage.py run_agent" in block.text for block in blocks)
    assert any("harness_verify.py" in block.text for block in blocks)
    assert demo.url.rsplit(":", 1)[1] != "8000"  # the blocks must not depend on the default

    receiver_port = str(free_port())
    exported = {"HARNESS_URL": demo.url, "HARNESS_KEY": demo.key}  # as the banner prints them
    assert f"export HARNESS_URL={demo.url} HARNESS_KEY={demo.key}" in demo.banners[-1]
    states: dict[str, Path] = {}  # per page: the variables and functions its blocks defined
    for block in blocks:
        script = block.text.replace("9100", receiver_port)
        state = states.setdefault(block.page, demo.var / f"session-{len(states)}.sh")
        output = run_block(script, demo.env | exported, block, state)
        if "webhook-receiver.py" in block.text:
            events = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
            verified = [e for e in events if e.get("verified")]
            assert [e["type"] for e in verified] == ["run.succeeded"], output
            assert verified[0]["data"]["status"] == "succeeded"
        if "manage.py run_agent" in block.text:
            assert "succeeded after" in output, output
        if "harness_verify.py" in block.text:
            assert "OK: receipt of run" in output, output
        if "/events" in block.text:
            assert "run.finished" in output, output


# After the README's blocks: its chain-rules block adds `no-tickets-with-customers` (never
# removed), so scenario 5's get_customer is refused, the run holds no pii and the e-mail goes
# out. Its scripted answer still says the e-mail was refused: the honesty guard corrects it.
AFTER_THE_BLOCKS = dict(
    SCENARIO_TRUTHS,
    **{
        "A prompt-injected customer message, refused by the chain rule": (
            {"get_ticket_messages": "ok", "send_external_email": "ok"},
            "The tool send_external_email succeeded",
        )
    },
)


def test_after_the_readme_blocks_every_scenario_answers_true_to_its_trace(demo):
    """Runs after the README's blocks (file order), on the policy they left."""
    scenarios = printed_scenarios(demo.banners[-1])
    for title, command in scenarios:
        run, outcomes = run_printed_scenario(demo, command)
        statuses, said = AFTER_THE_BLOCKS[title]
        assert {tool: outcomes[tool]["status"] for tool in statuses} == statuses, (title, outcomes)
        assert run["status"] == "succeeded", (title, run)
        assert said in run["answer"], (title, run["answer"])
        failed = [tool for tool, outcome in outcomes.items() if outcome["status"] != "ok"]
        for tool in failed:  # every failure is named in the answer
            assert tool in run["answer"], (title, tool, run["answer"])
        if "prompt-injected" in title:
            assert "was not sent" not in run["answer"], run["answer"]
            assert "only half of the duplicate charge" in run["answer"]
            assert run["outcome"] == "corrected", run
            assert run["outcome_counts"] == {"refused": 1, "corrected": 1}, run
        else:
            assert (run["outcome"], run["outcome_counts"]) == SCENARIO_OUTCOMES[title], title


# Names a block defines: kept for the page's next blocks (`declare -p`, `declare -f`).
ASSIGNED = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)=", re.M)
DEFINED = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(\)\s*\{", re.M)


def keep_state(script: str, state: Path) -> str:
    """Bash that saves what `script` defined into `state`, for the next block to source."""
    names = " ".join(sorted(set(ASSIGNED.findall(script))))
    functions = " ".join(sorted(set(DEFINED.findall(script))))
    saves = []
    if names:
        saves.append(f"declare -p {names} 2>/dev/null")
    if functions:
        saves.append(f"declare -f {functions}")
    saves = saves or [":"]
    return "\n{ " + "; ".join(saves) + f"; }} > {state} || true\n"


# Every curl of a block must answer 2xx; its body is printed as the README shows it.
PREAMBLE = r"""
set -eo pipefail
BODY=$(mktemp)
curl() {
  local status
  status=$(command curl -sS -o "$BODY" -w '%{http_code}' "$@")
  cat "$BODY"; echo
  case "$status" in
    2??) ;;
    *) echo "README command answered HTTP $status: curl $*" >&2; return 1 ;;
  esac
}
"""


def run_block(script: str, env: dict[str, str], block: Block, state: Path) -> str:
    where = f"{block.page} line {block.line} ({block.heading})"
    earlier = f"source {state}\n" if state.exists() else ""
    process = subprocess.Popen(
        ["bash", "-c", PREAMBLE + earlier + script + keep_state(script, state)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=150)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        pytest.fail(f"{where} timed out:\n{script}\n{out}{err}")
    finally:
        with contextlib.suppress(ProcessLookupError):  # a receiver a failed block left behind
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 0, f"{where} failed:\n{script}\n--- out\n{out}\n--- err\n{err}"
    return out


if __name__ == "__main__":  # list the blocks the test runs
    for found in all_blocks():
        print(f"{found.page}:{found.line} [{found.heading}]\n{found.text}\n", file=sys.stdout)
