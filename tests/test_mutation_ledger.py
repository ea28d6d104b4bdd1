"""scripts/mutation.py's ledger: results carried from one scratch copy (one machine) to a fresh
one, only where mutmut would keep them itself. A tiny project, mutmut's own mutant generation
(no test run)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("mutmut")

_SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "mutation.py"
_spec = importlib.util.spec_from_file_location("mutation_script", _SCRIPT)
mutation = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = mutation  # dataclasses look their module up
_spec.loader.exec_module(mutation)

_SOURCE = """\
def add(a, b):
    return a + b


def limit(x, top):
    if x > top:
        return top
    return x - 0
"""

_MODULE = mutation.Module(sources=("pkg/calc.py",), tests=("tests/test_calc.py",))


def _project(root: Path, source: str = _SOURCE) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (root / "pkg" / "calc.py").write_text(source, encoding="utf-8")
    (root / "setup.cfg").write_text("[mutmut]\nsource_paths=\n    pkg/calc.py\n", encoding="utf-8")
    return root


def _meta(root: Path) -> dict:
    meta = root / "mutants" / "pkg" / "calc.py.meta"
    return json.loads(meta.read_text(encoding="utf-8"))


def _mutant_texts(root: Path) -> dict[str, str]:
    from mutmut.mutation.data import MutantLineSpans

    with mutation.in_mutmut_project(root):
        spans = MutantLineSpans.load("pkg/calc.py")
        names = list(spans.span_by_function_name)
        return dict(zip(names, spans.read_function_sources(names), strict=True))


@pytest.fixture
def checked(tmp_path: Path) -> tuple[Path, Path]:
    """A project whose every mutant was checked (killed, but one survivor), and its ledger."""
    root = _project(tmp_path / "first")
    ledgers = tmp_path / "ledgers"
    with mutation.in_mutmut_project(root):
        from mutmut.__main__ import create_mutants_for_file
        from mutmut.mutation.data import SourceFileMutationData

        (root / "mutants" / "pkg").mkdir(parents=True)
        create_mutants_for_file(Path("pkg/calc.py"), Path("mutants/pkg/calc.py"))
        data = SourceFileMutationData(path="pkg/calc.py")
        data.load()
        for key in data.exit_code_by_key:
            data.exit_code_by_key[key] = 0 if key.endswith("x_add__mutmut_1") else 1
        data.save()
    mutation.write_ledger("calc", _MODULE, root, ledgers)
    return root, ledgers


def test_a_fresh_copy_of_unchanged_code_gets_every_result_of_the_ledger(checked, tmp_path):
    first, ledgers = checked
    fresh = _project(tmp_path / "fresh")

    credited = mutation.seed("calc", _MODULE, fresh, ledgers)

    assert _meta(fresh)["exit_code_by_key"] == _meta(first)["exit_code_by_key"]
    assert credited == len(_meta(first)["exit_code_by_key"]) > 2


def test_a_function_changed_since_the_ledger_is_checked_again(checked, tmp_path):
    first, ledgers = checked
    fresh = _project(tmp_path / "fresh", _SOURCE.replace("x > top", "x >= top"))

    mutation.seed("calc", _MODULE, fresh, ledgers)

    codes = _meta(fresh)["exit_code_by_key"]
    limits = {k: v for k, v in codes.items() if ".x_limit__" in k}
    assert limits
    assert set(limits.values()) == {None}
    assert {k: v for k, v in codes.items() if ".x_add__" in k} == {
        k: v for k, v in _meta(first)["exit_code_by_key"].items() if ".x_add__" in k
    }


def test_a_mutant_numbered_alike_but_made_differently_is_checked_again(checked, tmp_path):
    # The pragma is a comment: mutmut's hash of the function (its AST) is unchanged, but the
    # line's mutants are gone and the later ones renumbered.
    first, ledgers = checked
    pragma = _SOURCE.replace("if x > top:", "if x > top:  # pragma: no mutate")
    fresh = _project(tmp_path / "fresh", pragma)

    mutation.seed("calc", _MODULE, fresh, ledgers)

    before, after = _mutant_texts(first), _mutant_texts(fresh)
    codes = _meta(fresh)["exit_code_by_key"]
    credited = {k.rpartition(".")[2] for k, v in codes.items() if v is not None}
    renumbered = {n for n in after if "__mutmut_orig" not in n and before.get(n) != after[n]}
    assert renumbered
    assert credited.isdisjoint(renumbered)
    assert _meta(fresh)["hash_by_function_name"] == _meta(first)["hash_by_function_name"]


def test_results_of_other_tests_are_not_carried_over(checked, tmp_path):
    _, ledgers = checked
    fresh = _project(tmp_path / "fresh")
    other = mutation.Module(sources=_MODULE.sources, tests=("tests/test_other.py",))

    assert mutation.seed("calc", other, fresh, ledgers) == 0


def test_the_ledger_lists_each_mutant_with_its_status(checked):
    _, ledgers = checked

    statuses = mutation.ledger_results("calc", ledgers)

    assert statuses["pkg.calc.x_add__mutmut_1"] == "survived"
    assert set(statuses.values()) == {"survived", "killed"}


def _edit_ledger_pins(ledgers: Path, edit) -> None:
    path = ledgers / "calc.json"
    ledger = json.loads(path.read_text(encoding="utf-8"))
    edit(ledger["settings"]["pins"])
    path.write_text(json.dumps(ledger), encoding="utf-8")


def test_a_package_pinned_since_the_ledger_leaves_its_results_standing(checked, tmp_path):
    first, ledgers = checked
    pinned_now = next(iter(mutation.ledger_settings(_MODULE)["pins"]))
    _edit_ledger_pins(ledgers, lambda pins: pins.pop(pinned_now))
    fresh = _project(tmp_path / "fresh")

    credited = mutation.seed("calc", _MODULE, fresh, ledgers)

    assert credited == len(_meta(first)["exit_code_by_key"])


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda pins: pins.update(django="==4.2.0"), id="another version"),
        pytest.param(lambda pins: pins.update(gone="==1.0"), id="a package no longer required"),
        pytest.param(lambda pins: pins.pop("pytest-django"), id="a pytest plugin added since"),
    ],
)
def test_results_under_other_packages_are_not_carried_over(checked, tmp_path, edit):
    _, ledgers = checked
    _edit_ledger_pins(ledgers, edit)
    fresh = _project(tmp_path / "fresh")

    assert mutation.seed("calc", _MODULE, fresh, ledgers) == 0


def test_pins_are_read_by_name_and_version_not_by_the_files_bytes(tmp_path):
    (tmp_path / "requirements.txt").write_text(
        "# runtime\nDjango==5.2.19\nhttptools==0.9.0  # the parser\n", encoding="utf-8"
    )
    (tmp_path / "requirements-dev.txt").write_text(
        "-r requirements.txt\npytest==9.2.0 ; python_version >= '3.11'\n", encoding="utf-8"
    )
    before = mutation.requirement_pins(tmp_path)
    (tmp_path / "requirements.txt").write_text(
        "httptools==0.9.0\n# the web framework, an LTS\ndjango==5.2.19\n", encoding="utf-8"
    )

    assert mutation.requirement_pins(tmp_path) == before
    assert before == {
        "django": "==5.2.19",
        "httptools": "==0.9.0",
        "pytest": '==9.2.0; python_version >= "3.11"',
    }


def test_with_tests_added_since_the_ledger_kills_carry_over_and_survivors_are_run(
    checked, tmp_path
):
    first, ledgers = checked
    fresh = _project(tmp_path / "fresh")
    more = mutation.Module(
        sources=_MODULE.sources, tests=(*_MODULE.tests, "tests/test_calc_edges.py")
    )

    credited = mutation.seed("calc", more, fresh, ledgers)

    codes = _meta(fresh)["exit_code_by_key"]
    before = _meta(first)["exit_code_by_key"]
    assert {k for k, v in codes.items() if v is None} == {
        k for k, v in before.items() if v == 0
    }  # the survivor
    assert credited == len(before) - 1
    assert all(codes[k] == 1 for k, v in before.items() if v == 1)
