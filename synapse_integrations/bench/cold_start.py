"""Cold start: what a fresh process waits for before its first answer (``synapse bench
perf``, the ``cold_start`` section; issue 47).

Each round runs a *fresh* Python subprocess (``sys.executable -c`` :data:`CHILD_SCRIPT`,
the environment inherited, a temporary working directory and memory folder) which, timing
with ``time.perf_counter()`` from the script's very first line, records:

* ``import_s``: ``import synapse_integrations``;
* ``open_s``: ``Synapse(path)`` with the default embedder (the packaged all-MiniLM-L6-v2,
  offline, never downloaded);
* ``first_add_s``: the first ``add_turn(..., speaker="user")``;
* ``first_retrieve_s``: the first ``retrieve(...)``;
* ``first_answer_s``: from the parent's clock just before ``subprocess.run`` (so the
  interpreter's own start is included) to the first retrieve's result;
* ``interpreter_s``: the part of ``first_answer_s`` before the script's first line
  (interpreter start-up and ``site``).

The disk cache is warm after the first round (the same model files, the same Python), so
this is a fresh *process*, not a cold machine. ``preload`` picks how the child makes its
memory: ``None`` as a user writes it (``Synapse(path)``: whatever the engine does by
default), ``False`` with ``embedder=MiniLMEmbedder()`` (the same model, loaded on first
use), ``True`` with ``embedder=MiniLMEmbedder().preload()`` (loading starts before the
engine opens).

>>> line = ('{"import_s": 0.8, "open_s": 0.2, "first_add_s": 5.1, "first_retrieve_s": 0.5,'
...         ' "t_answer": 107.0}')
>>> r = parse_child_output("Loading weights: 100%\\n" + line, started=100.0)
>>> r["first_answer_s"], r["interpreter_s"]
(7.0, 0.4)
>>> summarize_rounds([r])["p50"]["first_add_s"]
5.1
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from ..errors import InvalidInputError

__all__ = ["CHILD_SCRIPT", "PHASES", "format_cold_start", "measure_cold_start",
           "parse_child_output", "summarize_rounds"]

#: the phases each round reports, in seconds, in the order a process meets them
PHASES = ("interpreter_s", "import_s", "open_s", "first_add_s", "first_retrieve_s",
          "first_answer_s")
CHILD_TIMEOUT_S = 120.0
_CHILD_KEYS = ("import_s", "open_s", "first_add_s", "first_retrieve_s")

# argv: [-c, memory folder, preload mode: "default" | "off" | "on"]
CHILD_SCRIPT = """\
import time; _T0 = time.perf_counter()
import json, sys
import synapse_integrations
_T1 = time.perf_counter()
from synapse_integrations import Synapse
from synapse_integrations.embeddings import MiniLMEmbedder
_MODE = sys.argv[2]
_KW = {} if _MODE == "default" else {
    "embedder": MiniLMEmbedder().preload() if _MODE == "on" else MiniLMEmbedder()}
_MEM = Synapse(sys.argv[1], **_KW)
_T2 = time.perf_counter()
_MEM.add_turn("I moved to Lisbon last spring and I love the tram rides.", speaker="user")
_T3 = time.perf_counter()
_RES = _MEM.retrieve("Where do I live now?")
_T4 = time.perf_counter()
_ITEMS = len(_RES.items)
_MEM.close()
print(json.dumps({"import_s": _T1 - _T0, "open_s": _T2 - _T1, "first_add_s": _T3 - _T2,
                  "first_retrieve_s": _T4 - _T3, "t_answer": _T4, "items": _ITEMS}), flush=True)
"""


def parse_child_output(stdout: str, *, started: float) -> dict[str, float]:
    """One round's phases from the child's stdout (its last JSON line; anything a library
    printed before it is ignored). ``started``: the parent's ``time.perf_counter()`` just
    before the child was started (``perf_counter`` is the system-wide monotonic clock on
    Linux, macOS and Windows, so the child's reading compares with it)."""
    lines = [ln for ln in stdout.splitlines() if ln.strip().startswith("{")]
    if not lines:
        raise ValueError(f"the cold-start child printed no JSON line; stdout ends: {stdout[-500:]!r}")
    raw = json.loads(lines[-1])
    out = {key: round(float(raw[key]), 4) for key in _CHILD_KEYS}
    answer = float(raw["t_answer"]) - started
    inside = sum(out.values())
    out["first_answer_s"] = round(max(answer, inside), 4)  # never below its own parts
    out["interpreter_s"] = round(out["first_answer_s"] - inside, 4)
    if "items" in raw:
        out["items"] = int(raw["items"])
    return out


def summarize_rounds(rounds: Sequence[dict[str, float]]) -> dict[str, Any]:
    """The median of each phase over ``rounds``, and the rounds themselves.

    >>> summarize_rounds([{"open_s": 1.0}, {"open_s": 3.0}, {"open_s": 2.0}])["p50"]
    {'open_s': 2.0}
    """
    if not rounds:
        raise InvalidInputError("no cold-start rounds to summarize")
    keys = [k for k in PHASES if all(k in r for r in rounds)]
    return {
        "rounds": len(rounds),
        "p50": {k: round(statistics.median(r[k] for r in rounds), 4) for k in keys},
        "each": [dict(r) for r in rounds],
    }


def _run_child(mode: str, timeout: float) -> dict[str, float]:
    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")  # the packaged model is local: never reach a hub
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    with tempfile.TemporaryDirectory(prefix="synapse-cold-") as tmp:
        memory = os.path.join(tmp, "memory")
        started = time.perf_counter()
        try:
            proc = subprocess.run([sys.executable, "-c", CHILD_SCRIPT, memory, mode],
                                  cwd=tmp, env=env, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            tail = exc.stderr if isinstance(exc.stderr, str) else (exc.stderr or b"").decode(
                "utf-8", "replace")
            raise RuntimeError(f"the cold-start child ran over {timeout:.0f} s; stderr ends:\n"
                               f"{tail[-2000:]}") from exc
    if proc.returncode != 0:
        raise RuntimeError(f"the cold-start child failed (exit {proc.returncode}); stderr ends:\n"
                           f"{proc.stderr[-2000:]}")
    try:
        return parse_child_output(proc.stdout, started=started)
    except (ValueError, KeyError) as exc:
        raise RuntimeError(f"cannot read the cold-start child's output ({exc}); stderr ends:\n"
                           f"{proc.stderr[-2000:]}") from exc


def measure_cold_start(rounds: int = 3, *, preload: bool | None = None,
                       timeout: float = CHILD_TIMEOUT_S) -> dict[str, Any]:
    """Time ``rounds`` fresh processes from their start to their first answer.

    Returns ``{"rounds", "p50": {phase: seconds}, "each": [one dict per round], "preload",
    "python"}`` (phases: :data:`PHASES`). Each child is bounded by ``timeout`` seconds; a
    child that fails, hangs or prints no result raises :class:`RuntimeError` with the end
    of its stderr.

    >>> cs = measure_cold_start(1)      # doctest: +SKIP
    >>> cs["p50"]["first_answer_s"]     # doctest: +SKIP
    8.1
    """
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise InvalidInputError(f"rounds must be a positive int, got {rounds!r}")
    if preload not in (None, True, False):
        raise InvalidInputError(f"preload must be None, True or False, got {preload!r}")
    mode = {None: "default", False: "off", True: "on"}[preload]
    out = summarize_rounds([_run_child(mode, timeout) for _ in range(rounds)])
    out["preload"] = mode
    out["python"] = sys.version.split()[0]
    return out


def format_cold_start(cold: dict[str, Any]) -> str:
    """Two lines for ``synapse bench perf``'s table: the p50 of each phase, in seconds.

    >>> print(format_cold_start({"rounds": 3, "p50": {"interpreter_s": 0.03, "import_s": 0.6,
    ...     "open_s": 0.5, "first_add_s": 4.9, "first_retrieve_s": 0.02, "first_answer_s": 6.1}}))
    cold start (fresh process, p50 of 3): first answer 6.10 s after the process started
      interpreter 0.03 s, import 0.60 s, open 0.50 s, first add_turn 4.90 s, first retrieve 0.02 s
    """
    p = cold["p50"]
    return (f"cold start (fresh process, p50 of {cold['rounds']}): first answer "
            f"{p['first_answer_s']:.2f} s after the process started\n"
            f"  interpreter {p['interpreter_s']:.2f} s, import {p['import_s']:.2f} s, open "
            f"{p['open_s']:.2f} s, first add_turn {p['first_add_s']:.2f} s, first retrieve "
            f"{p['first_retrieve_s']:.2f} s")
