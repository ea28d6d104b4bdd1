"""Compile the masker's hot modules with mypyc (docs/performance.md, "Figures": the compiled path).

    .venv/bin/python scripts/build_masking.py

Copies ``traces/masking`` into a temporary directory beside ``build/masking``, compiles the
modules of ``traces.masking.compiled.MODULES`` there and replaces ``build/masking`` with the
extensions and a manifest: the SHA-256 of each source they were compiled from, the
interpreter's ABI tag and mypy's version. ``traces.masking.compiled`` imports them only while
every one of those sources is unchanged, so an edited module never runs as its old compiled
self. The sources are copied before compiling, so what is hashed is exactly what was compiled.

Never fails the install: without mypy or a C compiler, or if the modules do not compile, it
prints a warning, leaves no extensions behind and exits 0 (the pure-Python modules are used).
``--strict`` exits 1 instead (to see the error in CI or while fixing types).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _loader():  # type: ignore[no-untyped-def]
    """``traces/masking/compiled.py`` alone: importing ``traces.masking`` would load the
    modules (perhaps a previous build of them) and need Django."""
    spec = importlib.util.spec_from_file_location(
        "masking_compiled", ROOT / "traces" / "masking" / "compiled.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_compiled = _loader()
BUILD_DIR, GROUP, MODULES = _compiled.BUILD_DIR, _compiled.GROUP, _compiled.MODULES
SOURCE_DIR, source_hashes = _compiled.SOURCE_DIR, _compiled.source_hashes

# Run by the interpreter being built for, in the copied tree: setuptools' build_ext with the
# extensions mypycify describes (one shared library for the group and a small one per module).
_SETUP = """
import sys
from setuptools import setup
from mypyc.build import mypycify

paths = sys.argv[1:]
sys.argv = [sys.argv[0], "build_ext", "--build-lib", "lib", "--build-temp", "temp"]
setup(
    name="harness-masking-compiled",
    ext_modules=mypycify(
        ["--ignore-missing-imports", *paths],
        opt_level="3",
        group_name="%s",
        target_dir="c",
    ),
)
"""


def build() -> None:
    """Compile into a fresh directory, then replace ``build/masking`` with it. Raises
    ``RuntimeError`` with the compiler's output on failure (nothing is replaced)."""
    BUILD_DIR.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="masking-", dir=BUILD_DIR.parent))
    try:
        src = work / "src"
        (src / "traces" / "masking").mkdir(parents=True)
        (src / "traces" / "__init__.py").write_text("")
        for path in SOURCE_DIR.glob("*.py"):
            shutil.copy2(path, src / "traces" / "masking" / path.name)
        hashes = source_hashes(src / "traces" / "masking")
        (src / "setup.py").write_text(_SETUP % GROUP)
        paths = [f"traces/masking/{name}.py" for name in MODULES]
        done = subprocess.run(  # noqa: S603 (this interpreter, on the setup.py written above)
            [sys.executable, "setup.py", *paths],
            cwd=src,
            capture_output=True,
            text=True,
            env={**os.environ, "MYPY_CACHE_DIR": str(work / "mypy-cache")},
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError((done.stdout + done.stderr).strip()[-4000:])
        import mypy.version

        manifest = {
            "abi": sysconfig.get_config_var("EXT_SUFFIX"),
            "mypy": mypy.version.__version__,
            "group": GROUP,
            "sources": hashes,
        }
        (src / "lib" / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        shutil.rmtree(BUILD_DIR, ignore_errors=True)
        (src / "lib").rename(BUILD_DIR)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strict", action="store_true", help="exit 1 if compiling fails")
    args = parser.parse_args()
    try:
        import mypyc  # noqa: F401 (only whether it is installed)

        build()
    except (ImportError, RuntimeError, OSError) as error:
        shutil.rmtree(BUILD_DIR, ignore_errors=True)
        print(
            "WARNING: the masker's modules were not compiled; the pure-Python modules will be "
            f"used (same results, slower).\n{error}",
            file=sys.stderr,
        )
        sys.exit(1 if args.strict else 0)
    print(f"masking: compiled {', '.join(MODULES)} into {BUILD_DIR.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
