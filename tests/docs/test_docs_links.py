"""Every relative markdown link in the README and the docs points to a file that exists, and
a ``#section`` anchor to a markdown page names one of its headings (GitHub's anchors)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])

_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_FENCE = re.compile(r"^```.*?^```", flags=re.S | re.M)


def links(text: str) -> list[str]:
    """The relative link targets of a page, code blocks left out."""
    return [t for t in _LINK.findall(_FENCE.sub("", text))
            if not re.match(r"[a-z][a-z0-9+.-]*:", t)]  # http:, https:, mailto: ...


def anchors(text: str) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation out, spaces to '-';
    a repeated heading gets -1, -2, ..."""
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", _FENCE.sub("", text), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(page: Path):
    broken = []
    for target in links(page.read_text("utf-8")):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text("utf-8")):
            broken.append(f"{target} (no such heading)")
    assert broken == [], f"{page.relative_to(ROOT)}: {broken}"


def test_the_checker_sees_a_broken_link():
    assert links("see [x](docs/nowhere.md) and [y](https://example.com)\n```\n[z](no.md)\n```") \
        == ["docs/nowhere.md"]
    assert "the-gate-issue-11" in anchors("### The gate (issue 11)\n")
    assert {"a", "a-1"} <= anchors("## A\n## A\n")
