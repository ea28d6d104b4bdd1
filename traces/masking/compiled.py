"""The compiled path: the masker's hot modules as mypyc extensions, when they are current.

``scripts/build_masking.py`` (run by ``make install``) compiles ``MODULES`` into
``build/masking`` with a manifest of the SHA-256 of each source it compiled. ``install()``,
called by ``traces.masking`` before it imports anything else, checks the manifest against the
sources in this directory and the interpreter's ABI; only if all match does it put a finder
first on ``sys.meta_path`` that loads ``traces.masking.<module>`` from the extensions. The
modules of the group call each other natively, so one changed source disables them all: an
edited module never runs as its old compiled self. Anything else (no build, a stale build, an
extension that does not load, ``HARNESS_MASKING_COMPILED=0``) leaves the pure-Python modules,
which give the same results (``tests/traces/test_masking_compiled.py``). ``PATH`` says which
ran and why.

The decision is made once, at import, before Django's settings exist: hence the environment
variable read here rather than a setting.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import logging
import os
import sys
import sysconfig
from pathlib import Path

logger = logging.getLogger(__name__)

# Compiled in this order; the ones that pay (docs/performance.md, "Figures").
MODULES = ("numbers", "checks", "phones", "emails", "kinds")
GROUP = "harness_masking"  # the group's shared library: harness_masking__mypyc
SOURCE_DIR = Path(__file__).resolve().parent
BUILD_DIR = SOURCE_DIR.parent.parent / "build" / "masking"

# "compiled" or "python", and why (printed by bench/traces.py).
PATH = "python"
REASON = "not installed yet"


def source_hashes(directory: Path) -> dict[str, str]:
    return {
        name: hashlib.sha256((directory / f"{name}.py").read_bytes()).hexdigest()
        for name in MODULES
    }


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the group's extensions, and nothing else, in the build directory."""

    def __init__(self, files: dict[str, Path]) -> None:
        self.files = files

    def find_spec(self, fullname, path=None, target=None):  # type: ignore[no-untyped-def]
        file = self.files.get(fullname)
        if file is None:
            return None
        loader = importlib.machinery.ExtensionFileLoader(fullname, str(file))
        return importlib.util.spec_from_file_location(fullname, file, loader=loader)


def _why_not(build: Path) -> str | None:
    """Why the build in ``build`` must not be used, or None if it can."""
    if os.environ.get("HARNESS_MASKING_COMPILED", "1") == "0":
        return "HARNESS_MASKING_COMPILED=0"
    try:
        manifest = json.loads((build / "manifest.json").read_text())
    except (OSError, ValueError):
        return "not built (make install compiles it)"
    if manifest.get("abi") != sysconfig.get_config_var("EXT_SUFFIX"):
        return f"built for another interpreter ({manifest.get('abi')})"
    if tuple(manifest.get("sources", {})) != MODULES:
        return "built from another list of modules"
    current = source_hashes(SOURCE_DIR)
    changed = [f"{n}.py" for n in MODULES if manifest["sources"][n] != current[n]]
    if changed:
        logger.warning(
            "masking: the compiled modules are stale (%s changed since they were built); using "
            "the pure-Python modules. Run `make install` to compile them again.",
            ", ".join(changed),
        )
        return f"stale ({', '.join(changed)} changed since the build)"
    return None


def install(build: Path = BUILD_DIR) -> str:
    """Load the compiled modules if the build in ``build`` is current; returns ``PATH``."""
    global PATH, REASON
    # The extensions are ``traces.masking.*`` and nothing else: a copy of these sources under
    # another name (bench/masking_equivalence.py's, the tests' pure-Python one) stays Python.
    if __name__ != "traces.masking.compiled":
        PATH, REASON = "python", f"imported as {__name__}"
        return PATH
    reason = _why_not(build)
    if reason is None:
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        files = {f"{GROUP}__mypyc": build / f"{GROUP}__mypyc{suffix}"}
        files |= {
            f"traces.masking.{n}": build / "traces" / "masking" / f"{n}{suffix}" for n in MODULES
        }
        finder = _Finder(files)
        sys.meta_path.insert(0, finder)
        try:
            for name in MODULES:
                module = importlib.import_module(f"traces.masking.{name}")
                if not str(getattr(module, "__file__", "")).endswith(suffix):
                    raise ImportError(f"traces.masking.{name} was already imported from source")
        except ImportError as error:
            sys.meta_path.remove(finder)
            for name in files:
                sys.modules.pop(name, None)
            logger.warning("masking: the compiled modules do not load (%s); using Python", error)
            reason = f"does not load ({error})"
    PATH, REASON = ("python", reason) if reason else ("compiled", str(build))
    return PATH
