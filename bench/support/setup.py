"""A throw-away database, the benchmark's agents and tools, and Django set up on them."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
TOOLS = Path(__file__).resolve().parent / "tools"

# The system prompt of the benchmark agents: the size of a real one, so that token estimates
# (budgets, goodput) are those of a real run.
SYSTEM_PROMPT = (
    "You are a support operations assistant. Use the tools to look tickets up and act on them "
    "on behalf of the user. Only act within what the tools allow. When a tool returns an "
    "error, report the error to the user as it is; never claim an action succeeded unless its "
    "tool call succeeded."
)

# The peer benchmark's task: get the ticket, look up two users in one response, assign the
# ticket, answer. 4 model calls, 4 tool calls.
PEER_SCRIPT = [
    {"tool_calls": [{"name": "peer_get_ticket", "arguments": {"ticket_id": "T-1"}}]},
    {
        "tool_calls": [
            {"name": "peer_get_user", "arguments": {"user_id": "U-1"}},
            {"name": "peer_get_user", "arguments": {"user_id": "U-2"}},
        ]
    },
    {
        "tool_calls": [
            {
                "name": "peer_update_ticket",
                "arguments": {"ticket_id": "T-1", "action": "assign", "assignee_id": "U-2"},
            }
        ]
    },
    {"text": "Assigned ticket T-1 to U-2 (Bob Ops, on the ops team)."},
]
PEER_STEPS = len(PEER_SCRIPT)


def bench_database_url(suffix: str = "bench") -> str:
    """``<name>_<suffix>`` beside the environment's PostgreSQL database, else a SQLite file."""
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith("postgres"):
        base, _, name = url.rpartition("/")
        return f"{base}/{name or 'harness'}_{suffix}"
    return f"sqlite:///{ROOT / 'var' / f'{suffix}.sqlite3'}"


def create_database(url: str) -> None:
    """Drop and create the database at ``url`` (PostgreSQL), or remove the SQLite file."""
    if not url.startswith("postgres"):
        path = Path(url.removeprefix("sqlite:///"))
        path.parent.mkdir(parents=True, exist_ok=True)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        return
    import psycopg

    base, _, name = url.rpartition("/")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def scripted_agent(folder: Path, name: str, responses: list[dict], **extra: object) -> None:
    """Write an agent file playing ``responses`` with the scripted model."""
    script = folder / f"{name}.script.json"
    script.write_text(json.dumps(responses))
    tools = sorted({c["name"] for r in responses for c in r.get("tool_calls", [])})
    spec = {
        "name": name,
        "description": "benchmark agent",
        "system_prompt": SYSTEM_PROMPT,
        "model": f"scripted:{script}",
        "tools": tools,
        "max_steps": len(responses),
        **extra,
    }
    (folder / "agents").mkdir(exist_ok=True)
    (folder / "agents" / f"{name}.json").write_text(json.dumps(spec))


def lookup_script(steps: int) -> list[dict]:
    """``steps - 1`` tool steps (one ``bench_lookup`` call each), then a final answer."""
    calls = [
        {"tool_calls": [{"name": "bench_lookup", "arguments": {"n": n}}]} for n in range(steps - 1)
    ]
    return [*calls, {"text": "done"}]


def prepare(agent_steps: dict[str, int], peer_agent: bool = False, suffix: str = "bench") -> str:
    """Create the database and agents, set up Django, migrate, load the demo.

    ``agent_steps`` maps agent names to their step counts (``bench_lookup`` tool steps and a
    final answer). Returns the database URL. Sets the environment (``DATABASE_URL``,
    ``HARNESS_AGENT_DIRS``, ``HARNESS_TOOL_DIRS``) so that workers and servers started later
    see the same database, agents and tools.
    """
    url = bench_database_url(suffix)
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "harness.settings.base")
    folder = Path(tempfile.mkdtemp(prefix="bench-agents-"))
    for name, steps in agent_steps.items():
        scripted_agent(folder, name, lookup_script(steps))
    if peer_agent:
        scripted_agent(folder, "bench-peer", PEER_SCRIPT)
    os.environ["HARNESS_AGENT_DIRS"] = str(folder / "agents")
    os.environ["HARNESS_TOOL_DIRS"] = str(TOOLS)
    create_database(url)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))

    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("load_demo", verbosity=0)
    open_limits("acme")
    return url


def open_limits(tenant: str, **limits: object) -> None:
    """Move a tenant's admission limits out of the way (measure the harness, not them)."""
    from policy.models import TenantLimits

    TenantLimits.objects.update_or_create(
        tenant=tenant,
        defaults={
            "runs_per_second": 100_000,
            "max_concurrent_runs": 100_000,
            "model_calls_per_minute": 1_000_000,
            **limits,
        },
    )
