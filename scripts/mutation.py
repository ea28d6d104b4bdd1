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

Results outlive the scratch copy: after each run, a module's results are written to its ledger,
``docs/mutation-results/<module>.json`` (committed), and a run seeds them back into the scratch
copy before mutmut starts, so that another machine checks only the mutants whose function
changed since, or that were not checked (``seed``; docs/mutation.md).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRATCH = ROOT / "var" / "mutation"
LEDGERS = ROOT / "docs" / "mutation-results"

# What mutmut is told for every module (the module's own tests come on top).
PYTEST_ARGS = ("-p", "no:cacheprovider", "-p", "no:randomly", "--reuse-db")
# A mutant that loops is stopped: the tests' own CPU time, times 5, plus 10 s.
TIMEOUT_MULTIPLIER, TIMEOUT_CONSTANT = 5.0, 10.0


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
    # Added reading the survivors of the sixth sitting (docs/mutation.md).
    "tests/traces/test_masking_core_edges.py",
    "tests/traces/test_masking_number_classes.py",
    "tests/traces/test_masking_number_runs.py",
    "tests/security/test_masking_core_leaks.py",
    "tests/security/test_masking_number_leaks_a.py",
    "tests/security/test_masking_number_leaks_b.py",
    "tests/security/test_masking_numbers_in_a_row.py",
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
            "tests/security/test_audit_missing_runs.py",
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
        "pytest_add_cli_args": list(PYTEST_ARGS),
        "pytest_add_cli_args_test_selection": list(module.tests),
        "timeout_multiplier": TIMEOUT_MULTIPLIER,
        "timeout_constant": TIMEOUT_CONSTANT,
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
        # The fastest tests first (tests/conftest.py): a killed mutant stops sooner.
        "HARNESS_MUTATION_TEST_TIMES": str(root / "mutants" / "mutmut-stats.json"),
    }
    env.pop("DATABASE_URL", None)  # the embedded tier: SQLite in the scratch copy's var/
    env.pop("REDIS_URL", None)
    # A run stopped mid-test (its budget, a timed-out mutant) can leave rows committed in the
    # reused test database; the next run's clean tests would fail on them ("failed to collect
    # stats"). Each run starts on a database made afresh, and each of its test sessions on a
    # copy of it as migrated (its ``.pristine``: tests/support/mutation_database.py).
    for stale in (root / "mutants" / "var").glob("test-harness.sqlite3*"):
        stale.unlink()
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


# The ledger: each module's results, kept in git so that they survive the scratch copy.
#
# mutmut keeps, per source file, ``mutants/<file>.meta``: each mutant's exit code and the hash
# of each mutated function's source (``hash_by_function_name``: the AST of the function, before
# mutation). When it makes a file's mutants again, it drops the results of every function whose
# hash changed, and checks only the mutants without a result. The ledger keeps the same two
# things per mutant, plus the hash of the mutant itself (the mutated function as mutmut wrote
# it), so that a mutant numbered alike but made differently (a ``# pragma: no mutate`` added, a
# changed mutmut) is not credited with another mutant's result; and the settings that decide
# results, so that the results of other tests or other options are not carried over.

# Results carried over, as the exit codes mutmut records for them. The others ("no tests",
# "suspicious", an interrupted check) are checked again: their cause may be gone.
SEEDED = {"killed": 1, "survived": 0, "timeout": 36, "segfault": -11, "caught by type check": 37}


def ledger_settings(module: Module) -> dict[str, object]:
    """What results depend on besides the sources: mutmut, the tests and how they run, the
    project's pytest configuration, and the packages pinned in ``requirements*.txt`` (by name
    and version: a comment or the order of the lines is not a change)."""
    from mutmut import __version__

    pyproject = ROOT / "pyproject.toml"
    return {
        "mutmut": __version__,
        "tests": list(module.tests),
        "pytest_args": list(PYTEST_ARGS),
        "timeout": [TIMEOUT_MULTIPLIER, TIMEOUT_CONSTANT],
        "pyproject": hashlib.sha256(pyproject.read_bytes()).hexdigest()[:12]
        if pyproject.is_file()
        else None,
        "pins": requirement_pins(ROOT),
    }


def requirement_pins(root: Path) -> dict[str, str]:
    """Each requirement of ``root``'s ``requirements*.txt``: its canonical name and what is
    asked of it (version, markers). Options such as ``-r`` are skipped: every file is read."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins = {}
    for path in sorted(root.glob("requirements*.txt")):
        for line in path.read_text(encoding="utf-8").splitlines():
            line = line.split(" #", 1)[0].strip()
            if not line or line.startswith(("#", "-")):
                continue
            requirement = Requirement(line)
            asked = f"{requirement.specifier}{'; ' if requirement.marker else ''}"
            pins[canonicalize_name(requirement.name)] = asked + str(requirement.marker or "")
    return pins


def stale_settings(recorded: dict[str, object], current: dict[str, object]) -> list[str]:
    """Why results recorded under ``recorded`` do not hold under ``current`` (nothing: they
    hold). A package pinned anew is no reason unless it is a pytest plugin (pytest loads those
    into every test run): no test's code changed to import it, or its function's hash would
    have; every package pinned before must be pinned alike."""
    reasons = [
        f"{key} changed"
        for key in sorted(set(recorded) | set(current))
        if key != "pins" and recorded.get(key) != current.get(key)
    ]
    before, now = recorded.get("pins", {}), current.get("pins", {})
    for name in sorted(before):
        if name not in now:
            reasons.append(f"{name} no longer required")
        elif before[name] != now[name]:
            reasons.append(f"{name} {before[name]} is now {now[name]}")
    plugins = _pytest_plugin_distributions()
    added = set(now) - set(before)
    reasons += [f"{name} (a pytest plugin) added" for name in sorted(added & plugins)]
    return reasons


def _pytest_plugin_distributions() -> set[str]:
    from importlib.metadata import entry_points

    from packaging.utils import canonicalize_name

    return {
        canonicalize_name(point.dist.name)
        for point in entry_points(group="pytest11")
        if point.dist is not None
    }


@contextlib.contextmanager
def in_mutmut_project(root: Path):
    """mutmut's helpers read their configuration and write their files relative to the working
    directory: run them in ``root``, with mutmut's configuration and state of ``root`` only."""
    from mutmut.configuration import reset_config
    from mutmut.state import reset_state

    previous = Path.cwd()
    os.chdir(root)
    reset_config()
    reset_state()
    try:
        yield
    finally:
        os.chdir(previous)
        reset_config()
        reset_state()


def _source_hash(text: str) -> str:
    with contextlib.suppress(SyntaxError):  # then the text itself
        text = ast.dump(ast.parse(textwrap.dedent(text)), annotate_fields=False)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def mutant_hashes(source: str) -> dict[str, str]:
    """Each mutant of ``source`` (``x_f__mutmut_3``) and the hash of its function as mutmut
    wrote it in ``mutants/`` (its AST: layout and comments do not count). In a mutmut
    project's directory."""
    from mutmut.mutation.data import MutantLineSpans

    spans = MutantLineSpans.load(source)
    if spans is None:
        return {}
    names = [n for n in spans.span_by_function_name if not n.endswith("__mutmut_orig")]
    texts = spans.read_function_sources(names)
    return {name: _source_hash(text) for name, text in zip(names, texts, strict=True)}


def _split_key(key: str) -> tuple[str, str, str]:
    """``traces.masking.numbers.x_f__mutmut_3`` -> (``x_f__mutmut_3``, ``x_f``, ``3``)."""
    short = key.rpartition(".")[2]
    function, _, number = short.rpartition("__mutmut_")
    return short, function, number


def _mutated_files(module: Module) -> list[str]:
    """The files of ``module`` that mutmut mutates (relative paths), in a mutmut project."""
    found = []
    for source in module.sources:
        path = Path(source)
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        found += [f.as_posix() for f in files if f.as_posix() not in module.exclude]
    return found


def write_ledger(name: str, module: Module, root: Path, ledgers: Path = LEDGERS) -> Path:
    """The module's results in ``root`` (a scratch copy mutmut ran in), as its ledger: per
    mutated function, mutmut's hash of it, and per mutant its status and own hash."""
    files: dict[str, dict[str, object]] = {}
    with in_mutmut_project(root):
        for source in _mutated_files(module):
            meta = Path("mutants") / f"{source}.meta"
            if not meta.is_file():
                continue
            data = json.loads(meta.read_text(encoding="utf-8"))
            hashes = mutant_hashes(source)
            functions: dict[str, dict[str, object]] = {}
            keys = sorted(
                data["exit_code_by_key"], key=lambda k: (_split_key(k)[1], int(_split_key(k)[2]))
            )
            for key in keys:
                short, function, number = _split_key(key)
                entry = functions.setdefault(
                    function,
                    {"hash": data["hash_by_function_name"].get(function), "mutants": {}},
                )
                status = status_of(data["exit_code_by_key"][key])
                entry["mutants"][number] = f"{status} {hashes.get(short, '-')}"
            files[source] = functions
    ledgers.mkdir(parents=True, exist_ok=True)
    path = ledgers / f"{name}.json"
    ledger = {"settings": ledger_settings(module), "files": files}
    path.write_text(json.dumps(ledger, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def seed(name: str, module: Module, root: Path, ledgers: Path = LEDGERS) -> int:
    """Credit the scratch copy ``root`` with the ledger's results that still hold; returns how
    many. mutmut makes each file's mutants first (as its run would: a file whose mutants are up
    to date is left alone) and drops the results of the functions that changed; a mutant is
    then credited only if it has no result of its own, its function's hash is the ledger's and
    the mutant itself is the one the ledger checked."""
    path = ledgers / f"{name}.json"
    if not path.is_file():
        return 0
    ledger = json.loads(path.read_text(encoding="utf-8"))
    current = ledger_settings(module)
    recorded = ledger["settings"]
    # Tests added to the selection since: a mutant one of the old tests failed on still fails
    # it, so kills carry over; a survivor may be killed by a new test, and is checked again.
    kills_only = set(recorded.get("tests", ())) < set(current["tests"])
    if kills_only:
        recorded = {**recorded, "tests": current["tests"]}
        print(f"{name}: tests added since the ledger: its kills carry over, survivors are run")
    stale = stale_settings(recorded, current)
    if stale:
        print(f"{name}: the ledger's results do not hold ({'; '.join(stale)}): none carried over")
        return 0
    added = sorted(set(current["pins"]) - set(ledger["settings"].get("pins", {})))
    if added:
        print(
            f"{name}: packages pinned since the ledger (none a pytest plugin): {', '.join(added)}"
        )
    credited = 0
    with in_mutmut_project(root):
        # mutmut.__main__ reads the configuration of the working directory when imported.
        from mutmut.__main__ import create_mutants_for_file
        from mutmut.mutation.data import SourceFileMutationData

        for source in _mutated_files(module):
            functions = ledger["files"].get(source)
            if not functions:
                continue
            target = Path("mutants") / source
            target.parent.mkdir(parents=True, exist_ok=True)
            made = create_mutants_for_file(Path(source), target)
            if made.error:
                raise made.error
            data = SourceFileMutationData(path=source)
            data.load()
            hashes = mutant_hashes(source)
            for key, code in data.exit_code_by_key.items():
                short, function, number = _split_key(key)
                entry = functions.get(function)
                if code is not None or not entry:
                    continue
                if entry["hash"] != data.hash_by_function_name.get(function):
                    continue  # the function changed since the ledger: checked again
                status, _, mutant_hash = entry["mutants"].get(number, "").rpartition(" ")
                if kills_only and status not in KILLED:
                    continue
                if status in SEEDED and mutant_hash == hashes.get(short):
                    data.exit_code_by_key[key] = SEEDED[status]
                    credited += 1
            data.save()
    return credited


def ledger_results(name: str, ledgers: Path = LEDGERS) -> dict[str, str]:
    """Every mutant the ledger lists and its status (as of the ledger: the code may differ)."""
    path = ledgers / f"{name}.json"
    if not path.is_file():
        return {}
    ledger = json.loads(path.read_text(encoding="utf-8"))
    found = {}
    for source, functions in ledger["files"].items():
        prefix = source.removesuffix(".py").replace("/", ".")
        for function, entry in functions.items():
            for number, recorded in entry["mutants"].items():
                found[f"{prefix}.{function}__mutmut_{number}"] = recorded.rpartition(" ")[0]
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
            root = prepare(name, module, args.fresh)
            if not args.fresh:
                credited = seed(name, module, root)
                print(f"{name}: {credited} results carried over from the ledger", flush=True)
            retest = []
            if args.retest:  # after the seeding: on a new machine, the ledger's survivors
                retest = [k for k, v in results(root, module).items() if v not in KILLED]
            started = time.monotonic()
            finished = run(root, args.budget_s, retest) if retest or not args.retest else True
            spent = time.monotonic() - started
            note = "" if finished else " (stopped: budget or error, see mutmut.log)"
            print(f"{name}: mutmut ran {spent:.0f} s{note}", flush=True)
            print(f"{name}: results written to {write_ledger(name, module, root)}", flush=True)
        statuses = every_status[name] = results(root, module)
        if not statuses and args.report_only:
            statuses = every_status[name] = ledger_results(name)
            print(f"{name}: no scratch copy, figures from the ledger (as of its commit)")
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
