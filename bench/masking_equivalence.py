"""Masked forms and fingerprints of this checkout's masker against another git revision's.

    .venv/bin/python bench/masking_equivalence.py [--against main] [--mb 2] [--seeds 13,7,99]
        [--fragments 150000]

Speed work on the masker must not change what it stores. This extracts ``traces/masking`` as
it is at ``--against`` into a temporary package, masks the same texts with both (one masker
per corpus, one document at a time, as a run does) and compares every masked text and the
fingerprints each masker drains, in order. Texts: the corpora of ``bench/masking_corpus.py``
for each seed, and generated fragments mixing planted values, look-alikes, separators and
labels. Prints the first differences and exits 1 if there are any. This checkout's masker runs
its compiled modules when they are built and current (``traces.masking.compiled``; the first
line says which): against ``main`` that compares them with the pure-Python ones.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

_SEPARATORS = [" ", "  ", ", ", "; ", "\n", ": ", "：", "、", "(", ")", '"', "'", "/", "-", "."]
_LABELS = [
    "",
    "",
    "",
    "order ",
    "Order #",
    "tracking ",
    "ref: ",
    '"created_at": "',
    "订单号",
    "call ",
    "tel ",
    "IBAN ",
    "ID ",
    "card ",
    "+",
    "00",
    "https://example.com/a/",
    "SKU",
    "金额",
    "x",
]


def _old_masker(revision: str, into: Path) -> type:
    """``traces.masking`` at ``revision``, importable as ``oldmask``."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", revision, "traces/masking"],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    package = into / "oldmask"
    (into / "traces" / "masking").rename(package)
    for path in package.glob("*.py"):
        path.write_text(path.read_text().replace("traces.masking", "oldmask"))
    sys.path.insert(0, str(into))
    from oldmask import Masker  # type: ignore[import-not-found]

    return Masker


def fragments(documents: list, count: int, seed: int) -> list[str]:
    """Short texts: planted values and look-alikes of the corpus, glued by separators and
    labels in random order (what lies around a number decides what it is)."""
    rng = random.Random(seed)
    values = [v for d in documents for _, v in d.planted] + [
        v for d in documents for v in d.lookalikes
    ]
    found = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 3)):
            parts.append(rng.choice(_LABELS) + rng.choice(values))
            parts.append(rng.choice(_SEPARATORS))
        if rng.random() < 0.3:
            parts.insert(0, rng.choice("abcXYZ中 #,-+0123456789"))
        found.append("".join(parts))
    return found


def compare(old: type, new: type, texts: list[str], name: str) -> int:
    key = b"equivalence-key"
    old_masker, new_masker = old(key), new(key)
    differences = 0
    for text in texts:
        expected, got = old_masker._mask_text(text), new_masker._mask_text(text)
        if expected != got:
            differences += 1
            if differences <= 5:
                print(f"  {name}: {text[:200]!r}")
                print(f"    old {expected[:200]!r}\n    new {got[:200]!r}")
    old_found, new_found = old_masker.drain(), new_masker.drain()
    if old_found != new_found:
        differences += 1
        print(f"  {name}: fingerprints differ ({len(old_found)} old, {len(new_found)} new)")
    print(f"{name}: {len(texts)} texts, {len(new_found)} fingerprints, {differences} differences")
    return differences


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", default="main")
    parser.add_argument("--mb", type=float, default=2.0)
    parser.add_argument("--seeds", default="13,7,99")
    parser.add_argument("--fragments", type=int, default=150_000)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "harness.settings.base")
    os.environ.setdefault("HARNESS_LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from bench.masking_corpus import generate
    from traces.masking import Masker, compiled

    print(f"this checkout's modules: {compiled.PATH} ({compiled.REASON})")
    differences = 0
    with tempfile.TemporaryDirectory(prefix="masking-equivalence-") as directory:
        old = _old_masker(args.against, Path(directory))
        for seed in (int(s) for s in args.seeds.split(",")):
            documents = generate(args.mb, seed)
            texts = [d.text for d in documents]
            differences += compare(old, Masker, texts, f"corpus seed {seed}")
            pieces = fragments(documents, args.fragments // 3, seed)
            differences += compare(old, Masker, pieces, f"fragments seed {seed}")
    sys.exit(1 if differences else 0)


if __name__ == "__main__":
    main()
