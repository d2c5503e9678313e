"""docs/architecture.md names only modules that exist, so the page cannot drift from the tree.

Two readings of the page: the tree (its first code block, read by indentation: every entry,
and every ``name.py`` its description names, relative to that entry's folder), and the prose
(every ``dir/module.py`` path, and dotted ``dir/module.Name`` references, anywhere).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PKG = ROOT / "synapse_integrations"
DOC = ROOT / "docs" / "architecture.md"

_NAMED = re.compile(r"(?<![\w/<.-])([a-z_][a-z0-9_]*\.py)\b")
_PATH = re.compile(r"(?<![\w<.-])((?:[a-z_][a-z0-9_]*/)+[a-z_][a-z0-9_]*\.py)\b")
_DOTTED = re.compile(r"(?<![\w<.-])((?:[a-z_][a-z0-9_]*/)+[a-z_][a-z0-9_]*)\.[A-Za-z_]\w*")
_DESCRIPTION_COLUMN = 16  # entries start left of it; a description's next lines right of it


def _exists(rel: str, folder: Path) -> bool:
    rel = rel.removeprefix("synapse_integrations/")
    return any((base / rel).exists() for base in (folder, PKG, PKG / "core", ROOT))


def tree_paths(text: str) -> tuple[list[tuple[str, Path]], list[Path]]:
    """(name as written, the folder it is read in) for every module the tree names, and the
    tree's own entries as paths (an entry must be exactly where the tree puts it)."""
    lines = text.split("```", 2)[1].splitlines()[1:]
    assert lines and lines[0].strip() == "synapse_integrations/", "the tree starts at the package"
    folders: list[tuple[int, Path]] = [(-1, PKG)]  # (indent, folder) of the open folders
    context = PKG
    named: list[tuple[str, Path]] = []
    entries: list[Path] = []
    for line in lines[1:]:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        head, _, description = line.strip().partition("  ")
        tokens = head.split()
        if indent < _DESCRIPTION_COLUMN and all(t.endswith(("/", ".py")) for t in tokens):
            while folders[-1][0] >= indent:
                folders.pop()
            parent = folders[-1][1]
            named += [(token, parent) for token in tokens]
            entries.extend(parent / token.rstrip("/") for token in tokens)
            context = parent
            if tokens[-1].endswith("/"):
                context = parent / tokens[-1].rstrip("/")
                folders.append((indent, context))
        else:
            description = line.strip()
        named += [(name, context) for name in _NAMED.findall(description)]
        named += [(path, context) for path in _PATH.findall(description)]
    return named, entries


def prose_paths(text: str) -> list[str]:
    """Module paths named anywhere on the page (``core/engine.py``, ``core/view.Compiled``)."""
    rest = text.split("```", 2)[2]
    found = list(_PATH.findall(rest))
    for dotted in _DOTTED.findall(text):
        if not dotted.startswith(("docs/", "tests/")):
            found.append(dotted + ".py")
    return found


def missing(text: str) -> list[str]:
    named, entries = tree_paths(text)
    gone = [f"{path.relative_to(ROOT)} (an entry of the tree)" for path in entries if not path.exists()]
    gone += [f"{name} (in the tree, under {folder.relative_to(ROOT)})"
             for name, folder in named if not _exists(name.rstrip("/"), folder)]
    gone += [f"{path} (in the text)" for path in prose_paths(text) if not _exists(path, PKG)]
    return gone


def test_every_module_architecture_md_names_exists():
    assert missing(DOC.read_text("utf-8")) == []


def test_the_tree_is_read_as_a_tree():
    named, entries = tree_paths(DOC.read_text("utf-8"))
    names = {(n, f.relative_to(ROOT).as_posix()) for n, f in named}
    assert ("engine.py", "synapse_integrations/core") in names
    assert ("synapse.py", "synapse_integrations/core/models") in names
    assert ("chroma.py", "synapse_integrations/storage") in names
    assert ("middleware.py", "synapse_integrations/server") in names
    assert PKG / "core" / "models" in entries and PKG / "firewall" in entries


@pytest.mark.parametrize("stale", [
    "  firewall.py        the write firewall\n",
    "  core/\n    ranking.py       a module that is not there\n",
    "  server/            service.py, gateway.py (not there)\n",
    "  triggers.py        in core/, not at the top\n",
])
def test_a_stale_name_is_caught(stale):
    text = DOC.read_text("utf-8")
    tree_start = text.index("synapse_integrations/\n") + len("synapse_integrations/\n")
    assert missing(text[:tree_start] + stale + text[tree_start:]) != []


def test_a_stale_path_in_the_text_is_caught():
    assert missing(DOC.read_text("utf-8") + "\nSee `core/ranker.py` and `core/viewer.Compiled`.\n")
