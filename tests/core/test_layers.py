"""The core's layers, checked on the source: each subpackage imports only the layers below
it, no module imports itself back through others, core imports stay at module level, and
the English word lists live in one module.

    kernels, text  <  graph  <  index  <  state  <  models  <  signals  <  retrieval
                   <  lifecycle  <  ingest  <  the facade (engine.py, twins.py)

``lifecycle`` sits above ``retrieval`` (usage feedback re-runs a pass) and below ``ingest``
(the write path runs the lifecycle's detectors on each turn).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import synapse_integrations

PACKAGE = Path(synapse_integrations.__file__).parent
ROOT = PACKAGE.parent
CORE = "synapse_integrations.core"
LAYERS = {"kernels": 0, "text": 0, "graph": 1, "index": 2, "state": 3, "models": 4,
          "signals": 5, "retrieval": 6, "lifecycle": 7, "ingest": 8}
FACADE = 9
LEXICON = f"{CORE}.text.lexicon"


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _resolve(node: ast.ImportFrom, module: str, package: bool) -> list[str]:
    """The package modules an ImportFrom names (a submodule when a name is one)."""
    if node.level:
        base = module.split(".") if package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if not target.startswith("synapse_integrations"):
        return []
    out = []
    for alias in node.names:
        sub = f"{target}.{alias.name}"
        path = ROOT / sub.replace(".", "/")
        out.append(sub if path.with_suffix(".py").exists() or (path / "__init__.py").exists()
                   else target)
    return out


def _imports() -> dict[str, list[tuple[str, int, bool]]]:
    """Every package module's imports of package modules: (target, line, function-local)."""
    found: dict[str, list[tuple[str, int, bool]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module(path)
        tree = ast.parse(path.read_text("utf-8"))
        local = {id(n) for fn in ast.walk(tree)
                 if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                 for n in ast.walk(fn)}
        rows = []
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                rows += [(t, node.lineno, id(node) in local)
                         for t in _resolve(node, module, _is_package(path))]
            elif isinstance(node, ast.Import):
                rows += [(a.name, node.lineno, id(node) in local) for a in node.names
                         if a.name.startswith("synapse_integrations")]
        found[module] = rows
    return found


IMPORTS = _imports()


def _layer(module: str) -> int | None:
    """The layer of a core module (None outside the core)."""
    if not module.startswith(CORE + ".") and module != CORE:
        return None
    head = module[len(CORE) + 1:].split(".")[0]
    return LAYERS.get(head, FACADE)


def _subpackage(module: str) -> str:
    return module[len(CORE) + 1:].split(".")[0]


def test_each_core_layer_imports_only_the_layers_below_it() -> None:
    bad = []
    for module, rows in IMPORTS.items():
        mine = _layer(module)
        if mine is None:
            continue
        for target, line, _ in rows:
            theirs = _layer(target)
            if theirs is None or target == CORE:
                continue  # config, errors, types, storage, firewall: below the core
            if _subpackage(target) == _subpackage(module) or theirs == mine == FACADE:
                continue
            if theirs >= mine:
                bad.append(f"{module}:{line} imports {target}")
    assert not bad, "imports against the layers:\n" + "\n".join(bad)


def test_nothing_below_the_core_imports_it() -> None:
    below = ("config", "errors", "types", "presets", "storage", "firewall", "embeddings")
    bad = [f"{m}:{line} imports {t}" for m, rows in IMPORTS.items()
           if m.split(".")[1:2] and m.split(".")[1] in below for t, line, local in rows
           if t.startswith(CORE) and not local]
    assert not bad, "\n".join(bad)


def test_no_import_cycles_in_the_package() -> None:
    graph = {m: {t for t, _, _ in rows if t in IMPORTS and t != m} for m, rows in IMPORTS.items()}
    # a package's __init__ importing its own submodules is how Python packages work; a
    # submodule importing its package's __init__ back is a cycle like any other
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                cycles.append(stack[stack.index(t):] + [t])
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_core_imports_stay_at_module_level() -> None:
    bad = [f"{m}:{line} imports {t} inside a function" for m, rows in IMPORTS.items()
           if _layer(m) is not None for t, line, local in rows if local]
    assert not bad, "\n".join(bad)


_WORDS = re.compile(r"^[a-z' ]+$")


def _word_list(value: ast.expr) -> bool:
    """Whether a module-level value is a list of English words: a set/frozenset of words, or
    ``frozenset("... words ...".split())``, or a regex alternation of words."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
            and value.func.id in ("frozenset", "set") and value.args:
        arg = value.args[0]
        if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) \
                and arg.func.attr == "split" and isinstance(arg.func.value, ast.Constant):
            return True
        if isinstance(arg, (ast.Set, ast.List, ast.Tuple)):
            return _all_words(arg.elts)
    if isinstance(value, (ast.Set,)):
        return _all_words(value.elts)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
            and value.func.attr == "compile" and value.args:
        return _word_alternation(value.args[0])
    return False


def _word_alternation(pattern: ast.expr) -> bool:
    """Whether a ``re.compile`` pattern is an alternation of at least four English words
    (``r"\\b(before|previously|used to|...)\\b"``)."""
    parts = [pattern] if isinstance(pattern, ast.Constant) else getattr(pattern, "values", [])
    text = "".join(p.value for p in parts if isinstance(p, ast.Constant) and isinstance(p.value, str))
    words = [w for w in re.split(r"[|()?:\\]+|\\b", text) if len(w) > 1 and _WORDS.match(w)]
    return len(words) >= 4


def _all_words(elts: list[ast.expr]) -> bool:
    return len(elts) >= 2 and all(isinstance(e, ast.Constant) and isinstance(e.value, str)
                                  and _WORDS.match(e.value) for e in elts)


def test_word_lists_live_in_the_lexicon() -> None:
    bad = []
    for path in sorted((PACKAGE / "core").rglob("*.py")):
        module = _module(path)
        if module == LEXICON:
            continue
        for node in ast.parse(path.read_text("utf-8")).body:
            value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
            if value is not None and _word_list(value):
                bad.append(f"{module}:{node.lineno}")
    assert not bad, "word lists outside core/text/lexicon.py:\n" + "\n".join(bad)
