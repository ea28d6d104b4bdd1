"""The compiled path (``traces.masking.compiled``): the same masked texts and fingerprints as
the pure-Python modules, and never a build of sources that have changed since."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.masking_corpus import generate
from bench.masking_equivalence import fragments
from traces.masking import Masker, compiled

ROOT = Path(__file__).resolve().parents[2]

needs_build = pytest.mark.skipif(
    compiled.PATH != "compiled", reason=f"masking modules not compiled: {compiled.REASON}"
)


@pytest.fixture(scope="module")
def pure_masker(tmp_path_factory):
    """``traces.masking`` from its sources, importable as ``puremask``: never compiled."""
    directory = tmp_path_factory.mktemp("pure")
    (directory / "puremask").mkdir()
    for path in compiled.SOURCE_DIR.glob("*.py"):
        text = path.read_text().replace("traces.masking", "puremask")
        (directory / "puremask" / path.name).write_text(text)
    sys.path.insert(0, str(directory))
    try:
        from puremask import Masker as PureMasker
        from puremask import compiled as pure_compiled
        from puremask import numbers as pure_numbers
    finally:
        sys.path.remove(str(directory))
    assert pure_compiled.PATH == "python"
    assert pure_numbers.__file__.endswith(".py")
    return PureMasker


@needs_build
def test_the_compiled_modules_are_the_ones_imported():
    for name in compiled.MODULES:
        module = sys.modules[f"traces.masking.{name}"]
        assert not module.__file__.endswith(".py"), module.__file__
        assert Path(module.__file__).is_relative_to(compiled.BUILD_DIR)


@needs_build
def test_the_compiled_and_pure_python_maskers_store_the_same(pure_masker):
    documents = generate(0.4, 5)
    texts = [d.text for d in documents] + fragments(documents, 20_000, 5)
    compiled_masker, python_masker = Masker(b"test-key"), pure_masker(b"test-key")

    for text in texts:
        assert compiled_masker._mask_text(text) == python_masker._mask_text(text), text
    found = compiled_masker.drain()
    assert found == python_masker.drain()
    assert len(found) > 1000


def _import_in(root: Path, environ: dict[str, str] | None = None) -> list[str]:
    """``compiled.PATH``, ``REASON`` and where ``numbers`` came from, in a fresh interpreter
    importing ``traces.masking`` from ``root``; and what it logged."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import logging; logging.basicConfig(); import traces.masking.compiled as c;"
            "import traces.masking.numbers as n; print(c.PATH); print(c.REASON);"
            "print(n.__file__)",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", **(environ or {})},
    )
    return [*done.stdout.splitlines(), done.stderr]


@needs_build
def test_a_build_of_sources_since_changed_is_not_used(tmp_path):
    shutil.copytree(ROOT / "traces", tmp_path / "traces")
    shutil.copytree(compiled.BUILD_DIR, tmp_path / "build" / "masking")

    path, _, numbers, _ = _import_in(tmp_path)
    assert path == "compiled"
    assert numbers.startswith(str(tmp_path / "build" / "masking"))

    source = tmp_path / "traces" / "masking" / "numbers.py"
    source.write_text(source.read_text().replace("PHONE_MEMO_SIZE = ", "PHONE_MEMO_SIZE =  "))
    path, reason, numbers, logged = _import_in(tmp_path)
    assert (path, reason) == ("python", "stale (numbers.py changed since the build)")
    assert numbers == str(source)
    assert "the compiled modules are stale (numbers.py changed" in logged


@needs_build
def test_the_pure_python_modules_run_when_asked_or_without_a_build(tmp_path):
    shutil.copytree(ROOT / "traces", tmp_path / "traces")
    shutil.copytree(compiled.BUILD_DIR, tmp_path / "build" / "masking")

    asked = _import_in(tmp_path, {"HARNESS_MASKING_COMPILED": "0"})
    (tmp_path / "build" / "masking" / "manifest.json").unlink()
    unbuilt = _import_in(tmp_path)

    assert asked[:2] == ["python", "HARNESS_MASKING_COMPILED=0"]
    assert unbuilt[:2] == ["python", "not built (make install compiles it)"]
    assert asked[2].endswith(".py")
    assert unbuilt[2].endswith(".py")
