"""PNG plots for the benchmark commands (matplotlib, headless ``Agg`` backend).

``plot_locomo``: pooled recall@k (categories 1-4) and multi-hop recall@k against k, one
line per method, and the gate sweep. ``plot_longmemeval``: pooled turn- and session-level
recall@k against k, and the gate sweep. ``plot_perf``: retrieval latency against the
number of nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .baselines import is_baseline

__all__ = ["plot_locomo", "plot_longmemeval", "plot_perf"]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _plot_recall(results: dict[str, Any], panels: Sequence[tuple[str, str, str]],
                 path: Path, bench: str) -> Path:
    """One panel per ``(metric, category, title)``: the metric at every k, per method."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.5), squeeze=False)
    for ax, (metric, cat, title) in zip(axes[0], panels):
        for name, m in results["methods"].items():
            ks = sorted(int(key.split("@")[1]) for key in m if key.startswith(f"{metric}@"))
            ys = [m[f"{metric}@{k}"].get(cat) for k in ks]
            if any(y is None for y in ys):
                continue
            style = "--" if is_baseline(name) else "-"
            ax.plot(ks, [100 * y for y in ys], style, marker="o", label=name)
        ax.set_xlabel("k (episodes)")
        ax.set_ylabel(f"{metric}@k (%)")
        ax.set_title(f"{bench} {metric}@k, {title}")
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _plot_gate(gate: dict[str, Any], path: Path, refuse: str, answer: str) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5, 4.5))
    xs = [100 * r["false_refusal"] for r in gate["sweep"]]
    ys = [100 * r["adversarial_rejection"] for r in gate["sweep"]]
    ax.plot(xs, ys, marker="o", label="topic check (tau)")
    for r, x, y in zip(gate["sweep"], xs, ys):
        ax.annotate(f"{r['tau']:g}", (x, y), fontsize=7, xytext=(3, -8), textcoords="offset points")
    for name, key, label in (("attribution_sweep", "margin", "+ attribution (margin)"),
                             ("presence_sweep", "presence_min", "+ presence (minimum)")):
        rows = gate.get(name) or []
        if rows:
            px = [100 * r["false_refusal"] for r in rows]
            py = [100 * r["adversarial_rejection"] for r in rows]
            ax.plot(px, py, marker="s", label=label)
            for r, x, y in zip(rows, px, py):
                ax.annotate(f"{r[key]:g}", (x, y), fontsize=7, xytext=(3, 3),
                            textcoords="offset points")
    if "decision" in gate:
        d = gate["decision"]
        ax.plot([100 * d["false_refusal"]], [100 * d["adversarial_rejection"]], "k*",
                markersize=12, label="default gate")
    ax.legend(fontsize=7)
    ax.set_xlabel(f"false refusals, {answer} (%)")
    ax.set_ylabel(f"{refuse} rejected (%)")
    ax.set_title(f"gate sweep ({gate['method']})")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_locomo(results: dict[str, Any], out_dir: str | Path) -> list[Path]:
    """Write ``locomo_recall.png`` (and ``locomo_gate.png`` when there is a gate sweep)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = [_plot_recall(results, [("recall", "1-4", "pooled categories 1-4"),
                                      ("recall", "1", "multi-hop (category 1)")],
                            out / "locomo_recall.png", "LoCoMo")]
    gate = results.get("gate")
    if gate and gate.get("sweep"):
        written.append(_plot_gate(gate, out / "locomo_gate.png", "category 5",
                                  "categories 1-4"))
    return written


def plot_longmemeval(results: dict[str, Any], out_dir: str | Path) -> list[Path]:
    """Write ``longmemeval_recall.png`` (and ``longmemeval_gate.png`` with a gate sweep)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = [_plot_recall(results, [("recall", "pooled", "turn level, pooled"),
                                      ("session_recall", "pooled", "session level, pooled")],
                            out / "longmemeval_recall.png", "LongMemEval")]
    gate = results.get("gate")
    if gate and gate.get("sweep"):
        written.append(_plot_gate(gate, out / "longmemeval_gate.png", "abstention questions",
                                  "other questions"))
    return written


def plot_perf(results: dict[str, Any], out_dir: str | Path) -> list[Path]:
    """Write ``perf_latency.png``: p50 latencies against node count (log-log)."""
    plt = _pyplot()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    runs = sorted(results["runs"], key=lambda r: r["nodes"])
    fig, ax = plt.subplots(figsize=(6, 4.5))
    xs = [r["nodes"] for r in runs]
    for key, label in (("retrieve_ms", "full SYNAPSE retrieve"), ("dense_only_ms", "dense-only Chroma"),
                       ("activation_ms", "activation step")):
        ax.plot(xs, [r[key]["p50"] for r in runs], marker="o", label=f"{label} p50")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("episodic nodes")
    ax.set_ylabel("ms per query")
    ax.set_title("retrieval latency vs memory size")
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    fig.tight_layout()
    path = out / "perf_latency.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return [path]
