"""The README is a newcomer's ten minutes and the docs/ pages hold the rest (issue 23): nothing
the long README said is lost, every link and anchor resolves, and every console screenshot is
linked from the README."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs.names import headings, names

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BEFORE = Path(__file__).with_name("readme_before_the_split.txt")
# Pages and screenshots linked before they exist (a branch that adds them not merged yet).
ARRIVING: set[str] = set()
LINK = re.compile(r"\]\(([^)\s]+)\)")


def pages() -> list[Path]:
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def said_before() -> list[str]:
    lines = BEFORE.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line and not line.startswith("#")]


def test_the_readme_is_read_in_ten_minutes():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 500


def test_every_name_the_long_readme_gave_is_still_documented():
    """Each environment variable, endpoint, management command and make target."""
    documented = set().union(*(names(page.read_text(encoding="utf-8")) for page in pages()))
    before = [line for line in said_before() if not line.startswith("heading ")]
    assert len(before) > 150  # the fixture is read whole
    assert [name for name in before if name not in documented] == []


def test_every_section_of_the_long_readme_is_still_a_heading():
    """A section kept its heading where it went (a page's title may say more, e.g.
    'Policies: the reference')."""
    now = [h.casefold() for page in pages() for h in headings(page.read_text(encoding="utf-8"))]
    before = [h.removeprefix("heading ") for h in said_before() if h.startswith("heading ")]
    assert len(before) > 50
    assert [h for h in before if not any(h.casefold() in heading for heading in now)] == []


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    for heading in headings(page.read_text(encoding="utf-8")):
        base, n = slug(heading), 0
        while (anchor := base if n == 0 else f"{base}-{n}") in found:
            n += 1
        found.add(anchor)
    return found


def relative_links(page: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.name)
def test_every_link_and_anchor_resolves(page):
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        name = file.relative_to(ROOT).as_posix() if file.is_relative_to(ROOT) else str(file)
        if name in ARRIVING:
            continue
        missing = not file.exists()
        if missing or (anchor and file.suffix == ".md" and anchor not in anchors(file)):
            broken.append(target)
    assert broken == []


def test_every_screenshot_is_linked_from_the_readme():
    shots = {f"docs/screenshots/{p.name}" for p in (ROOT / "docs" / "screenshots").glob("*.png")}
    shots |= {name for name in ARRIVING if name.startswith("docs/screenshots/")}
    linked = set(relative_links(README))
    assert sorted(shots - linked) == []
