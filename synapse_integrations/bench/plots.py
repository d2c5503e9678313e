"""PNG plots for the benchmark commands (matplotlib, headless ``Agg`` backend).

``plot_locomo``: pooled recall@k (categories 1-4) against k, one line per method, and the
gate sweep. ``plot_perf``: retrieval latency against the number of nodes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["plot_locomo", "plot_perf"]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_locomo(results: dict[str, Any], out_dir: str | Path) -> list[Path]:
    """Write ``locomo_recall.png`` (and ``locomo_gate.png`` when there is a gate sweep)."""
    plt = _pyplot()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, m in results["methods"].items():
        ks = sorted(int(key.split("@")[1]) for key in m if key.startswith("recall@"))
        style = "-" if name.startswith("synapse") else "--"
        axes[0].plot(ks, [100 * m[f"recall@{k}"]["1-4"] for k in ks], style, marker="o", label=name)
        axes[1].plot(ks, [100 * m[f"recall@{k}"]["1"] for k in ks], style, marker="o", label=name)
    for ax, title in zip(axes, ("pooled categories 1-4", "multi-hop (category 1)")):
        ax.set_xlabel("k (episodes)")
        ax.set_ylabel("recall@k (%)")
        ax.set_title(f"LoCoMo recall@k, {title}")
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path = out / "locomo_recall.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    written.append(path)
    gate = results.get("gate")
    if gate and gate.get("sweep"):
        fig, ax = plt.subplots(figsize=(5, 4.5))
        xs = [100 * r["false_refusal"] for r in gate["sweep"]]
        ys = [100 * r["adversarial_rejection"] for r in gate["sweep"]]
        ax.plot(xs, ys, marker="o")
        for r, x, y in zip(gate["sweep"], xs, ys):
            ax.annotate(f"{r['tau']:g}", (x, y), fontsize=7, xytext=(3, -8), textcoords="offset points")
        ax.set_xlabel("false refusals, categories 1-4 (%)")
        ax.set_ylabel("category 5 rejected (%)")
        ax.set_title(f"gate sweep ({gate['method']})")
        ax.grid(alpha=0.3)
        fig.tight_layout()
        path = out / "locomo_gate.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
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
