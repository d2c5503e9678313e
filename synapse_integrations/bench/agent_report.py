"""What ``synapse bench agent`` prints and draws from its results JSON
(:func:`.agent.run_agent`): :func:`format_agent_table` and :func:`plot_agent`.

The table gives, per method, the pooled figures at each k (recall at ask time, at the end
and of the transcript alone; stored questions above the evidence; stored turns in the top
k), then the hub share and latency, recall per category and the ingest rate. The plots:
recall@k against k, and stored turns per top k, per method and phase.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .agent_metrics import HUB_DEPTH

__all__ = ["format_agent_table", "plot_agent"]


def _pct(v: float | None) -> str:
    return f"{100 * v:>6.1f}" if v is not None else f"{'-':>6}"


def _ms(lat: Mapping[str, float] | None) -> str:
    return f"{lat['p50']:>7.1f}/{lat['p95']:<7.1f}" if lat else f"{'-':>7}/{'-':<7}"


def format_agent_table(results: Mapping[str, Any]) -> str:
    """The printed table: per method, the pooled figures at each k (ask / end / transcript),
    then recall@k per category at ask time and at the end, latency and ingest."""
    pool = _pool(results)
    width = max([len(m) for m in results["methods"]] + [8])
    n_q = sum(results["questions"].values())
    lines = [(f"bench agent ({results['format']}): {len(results['memories'])} memories, {n_q} "
              f"questions, each stored as {' / '.join(results['stored_per_question'])}"),
             (f"pooled over {pool}, %: r = recall@k at ask time (a), at the end (e), of the "
              f"transcript alone (tr); q>ev = a stored turn above the first evidence turn; "
              f"st/k = stored turns in the top k (a count)")]
    head = (f"{'method':<{width}} {'k':>3} {'r a':>6} {'r e':>6} {'r tr':>6} {'q>ev a':>6} "
            f"{'q>ev e':>6} {'st/k a':>6} {'st/k e':>6}")
    lines.append(head)
    for name, m in results["methods"].items():
        for k in _ks(results):
            tr = (m.get("transcript") or {}).get(f"recall@{k}", {}).get(pool)
            lines.append(
                f"{name:<{width}} {k:>3} {_pct(m['ask'][f'recall@{k}'][pool])} "
                f"{_pct(m['end'][f'recall@{k}'][pool])} {_pct(tr)} "
                f"{_pct(m['ask'][f'question_above_evidence@{k}'][pool])} "
                f"{_pct(m['end'][f'question_above_evidence@{k}'][pool])} "
                f"{_fmt_n(m['ask'][f'stored_per_k@{k}'][pool])} "
                f"{_fmt_n(m['end'][f'stored_per_k@{k}'][pool])}")
    lines.append("")
    lines.append(f"{'method':<{width}} {'hub ask':>7} {'hub end':>7}  first-after-write p50/p95"
                 f"  warm p50/p95 (ms)  hub turn at the end")
    for name, m in results["methods"].items():
        hub = m["ask"][f"hub_share@{HUB_DEPTH}"][pool]
        hub_end = m["end"][f"hub_share@{HUB_DEPTH}"][pool]
        turn = (m["hub_turn"].get("end") or {})
        lat = m["latency_ms"]
        lines.append(f"{name:<{width}} {_pct(hub):>7} {_pct(hub_end):>7}  "
                     f"{_ms(lat['first_after_write']):>25}  {_ms(lat['warm']):>17}  "
                     f"{(turn.get('text') or '')[:50]!r}{' (stored)' if turn.get('stored') else ''}")
    budgets = sorted(int(key.split("@")[1]) for key in next(iter(
        results["methods"].values()))["ask"] if key.startswith("tokens_recall@"))
    if budgets:
        lines.append("")
        lines.append("context (MiniLM tokens of the memories' text): tokens of the top k at ask "
                     "time; recall within a token budget at ask / end / transcript (%)")
        for name, m in results["methods"].items():
            toks = ", ".join(f"k={k} {m['ask'][f'context_tokens@{k}'][pool] or 0:.0f}"
                             for k in _ks(results))
            within = ", ".join(
                f"{b}: {_pct(m['ask'][f'tokens_recall@{b}'][pool]).strip()} / "
                f"{_pct(m['end'][f'tokens_recall@{b}'][pool]).strip()} / "
                f"{_pct((m.get('transcript') or {}).get(f'tokens_recall@{b}', {}).get(pool)).strip()}"
                for b in budgets)
            lines.append(f"  {name}: {toks}; {within}")
    k = _ks(results)[-1]
    lines.append("")
    lines.append(f"recall@{k} per category, ask / end (%):")
    for name, m in results["methods"].items():
        cells = [f"{c} {_pct(m['ask'][f'recall@{k}'][c]).strip()}/"
                 f"{_pct(m['end'][f'recall@{k}'][c]).strip()}" for c in m["ask"][f"recall@{k}"]]
        lines.append(f"  {name}: " + ", ".join(cells))
    ing = results["ingest"]
    tps = f"{ing['turns_per_s']:.0f}" if ing["turns_per_s"] else "-"
    lines.append(f"ingest: {ing['turns']} turns ({ing['stored_turns']} stored by the agent) in "
                 f"{ing['seconds']:.1f} s, {tps} turns/s (turn vectors from the run's cache; "
                 f"concepts embedded while writing)")
    lines.append(f"time: {results['timing_s']['total']:.0f} s in all")
    return "\n".join(lines)


def _fmt_n(v: float | None) -> str:
    return f"{v:>6.2f}" if v is not None else f"{'-':>6}"


def _pool(results: Mapping[str, Any]) -> str:
    return "pooled" if results["format"] == "longmemeval" else "1-4"


def _ks(results: Mapping[str, Any]) -> list[int]:
    first = next(iter(results["methods"].values()))["ask"]
    return sorted(int(key.split("@")[1]) for key in first if key.startswith("recall@"))


def plot_agent(results: Mapping[str, Any], out_dir: str | Path) -> list[Path]:
    """Write ``agent_recall.png``: pooled recall@k at ask time, at the end and of the
    transcript alone, against k, per method; and ``agent_stored.png``: stored turns per
    top k at ask time and at the end."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ks = _ks(results)
    pool = _pool(results)
    written = []
    for name, panels, ylabel in (
            ("agent_recall.png", (("ask", "recall"), ("end", "recall"),
                                  ("transcript", "recall")), "recall@k (%)"),
            ("agent_stored.png", (("ask", "stored_per_k"), ("end", "stored_per_k")),
             "stored turns in the top k")):
        fig, ax = plt.subplots(figsize=(6, 4.5))
        for i, (method, m) in enumerate(results["methods"].items()):
            color = f"C{i % 10}"  # one colour per method, one line style per phase
            for phase, metric in panels:
                if phase not in m:
                    continue
                ys = [m[phase][f"{metric}@{k}"][pool] for k in ks]
                if any(y is None for y in ys):
                    continue
                scale = 100 if metric == "recall" else 1
                style = {"ask": "-", "end": "--", "transcript": ":"}[phase]
                ax.plot(ks, [scale * y for y in ys], style, color=color, marker="o",
                        label=f"{method} {phase}")
        ax.set_xlabel("k (episodes)")
        ax.set_ylabel(ylabel)
        ax.set_title(f"bench agent ({results['format']}), {pool}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / name, dpi=120)
        plt.close(fig)
        written.append(out / name)
    return written
