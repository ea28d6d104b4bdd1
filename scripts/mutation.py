"""Mutation testing of the modules where a bug leaks data, hides tampering or lets a call
through (``make mutation``; docs/mutation.md says what the figures mean).

    python scripts/mutation.py [MODULE ...] [--budget-s N] [--fresh] [--survivors]

For each module (all of ``MODULES`` by default, the smaller first), mutmut mutates its source
in a scratch copy of the project (``var/mutation/<module>/``: the worktree itself is never
touched) and runs, against each mutant, the selected tests that reach the mutated function:
only that module's fast tests, so that one module's run is feasible on a laptop. It prints
``killed/total (%)`` per module; a timed-out mutant counts as killed (the tests did not pass),
a mutant no selected test reaches as survived.

Runs are resumable: a module's scratch copy keeps mutmut's results, and a run stopped by its
budget (``--budget-s``, per module) goes on where it stopped next time; the figures then say how
many mutants were not checked. ``--fresh`` starts the module again from the current sources
and tests. The masker runs as pure Python (``HARNESS_MASKING_COMPILED=0``): the compiled
modules would hide the mutants.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRATCH = ROOT / "var" / "mutation"


@dataclass(frozen=True)
class Module:
    sources: tuple[str, ...]  # files or folders mutmut mutates
    tests: tuple[str, ...]  # the fast tests that exercise them
    exclude: tuple[str, ...] = ()  # files of a mutated folder left alone (docs/mutation.md)


# The masker's fast tests (unit tests and a few runs through the API).
_MASKING_TESTS = (
    "tests/traces/test_masking.py",
    "tests/traces/test_masking_speed.py",
    "tests/traces/test_masking_phones.py",
    "tests/traces/test_masking_plugins.py",
    "tests/traces/test_masking_remembered.py",
    "tests/traces/test_masking_search.py",
    "tests/security/test_masking_json_escapes.py",
    "tests/security/test_masking_leaks.py",
)

# Smallest first: a budget spent on the big ones leaves the small ones finished.
MODULES: dict[str, Module] = {
    "mcp_pin": Module(
        ("tools/mcp/pin.py",),
        ("tests/tools/test_mcp_pin.py", "tests/tools/test_mcp_files.py"),
    ),
    "decisions": Module(
        ("harness/engine/decisions.py",),
        (
            # The chain with its ports in memory (a few seconds a mutant, mostly pytest starting),
            # first: the runs through the API below cost 20 to 50 s a mutant they reach.
            "tests/harness/test_decision_chain.py",
            "tests/harness/test_refusal_errors.py",
            "tests/harness/test_decide_call.py",
            "tests/harness/test_replay.py",
            "tests/tools/test_validation.py",
            "tests/tools/test_visibility.py",
            "tests/policy/test_chain_rules.py",
            "tests/policy/test_approvals.py",
            "tests/security/test_edits_are_decisions.py",
        ),
    ),
    "approvals": Module(
        ("policy/approvals.py",),
        (
            "tests/policy/test_approval_decisions.py",
            "tests/policy/test_approvals.py",
            "tests/security/test_four_eyes.py",
        ),
    ),
    "rules": Module(
        ("policy/rules.py",),
        (
            "tests/policy/test_rule_evaluation.py",
            "tests/policy/test_rule_validation.py",
            "tests/security/test_rule_fields_matched_whole.py",
            "tests/policy/test_chain_rules.py",
            "tests/policy/test_policy_api.py",
        ),
    ),
    "replay": Module(
        ("harness/replay/run.py",),
        (
            # Replay's reading, judging and report with its reads in memory, first (as above).
            "tests/harness/test_replay_verdicts.py",
            "tests/harness/test_replay.py",
            "tests/harness/test_admin_replay.py",
            "tests/harness/test_decide_call.py",
        ),
    ),
    "chain": Module(
        ("traces/chain.py",),
        (
            "tests/traces/test_audit_chain.py",
            "tests/traces/test_audit_hash_columns.py",
            "tests/traces/test_audit_hash_format.py",
            "tests/traces/test_audit_chain_breaks.py",
            # Final links and ended runs (``_RunWalk.finish``), retention's checkpoint, and
            # heads signed with an older key: chain.py's code no test above reaches.
            "tests/security/test_audit_final_links.py",
            "tests/traces/test_retention.py",
            "tests/security/test_sealing_keys.py::"
            "test_audit_heads_signed_with_an_older_key_verify_while_it_is_listed",
        ),
    ),
    # The masker, in four parts with their own tests and figures (one part's run is feasible in
    # a sitting; ``masking`` names them all). compiled.py is left alone: which build of the
    # masker is loaded (compiled or not) is not what a masked value is.
    "masking_core": Module(
        (
            "traces/masking/masker.py",
            "traces/masking/kinds.py",
            "traces/masking/emails.py",
            "traces/masking/gate.py",
            "traces/masking/detectors.py",
            "traces/masking/pointers.py",
        ),
        _MASKING_TESTS,
    ),
    "masking_numbers": Module(
        ("traces/masking/numbers.py", "traces/masking/checks.py"),
        (*_MASKING_TESTS, "tests/traces/test_masking_standards.py"),
    ),
    "masking_phones": Module(
        ("traces/masking/phones.py",),
        (*_MASKING_TESTS, "tests/traces/test_masking_standards.py"),
    ),
    "masking_plugins": Module(
        ("traces/masking/plugins.py", "traces/masking/patterns.py"),
        (
            "tests/traces/test_masking_plugins.py",
            "tests/security/test_tenant_pattern_redos.py",
            "tests/security/test_masking_leaks.py",
        ),
    ),
}

# Names for several modules at once (``make mutation MODULE=masking``).
GROUPS: dict[str, tuple[str, ...]] = {
    "masking": ("masking_core", "masking_numbers", "masking_phones", "masking_plugins"),
}

KILLED = {"killed", "timeout", "segfault", "caught by type check"}


def status_of(exit_code: int | None) -> str:
    from mutmut.stats import status_by_exit_code

    return status_by_exit_code[exit_code]


def prepare(name: str, module: Module, fresh: bool) -> Path:
    """The scratch project for ``name``: the worktree's files (tracked and new, not ignored)
    and a mutmut configuration for this module only."""
    root = SCRATCH / name
    if fresh and root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],  # noqa: S607  (git on PATH)
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.decode()
    tops = set()
    for relative in filter(None, listed.split("\0")):
        source = ROOT / relative
        if not source.is_file():
            continue  # deleted in the worktree, not yet in git
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists() or target.read_bytes() != source.read_bytes():
            shutil.copy2(source, target)
        tops.add(relative.split("/", 1)[0])
    config = {
        "source_paths": list(module.sources),
        "do_not_mutate": list(module.exclude),
        "also_copy": sorted(tops - {"tests", "pyproject.toml", "setup.cfg"}),
        "pytest_add_cli_args": ["-p", "no:cacheprovider", "-p", "no:randomly", "--reuse-db"],
        "pytest_add_cli_args_test_selection": list(module.tests),
        # A mutant that loops is stopped: the tests' own CPU time, times 5, plus 10 s.
        "timeout_multiplier": 5.0,
        "timeout_constant": 10.0,
        "use_git_change_detection": False,
        "on_dependency_change": "rerun",
        # Workers fork from a process that has run no test: a worker forked from one that has
        # (mutmut's default) inherits its open database connection, and tests fail for that
        # reason, which would count mutants as killed.
        "process_isolation": "forkserver",
    }
    # In setup.cfg, not pyproject.toml (which mutmut would read first): a change of the
    # selection must not make mutmut think a project file changed and start again.
    lines = ["[mutmut]"]
    for key, value in config.items():
        if value == []:
            continue
        if isinstance(value, list):
            lines.append(f"{key}=" + "".join(f"\n    {item}" for item in value))
        else:
            lines.append(f"{key}={str(value).lower() if isinstance(value, bool) else value}")
    (root / "setup.cfg").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def run(root: Path, budget_s: float, mutants: list[str] = ()) -> bool:
    """mutmut on the scratch project (on ``mutants`` only, if named), one worker, within
    ``budget_s``; True if it finished."""
    env = os.environ | {
        "HARNESS_MASKING_COMPILED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        # A failing hypothesis example is not shrunk (tests/conftest.py): the first kills.
        "HARNESS_HYPOTHESIS_PROFILE": "mutation",
    }
    env.pop("DATABASE_URL", None)  # the embedded tier: SQLite in the scratch copy's var/
    env.pop("REDIS_URL", None)
    mutmut = Path(sys.executable).parent / "mutmut"
    log = (root / "mutmut.log").open("a", encoding="utf-8")
    process = subprocess.Popen(  # noqa: S603  (this venv's mutmut, our arguments)
        [str(mutmut), "run", "--max-children", "1", *mutants],
        cwd=root,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        process.wait(timeout=budget_s)
        return process.returncode == 0
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGINT)  # mutmut saves what it has checked
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        return False
    finally:
        log.close()


def results(root: Path, module: Module) -> dict[str, str]:
    """Every mutant of ``module`` and its status, from mutmut's files."""
    found: dict[str, str] = {}
    for source in module.sources:
        for meta in sorted((root / "mutants" / source).parent.rglob("*.py.meta")):
            relative = meta.relative_to(root / "mutants").as_posix()[: -len(".meta")]
            if not relative.startswith(source) or relative in module.exclude:
                continue
            data = json.loads(meta.read_text(encoding="utf-8"))
            for key, code in data.get("exit_code_by_key", {}).items():
                found[key] = status_of(code)
    return found


def score(name: str, statuses: dict[str, str]) -> str:
    total = len(statuses)
    killed = sum(status in KILLED for status in statuses.values())
    unchecked = sum(status == "not checked" for status in statuses.values())
    survived = sum(status in ("survived", "no tests") for status in statuses.values())
    percent = 100 * killed / total if total else 0.0
    line = f"{name:10} {killed}/{total} killed ({percent:.1f} %), {survived} survived"
    if unchecked:
        checked = total - unchecked
        partial = 100 * killed / checked if checked else 0.0
        line += f", {unchecked} NOT CHECKED (budget): {partial:.1f} % of those checked"
    return line


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", metavar="MODULE", help=", ".join(MODULES))
    parser.add_argument("--budget-s", type=float, default=1800, help="per module (default 30 min)")
    parser.add_argument("--fresh", action="store_true", help="start again from the sources")
    parser.add_argument("--survivors", action="store_true", help="list surviving mutants")
    parser.add_argument(
        "--retest", action="store_true", help="run again only the mutants that survived"
    )
    parser.add_argument("--report-only", action="store_true", help="print figures, run nothing")
    args = parser.parse_args()
    asked = args.modules or list(MODULES)
    unknown = [name for name in asked if name not in MODULES and name not in GROUPS]
    if unknown:
        known = ", ".join([*MODULES, *GROUPS])
        parser.error(f"unknown module {', '.join(unknown)}: one of {known}")
    names = [part for name in asked for part in GROUPS.get(name, (name,))]
    lines = []
    every_status: dict[str, dict[str, str]] = {}
    for name in names:
        module = MODULES[name]
        root = SCRATCH / name
        if not args.report_only:
            retest = []
            if args.retest:
                retest = [k for k, v in results(root, module).items() if v not in KILLED]
            root = prepare(name, module, args.fresh)
            started = time.monotonic()
            finished = run(root, args.budget_s, retest) if retest or not args.retest else True
            spent = time.monotonic() - started
            note = "" if finished else " (stopped: budget or error, see mutmut.log)"
            print(f"{name}: mutmut ran {spent:.0f} s{note}", flush=True)
        statuses = every_status[name] = results(root, module)
        lines.append(score(name, statuses))
        print(lines[-1], flush=True)
        if args.survivors:
            for key, status in sorted(statuses.items()):
                if status not in KILLED and status != "not checked":
                    print(f"    {status:12} {key}")
    for group, parts in GROUPS.items():
        if set(parts) <= set(every_status):  # a group's total, once each part is reported
            total = {f"{p}:{k}": v for p in parts for k, v in every_status[p].items()}
            lines.append(score(group, total))
    print("\nMutation score per module (killed/total):")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
