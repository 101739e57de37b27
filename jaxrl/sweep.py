"""Seed-sweep summaries: `python -m jaxrl.sweep <run dir>` reads the run's `evals.csv` and writes
`sweep.csv` (every seed's eval curve on a common env-step axis, with the mean and a 95% bootstrap
confidence band over seeds) and `sweep.png` (the band around the mean, each seed faint behind).

Seeds are aligned by env steps. Where they differ between seeds (ES and REINFORCE count the
steps of whole episodes, so each seed evaluates at its own step counts) the curves are
interpolated linearly onto the union of their evaluation steps, from the latest first evaluation
to the latest last one; a seed that stopped earlier (it reached its budget first) holds its final
return, rather than pretending the evaluations were simultaneous.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path
from typing import NamedTuple

import numpy as np

BOOTSTRAP_SAMPLES = 2000
CONFIDENCE = 0.95


class SweepCurves(NamedTuple):
    env_steps: np.ndarray  # [points]
    seeds: list[int]
    returns: np.ndarray  # [seeds, points]
    mean: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray


def read_evals(path: Path) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per seed: (env_steps, eval_return) in iteration order. A resumed run may have logged an
    iteration twice; the last row wins."""
    rows: dict[int, dict[int, tuple[float, float]]] = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            per_seed = rows.setdefault(int(row["seed"]), {})
            per_seed[int(row["iteration"])] = (float(row["env_steps"]), float(row["eval_return"]))
    if not rows:
        raise ValueError(f"{path} has no evaluations yet")
    curves = {}
    for seed, by_iteration in sorted(rows.items()):
        points = [by_iteration[i] for i in sorted(by_iteration)]
        curves[seed] = (np.array([p[0] for p in points]), np.array([p[1] for p in points]))
    return curves


def bootstrap_ci(
    returns: np.ndarray, samples: int = BOOTSTRAP_SAMPLES, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap over seeds (axis 0) of the mean, per point; deterministic."""
    rng = np.random.default_rng(seed)
    n = returns.shape[0]
    picks = rng.integers(0, n, size=(samples, n))
    means = returns[picks].mean(axis=1)  # [samples, points]
    tail = (1.0 - CONFIDENCE) / 2.0 * 100.0
    return np.percentile(means, tail, axis=0), np.percentile(means, 100.0 - tail, axis=0)


def align(curves: dict[int, tuple[np.ndarray, np.ndarray]]) -> SweepCurves:
    seeds = list(curves)
    steps = [curves[s][0] for s in seeds]
    same_steps = all(len(x) == len(steps[0]) and np.array_equal(x, steps[0]) for x in steps)
    if same_steps:
        grid = steps[0]
        returns = np.stack([curves[s][1] for s in seeds])
    else:
        first = max(x[0] for x in steps)
        union = np.unique(np.concatenate(steps))
        grid = union[union >= first]
        # np.interp holds the end values: a seed that finished first keeps its final return.
        returns = np.stack([np.interp(grid, *curves[s]) for s in seeds])
    low, high = bootstrap_ci(returns)
    return SweepCurves(grid, seeds, returns, returns.mean(axis=0), low, high)


def write_csv(curves: SweepCurves, path: Path) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            ["env_steps", *(f"seed_{s}" for s in curves.seeds), "mean", "ci95_low", "ci95_high"]
        )
        for i, step in enumerate(curves.env_steps):
            w.writerow(
                [
                    int(step),
                    *(f"{r:.6g}" for r in curves.returns[:, i]),
                    f"{curves.mean[i]:.6g}",
                    f"{curves.ci_low[i]:.6g}",
                    f"{curves.ci_high[i]:.6g}",
                ]
            )


def plot(curves: SweepCurves, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for returns in curves.returns:
        ax.plot(curves.env_steps, returns, color="tab:blue", alpha=0.15, linewidth=0.8)
    ax.fill_between(
        curves.env_steps,
        curves.ci_low,
        curves.ci_high,
        color="tab:blue",
        alpha=0.3,
        label="95% bootstrap CI",
    )
    ax.plot(
        curves.env_steps,
        curves.mean,
        color="tab:blue",
        linewidth=2,
        label=f"mean of {len(curves.seeds)} seeds",
    )
    ax.set_xlabel("env steps")
    ax.set_ylabel("eval return")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def summarize(run_dir: str | Path) -> SweepCurves:
    """Write `sweep.csv` and `sweep.png` into `run_dir`; returns the aligned curves."""
    run_dir = Path(run_dir)
    evals = run_dir / "evals.csv"
    if not evals.exists():
        raise FileNotFoundError(f"{evals} not found: is {run_dir} a jaxrl run directory?")
    curves = align(read_evals(evals))
    write_csv(curves, run_dir / "sweep.csv")
    plot(curves, run_dir / "sweep.png", _title(run_dir, len(curves.seeds)))
    return curves


def _title(run_dir: Path, num_seeds: int) -> str:
    summary = run_dir / "summary.json"
    if summary.exists():
        data = json.loads(summary.read_text())
        return f"{data['agent']} on {data['env']} ({num_seeds} seeds)"
    return f"{run_dir.name} ({num_seeds} seeds)"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", help="a run directory holding evals.csv")
    args = parser.parse_args(argv)
    try:
        curves = summarize(args.run_dir)
    except (FileNotFoundError, ValueError) as e:
        raise SystemExit(f"error: {e}") from None
    print(
        f"{len(curves.seeds)} seeds, final mean {curves.mean[-1]:.1f} "
        f"[{curves.ci_low[-1]:.1f}, {curves.ci_high[-1]:.1f}] -> "
        f"{Path(args.run_dir) / 'sweep.csv'}, {Path(args.run_dir) / 'sweep.png'}"
    )


if __name__ == "__main__":
    main()
