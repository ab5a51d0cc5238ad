"""Learning curves of one or more runs, side by side, as a PNG."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

from toolgym.training.run.files import read_metrics

DEFAULT_METRICS = ("rollout/success", "rollout/reward", "eval/success", "train/entropy")


def plot_runs(
    run_dirs: Sequence[str | Path],
    out: str | Path,
    metrics: Sequence[str] = DEFAULT_METRICS,
    x: str = "env_steps",
) -> Path:
    """One panel per metric, one line per run; x is cumulative env steps (or `step`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = {Path(d).name or str(d): read_metrics(d) for d in run_dirs}
    if not any(runs.values()):
        raise ValueError(f"no metrics found in {', '.join(map(str, run_dirs))}")
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.4), squeeze=False)
    for ax, metric in zip(axes[0], metrics, strict=True):
        for name, records in runs.items():
            xs_all = _xs(records, x)
            points = [(xs_all[i], r[metric]) for i, r in enumerate(records) if metric in r]
            if points:
                xs, ys = zip(*points, strict=True)
                ax.plot(xs, ys, marker="o" if len(points) < 30 else None, markersize=3, label=name)
        ax.set_title(metric)
        ax.set_xlabel("env steps" if x == "env_steps" else x)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def _xs(records: list[dict], x: str) -> list[float]:
    """The x value of every record: cumulative env steps, or the named field."""
    if x == "env_steps":
        return [float(v) for v in itertools.accumulate(r.get("env_steps", 0) for r in records)]
    return [float(r.get(x, i)) for i, r in enumerate(records)]
