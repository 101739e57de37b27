"""Sweep summaries: `python -m jaxrl.sweep <run dir>` reads the run's `evals.csv` and writes, per
grid point (the whole run without a grid), `sweep.csv` (every seed's eval curve on a common
env-step axis, with the mean and a 95% bootstrap confidence band over seeds), `ranking.csv`
(points ranked by final return, with its band, the mean best return and the area under the mean
curve) and `sweep.png` (one band around each point's mean; each seed faint behind a lone one).

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

from jaxrl.hyper import point_name

BOOTSTRAP_SAMPLES = 2000
CONFIDENCE = 0.95


class SweepCurves(NamedTuple):
    env_steps: np.ndarray  # [points]
    seeds: list[int]
    returns: np.ndarray  # [seeds, points]
    mean: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray


class PointSummary(NamedTuple):
    """The seeds of one grid point (the whole run without a grid), aligned and ranked."""

    grid_point: int | None
    values: dict[str, float]  # its hyperparameter values; {} without a grid
    curves: SweepCurves
    final: float  # mean final return over seeds
    final_ci: tuple[float, float]
    best: float  # mean over seeds of each seed's best evaluation
    auc: float  # the mean curve averaged over env steps (area under it / its span)

    @property
    def name(self) -> str:
        return point_name(self.values) or "all seeds"


Curves = dict[int, tuple[np.ndarray, np.ndarray]]


def read_evals(path: Path) -> dict[int | None, tuple[dict[str, float], Curves]]:
    """Per grid point (None without a grid): its values and, per seed, (env_steps, eval_return)
    in iteration order. A resumed run may have logged an iteration twice; the last row wins."""
    rows: dict[int | None, dict[int, dict[int, tuple[float, float]]]] = {}
    values: dict[int | None, dict[str, float]] = {}
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        columns = reader.fieldnames or []
        keys = columns[1 : columns.index("seed")] if "grid_point" in columns else []
        for row in reader:
            point = int(row["grid_point"]) if "grid_point" in columns else None
            values.setdefault(point, {k: float(row[k]) for k in keys})
            per_seed = rows.setdefault(point, {}).setdefault(int(row["seed"]), {})
            per_seed[int(row["iteration"])] = (float(row["env_steps"]), float(row["eval_return"]))
    if not rows:
        raise ValueError(f"{path} has no evaluations yet")
    out = {}
    for point, seeds in sorted(rows.items(), key=lambda item: -1 if item[0] is None else item[0]):
        curves = {}
        for seed, by_iteration in sorted(seeds.items()):
            pts = [by_iteration[i] for i in sorted(by_iteration)]
            curves[seed] = (np.array([p[0] for p in pts]), np.array([p[1] for p in pts]))
        out[point] = (values[point], curves)
    return out


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


def align(curves: Curves) -> SweepCurves:
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


def summarize_point(point: int | None, values: dict[str, float], curves: Curves) -> PointSummary:
    aligned = align(curves)
    steps, mean = aligned.env_steps, aligned.mean
    span = float(steps[-1] - steps[0])
    auc = float(np.trapezoid(mean, steps) / span) if span > 0 else float(mean[-1])
    best = float(np.mean([c[1].max() for c in curves.values()]))
    final_ci = (float(aligned.ci_low[-1]), float(aligned.ci_high[-1]))
    return PointSummary(point, values, aligned, float(mean[-1]), final_ci, best, auc)


def ranked(points: list[PointSummary]) -> list[PointSummary]:
    """Best first: by final return, then area under the curve."""
    return sorted(points, key=lambda p: (-p.final, -p.auc))


def write_csv(points: list[PointSummary], path: Path) -> None:
    """Every seed's curve with the mean and band, per grid point (one block of rows each)."""
    keys = list(points[0].values)
    seeds = points[0].curves.seeds
    grid_columns = ["grid_point", *keys] if points[0].grid_point is not None else []
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            [
                *grid_columns,
                "env_steps",
                *(f"seed_{s}" for s in seeds),
                "mean",
                "ci95_low",
                "ci95_high",
            ]
        )
        for point in points:
            c = point.curves
            ids = (
                [point.grid_point, *(f"{point.values[k]:g}" for k in keys)] if grid_columns else []
            )
            for i, step in enumerate(c.env_steps):
                w.writerow(
                    [
                        *ids,
                        int(step),
                        *(f"{r:.6g}" for r in c.returns[:, i]),
                        f"{c.mean[i]:.6g}",
                        f"{c.ci_low[i]:.6g}",
                        f"{c.ci_high[i]:.6g}",
                    ]
                )


RANKING_COLUMNS = ("final_mean", "final_ci95_low", "final_ci95_high", "best_mean", "auc", "seeds")


def write_ranking(points: list[PointSummary], path: Path) -> None:
    keys = list(points[0].values)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["rank", "grid_point", *keys, *RANKING_COLUMNS])
        for rank, p in enumerate(ranked(points), start=1):
            w.writerow(
                [
                    rank,
                    "" if p.grid_point is None else p.grid_point,
                    *(f"{p.values[k]:g}" for k in keys),
                    f"{p.final:.6g}",
                    f"{p.final_ci[0]:.6g}",
                    f"{p.final_ci[1]:.6g}",
                    f"{p.best:.6g}",
                    f"{p.auc:.6g}",
                    len(p.curves.seeds),
                ]
            )


def plot(points: list[PointSummary], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, point in enumerate(points):
        c = point.curves
        color = f"C{i % 10}"
        if len(points) == 1:  # the seeds themselves, faint behind one band
            for returns in c.returns:
                ax.plot(c.env_steps, returns, color=color, alpha=0.15, linewidth=0.8)
        ax.fill_between(c.env_steps, c.ci_low, c.ci_high, color=color, alpha=0.25)
        label = f"mean of {len(c.seeds)} seeds" if len(points) == 1 else point.name
        ax.plot(c.env_steps, c.mean, color=color, linewidth=2, label=label)
    ax.set_xlabel("env steps")
    ax.set_ylabel("eval return (95% bootstrap CI over seeds)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def summarize(run_dir: str | Path) -> list[PointSummary]:
    """Write `sweep.csv`, `ranking.csv` and `sweep.png` into `run_dir`; returns each grid
    point's summary (one without a grid), in grid order."""
    run_dir = Path(run_dir)
    evals = run_dir / "evals.csv"
    if not evals.exists():
        raise FileNotFoundError(f"{evals} not found: is {run_dir} a jaxrl run directory?")
    points = [
        summarize_point(point, values, curves)
        for point, (values, curves) in read_evals(evals).items()
    ]
    write_csv(points, run_dir / "sweep.csv")
    write_ranking(points, run_dir / "ranking.csv")
    plot(points, run_dir / "sweep.png", _title(run_dir, points))
    return points


def _title(run_dir: Path, points: list[PointSummary]) -> str:
    seeds = len(points[0].curves.seeds)
    grid = f"{len(points)} grid points x " if points[0].grid_point is not None else ""
    summary = run_dir / "summary.json"
    if summary.exists():
        data = json.loads(summary.read_text())
        return f"{data['agent']} on {data['env']} ({grid}{seeds} seeds)"
    return f"{run_dir.name} ({grid}{seeds} seeds)"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", help="a run directory holding evals.csv")
    args = parser.parse_args(argv)
    try:
        points = summarize(args.run_dir)
    except (FileNotFoundError, ValueError) as e:
        raise SystemExit(f"error: {e}") from None
    for rank, p in enumerate(ranked(points), start=1):
        print(
            f"{rank}. {p.name}: final {p.final:.1f} [{p.final_ci[0]:.1f}, {p.final_ci[1]:.1f}], "
            f"best {p.best:.1f}, area under curve {p.auc:.1f} ({len(p.curves.seeds)} seeds)"
        )
    out = Path(args.run_dir)
    print(f"-> {out / 'sweep.csv'}, {out / 'ranking.csv'}, {out / 'sweep.png'}")


if __name__ == "__main__":
    main()
