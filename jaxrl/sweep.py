"""Sweep summaries: `python -m jaxrl.sweep <run dir>` reads the run's `evals.csv` and writes, per
grid point (the whole run without a grid), `sweep.csv` (every seed's eval curve on a common
env-step axis, with their mean, their interquartile mean (IQM) and its 95% confidence band),
`ranking.csv` (points ranked by final IQM, with its band, the final mean, the mean best return
and the area under the mean curve), `sweep.png` (one band around each point's IQM curve; each
seed faint behind a lone one) and `profile.png` (performance profiles: the fraction of a point's
seeds whose final return exceeds each threshold, with its band).

Interval estimates are rliable's, as Agarwal et al. (NeurIPS 2021) recommend for few seeds: the
IQM (the mean of the seeds left once a quarter, rounded down, is cut at each end: the middle two
of four, the middle three of five, the plain mean below four) is not dragged by one seed that
diverged or got lucky, and its band is a percentile bootstrap stratified by task, which for a
run's one env resamples its seeds.

Seeds are aligned by env steps. Where they differ between seeds (ES and REINFORCE count the
steps of whole episodes, so each seed evaluates at its own step counts) the curves are
interpolated linearly onto the union of their evaluation steps, from the latest first evaluation
to the latest last one; a seed that stopped earlier (it reached its budget first) holds its final
return, rather than pretending the evaluations were simultaneous.

On a `-m` sweep's directory (Hydra's `hydra.sweep.dir`, whatever launcher ran the jobs: in this
process, as submitit jobs on a SLURM cluster or Optuna trials) it gathers the jobs' run
directories into one report there: a point is a job's values of the overrides that differ between
jobs (`seed` aside) with, inside the job, its grid point's values; jobs that differ only in `seed`
are seeds of one point, so `-m agent.learning_rate=1e-3,3e-4 seed=0,1,2` gives two points of
three seeds, as would one job with `grid.agent.learning_rate=[1e-3,3e-4] num_seeds=3`.

`objective` is what each job of a `-m` sweep returns to Hydra's sweeper (Optuna's optimises it).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

import numpy as np

from jaxrl.config import install_hint

BOOTSTRAP_SAMPLES = 2000
CONFIDENCE = 0.95
PROFILE_THRESHOLDS = 101
OBJECTIVES = ("final", "best", "auc")
EXIT_BAD_INPUT = 2


class SweepCurves(NamedTuple):
    env_steps: np.ndarray  # [points]
    seeds: list[int]
    returns: np.ndarray  # [seeds, points]
    mean: np.ndarray
    iqm: np.ndarray
    ci_low: np.ndarray  # the IQM's 95% interval
    ci_high: np.ndarray


Value = float | str  # a grid's values are numbers; a swept override may name a group (agent=ppo)


class PointSummary(NamedTuple):
    """The seeds of one grid point (the whole run without a grid), aligned and ranked."""

    grid_point: int | None  # the point's index in a grid or a gathered sweep
    values: dict[str, Value]  # its hyperparameter values; {} without a grid
    curves: SweepCurves
    final: float  # IQM of the seeds' final returns
    final_ci: tuple[float, float]  # its 95% interval
    final_mean: float  # mean final return over seeds, as in summary.json
    best: float  # mean over seeds of each seed's best evaluation
    auc: float  # the mean curve averaged over env steps (area under it / its span)

    @property
    def name(self) -> str:
        return ",".join(f"{k}={value_text(v)}" for k, v in self.values.items()) or "all seeds"


def value_text(value: Value) -> str:
    return f"{value:g}" if isinstance(value, float) else value


Curves = dict[int, tuple[np.ndarray, np.ndarray]]


def read_evals(
    path: Path, column: str = "eval_return"
) -> dict[int | None, tuple[dict[str, Value], Curves]]:
    """Per grid point (None without a grid): its values and, per seed, (env_steps, `column`)
    in iteration order. A resumed run may have logged an iteration twice; the last row wins."""
    rows: dict[int | None, dict[int, dict[int, tuple[float, float]]]] = {}
    values: dict[int | None, dict[str, Value]] = {}
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        columns = reader.fieldnames or []
        keys = columns[1 : columns.index("seed")] if "grid_point" in columns else []
        for row in reader:
            point = int(row["grid_point"]) if "grid_point" in columns else None
            values.setdefault(point, {k: float(row[k]) for k in keys})
            per_seed = rows.setdefault(point, {}).setdefault(int(row["seed"]), {})
            per_seed[int(row["iteration"])] = (float(row["env_steps"]), float(row[column]))
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


def iqm(scores: np.ndarray) -> np.ndarray:
    """rliable's `metrics.aggregate_iqm` (scipy's 25% trimmed mean over runs and tasks) for
    every point of the last axis at once: scipy's wrapper, called once per point and bootstrap
    sample, would be most of a report's time."""
    runs = scores.reshape(-1, scores.shape[-1])  # [runs x tasks, points]
    cut = int(0.25 * runs.shape[0])
    return np.sort(runs, axis=0)[cut : runs.shape[0] - cut].mean(axis=0)


@contextlib.contextmanager
def _numpy_seed(seed: int) -> Iterator[None]:
    """rliable's stratified bootstrap draws from numpy's global generator: seeded for
    reproducible bands, and the caller's state given back."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def iqm_interval(
    returns: np.ndarray, samples: int = BOOTSTRAP_SAMPLES, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per column of `returns` [seeds, points]: the IQM over seeds and its 95% interval, from
    rliable's stratified percentile bootstrap (the stratum: the run's one env); deterministic."""
    from rliable import library

    scores = {"point": returns[:, None, :]}  # rliable's [runs, tasks, points]
    with _numpy_seed(seed):
        point, interval = library.get_interval_estimates(
            scores, iqm, reps=samples, confidence_interval_size=CONFIDENCE
        )
    return point["point"], interval["point"][0], interval["point"][1]


def performance_profile(
    finals: np.ndarray, thresholds: np.ndarray, samples: int = BOOTSTRAP_SAMPLES, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The fraction of seeds whose final return exceeds each threshold (rliable's score
    distribution) with its 95% interval, from rliable's stratified bootstrap; deterministic."""
    from rliable import library

    def above(scores: np.ndarray, taus: np.ndarray) -> np.ndarray:
        return (scores.reshape(-1, 1) > taus).mean(axis=0)

    with _numpy_seed(seed):
        profile, interval = library.create_performance_profile(
            {"point": finals[:, None]},
            thresholds,
            custom_profile_func=above,
            reps=samples,
            confidence_interval_size=CONFIDENCE,
        )
    return profile["point"], interval["point"][0], interval["point"][1]


def align(curves: Curves) -> tuple[np.ndarray, list[int], np.ndarray]:
    """(common env steps, seeds, returns [seeds, steps])."""
    seeds = list(curves)
    steps = [curves[s][0] for s in seeds]
    if all(len(x) == len(steps[0]) and np.array_equal(x, steps[0]) for x in steps):
        return steps[0], seeds, np.stack([curves[s][1] for s in seeds])
    first = max(x[0] for x in steps)
    union = np.unique(np.concatenate(steps))
    grid = union[union >= first]
    # np.interp holds the end values: a seed that finished first keeps its final return.
    return grid, seeds, np.stack([np.interp(grid, *curves[s]) for s in seeds])


def area_per_step(env_steps: np.ndarray, curve: np.ndarray) -> float:
    """The area under `curve` over its span of env steps (its only value for one evaluation)."""
    span = float(env_steps[-1] - env_steps[0])
    return float(np.trapezoid(curve, env_steps) / span) if span > 0 else float(curve[-1])


def summarize_point(point: int | None, values: dict[str, Value], curves: Curves) -> PointSummary:
    steps, seeds, returns = align(curves)
    mean = returns.mean(axis=0)
    centre, low, high = iqm_interval(returns)
    aligned = SweepCurves(steps, seeds, returns, mean, centre, low, high)
    best = float(np.mean([c[1].max() for c in curves.values()]))
    return PointSummary(
        point,
        values,
        aligned,
        float(centre[-1]),
        (float(low[-1]), float(high[-1])),
        float(mean[-1]),
        best,
        area_per_step(steps, mean),
    )


def ranked(points: list[PointSummary]) -> list[PointSummary]:
    """Best first: by final IQM, then area under the mean curve."""
    return sorted(points, key=lambda p: (-p.final, -p.auc))


def objective(run_dir: str | Path, kind: str = "final") -> float:
    """The best grid point's (without a grid: the run's) mean over seeds of the final eval return
    (`final`, from summary.json), of each seed's best one (`best`, from summary.json) or the area
    under the mean eval curve per env step (`auc`, from evals.csv); NaN where there is none, which
    Optuna records as a failed trial. The best point, because a trial that is a grid is worth
    what its best point reached."""
    if kind not in OBJECTIVES:
        raise ValueError(f"unknown objective '{kind}'; valid: {', '.join(OBJECTIVES)}")
    run_dir = Path(run_dir)
    if kind == "auc":
        per_point = []
        for _, curves in read_evals(run_dir / "evals.csv").values():
            steps, _, returns = align(curves)
            per_point.append(area_per_step(steps, returns.mean(axis=0)))
    else:
        summary = json.loads((run_dir / "summary.json").read_text())
        per_point = [row[f"{kind}_eval_return"] for row in summary.get("grid", [summary])]
    finite = [v for v in per_point if v is not None and math.isfinite(v)]
    return max(finite) if finite else math.nan


def write_csv(points: list[PointSummary], path: Path) -> None:
    """Every seed's curve with the mean, IQM and band, per grid point (one block of rows each)."""
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
                "iqm",
                "iqm_ci95_low",
                "iqm_ci95_high",
            ]
        )
        for point in points:
            c = point.curves
            ids = (
                [point.grid_point, *(value_text(point.values[k]) for k in keys)]
                if grid_columns
                else []
            )
            for i, step in enumerate(c.env_steps):
                w.writerow(
                    [
                        *ids,
                        int(step),
                        *(f"{r:.6g}" for r in c.returns[:, i]),
                        f"{c.mean[i]:.6g}",
                        f"{c.iqm[i]:.6g}",
                        f"{c.ci_low[i]:.6g}",
                        f"{c.ci_high[i]:.6g}",
                    ]
                )


RANKING_COLUMNS = (
    "final_iqm",
    "final_iqm_ci95_low",
    "final_iqm_ci95_high",
    "final_mean",
    "best_mean",
    "auc",
    "seeds",
)


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
                    *(value_text(p.values[k]) for k in keys),
                    f"{p.final:.6g}",
                    f"{p.final_ci[0]:.6g}",
                    f"{p.final_ci[1]:.6g}",
                    f"{p.final_mean:.6g}",
                    f"{p.best:.6g}",
                    f"{p.auc:.6g}",
                    len(p.curves.seeds),
                ]
            )


def _pyplot() -> ModuleType:
    """matplotlib is optional (the sweep extra): imported when a plot is drawn, headless."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt: ModuleType, fig: Any, ax: Any, title: str, path: Path) -> None:
    """Title, grid and legend as every sweep figure has them; written to `path` and closed."""
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot(points: list[PointSummary], path: Path, title: str) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, point in enumerate(points):
        c = point.curves
        color = f"C{i % 10}"
        if len(points) == 1:  # the seeds themselves, faint behind one band
            for returns in c.returns:
                ax.plot(c.env_steps, returns, color=color, alpha=0.15, linewidth=0.8)
        ax.fill_between(c.env_steps, c.ci_low, c.ci_high, color=color, alpha=0.25)
        label = f"IQM of {len(c.seeds)} seeds" if len(points) == 1 else point.name
        ax.plot(c.env_steps, c.iqm, color=color, linewidth=2, label=label)
    ax.set_xlabel("env steps")
    ax.set_ylabel("eval return: IQM over seeds, 95% CI")
    _save(plt, fig, ax, title, path)


def profile_thresholds(points: list[PointSummary]) -> np.ndarray:
    """Evenly over the final returns of every seed of every point, a twentieth of their range
    beyond each end, so that each profile shows where it starts at 1 and ends at 0."""
    finals = np.concatenate([p.curves.returns[:, -1] for p in points])
    low, high = float(finals.min()), float(finals.max())
    margin = (high - low) / 20 or 1.0
    return np.linspace(low - margin, high + margin, PROFILE_THRESHOLDS)


def plot_profiles(points: list[PointSummary], path: Path, title: str) -> None:
    """Performance profiles of the final returns, one per grid point, with their bands."""
    plt = _pyplot()
    taus = profile_thresholds(points)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, point in enumerate(points):
        color = f"C{i % 10}"
        profile, low, high = performance_profile(point.curves.returns[:, -1], taus)
        ax.fill_between(taus, low, high, color=color, alpha=0.2, step="post")
        label = f"{len(point.curves.seeds)} seeds" if len(points) == 1 else point.name
        ax.step(taus, profile, where="post", color=color, linewidth=2, label=label)
    ax.set_xlabel("final eval return τ")
    ax.set_ylabel("fraction of seeds with final return > τ")
    ax.set_ylim(-0.02, 1.02)
    _save(plt, fig, ax, title, path)


def job_dirs(sweep_dir: Path) -> list[Path]:
    """A `-m` sweep's job directories (those holding Hydra's `.hydra/overrides.yaml`), in job
    order."""
    jobs = [d for d in sweep_dir.iterdir() if (d / ".hydra" / "overrides.yaml").is_file()]
    return sorted(jobs, key=lambda d: (0, int(d.name), "") if d.name.isdigit() else (1, 0, d.name))


def job_overrides(job: Path) -> dict[str, str]:
    """The job's overrides, key to value as Hydra wrote them, Hydra's own settings aside."""
    from omegaconf import OmegaConf

    pairs = (str(o).partition("=") for o in OmegaConf.load(job / ".hydra" / "overrides.yaml"))
    return {
        key.lstrip("+~"): value
        for key, _, value in pairs
        if not key.lstrip("+~").startswith(("hydra.", "hydra/"))
    }


def has_evaluations(run_dir: Path) -> bool:
    """Whether a run logged an evaluation (a run that failed first has only evals.csv's header)."""
    evals = run_dir / "evals.csv"
    if not evals.is_file():
        return False
    with open(evals) as f:
        return next(f, None) is not None and next(f, None) is not None


DEFAULT_VALUE = "(default)"  # a key one job sets and another leaves at its default


def _parsed(value: str) -> Value:
    try:
        return float(value)
    except ValueError:
        return value


def varying_keys(overrides: list[dict[str, str]]) -> list[str]:
    """The keys whose values differ between jobs, `seed` aside, in the order the jobs name them."""
    keys: list[str] = []
    for job in overrides:
        keys += [k for k in job if k != "seed" and k not in keys]
    return [k for k in keys if len({job.get(k, DEFAULT_VALUE) for job in overrides}) > 1]


def read_sweep(sweep_dir: Path) -> list[tuple[dict[str, Value], Curves]]:
    """Per point of a `-m` sweep, in the order of the jobs that first ran it: its values (the
    overrides that differ between jobs, `seed` aside, then its grid values inside the job) and
    its seeds' curves, gathered from every job that ran some of its seeds. Jobs without
    evaluations (`skipped_jobs`) are left out; two jobs that ran the same seed of a point are an
    error, not an average."""
    every_job = job_dirs(sweep_dir)
    jobs = [job for job in every_job if has_evaluations(job)]
    if not jobs:
        raise ValueError(f"no job of the sweep in {sweep_dir} has evaluations yet")
    overrides = {job: job_overrides(job) for job in every_job}  # what varies, failed jobs too
    varying = varying_keys(list(overrides.values()))
    points: dict[tuple[tuple[str, str], ...], tuple[dict[str, Value], Curves]] = {}
    origin: dict[tuple[tuple[str, str], ...], dict[int, str]] = {}
    for job in jobs:
        job_values = {k: _parsed(overrides[job].get(k, DEFAULT_VALUE)) for k in varying}
        for grid_values, curves in read_evals(job / "evals.csv").values():
            values = {**job_values, **grid_values}
            ident = tuple((k, value_text(v)) for k, v in values.items())
            _, gathered = points.setdefault(ident, (values, {}))
            ran = origin.setdefault(ident, {})
            for seed, curve in curves.items():
                if seed in gathered:
                    name = ",".join(f"{k}={v}" for k, v in ident) or "the sweep"
                    raise ValueError(
                        f"jobs {ran[seed]} and {job.name} both ran seed {seed} of {name}: "
                        f"sweep seed= (or keep each job's seeds apart) to gather them"
                    )
                gathered[seed], ran[seed] = curve, job.name
    shapes = {tuple(values) for values, _ in points.values()}
    if len(shapes) > 1:
        raise ValueError(
            f"the sweep's jobs grid different keys ({sorted(shapes)}); report each job"
        )
    return list(points.values())


def skipped_jobs(sweep_dir: Path) -> list[str]:
    """`<job>: <why>` for each job of a sweep without evaluations: its status from summary.json
    (nan, failed, interrupted) or, without one, that it never finished."""
    out = []
    for job in job_dirs(sweep_dir):
        if has_evaluations(job):
            continue
        summary = job / "summary.json"
        status = json.loads(summary.read_text())["status"] if summary.is_file() else "unfinished"
        out.append(f"{job.name}: no evaluations ({status})")
    return out


def summarize(run_dir: str | Path) -> list[PointSummary]:
    """Write `sweep.csv`, `ranking.csv`, `sweep.png` and `profile.png` into `run_dir` (a run, or
    a `-m` sweep's directory whose jobs it gathers); returns each point's summary (one for a
    run without a grid), in grid (job) order."""
    run_dir = Path(run_dir)
    evals = run_dir / "evals.csv"
    if evals.is_file():
        entries = list(read_evals(evals).items())
    elif run_dir.is_dir() and job_dirs(run_dir):
        entries = list(enumerate(read_sweep(run_dir)))
    elif not run_dir.is_dir():
        raise FileNotFoundError(f"{run_dir}: no such directory (give a run's or a -m sweep's)")
    else:
        raise FileNotFoundError(
            f"{run_dir} holds neither evals.csv (a run) nor jobs with .hydra/overrides.yaml "
            f"(a -m sweep's directory)"
        )
    points = [summarize_point(point, values, curves) for point, (values, curves) in entries]
    write_csv(points, run_dir / "sweep.csv")
    write_ranking(points, run_dir / "ranking.csv")
    title = _title(run_dir, points)
    plot(points, run_dir / "sweep.png", title)
    plot_profiles(points, run_dir / "profile.png", title)
    return points


def _title(run_dir: Path, points: list[PointSummary]) -> str:
    seeds = len(points[0].curves.seeds)
    grid = f"{len(points)} points x " if points[0].grid_point is not None else ""
    summaries = [run_dir / "summary.json"] + [job / "summary.json" for job in job_dirs(run_dir)]
    for summary in summaries:
        if summary.is_file():
            data = json.loads(summary.read_text())
            return f"{data['agent']} on {data['env']} ({grid}{seeds} seeds)"
    return f"{run_dir.name} ({grid}{seeds} seeds)"


def main(argv: list[str] | None = None) -> None:
    """Exit status 2 for a directory without evaluations or a missing report package."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "run_dir", help="a run directory (holding evals.csv) or a -m sweep's directory"
    )
    args = parser.parse_args(argv)
    try:
        points = summarize(args.run_dir)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except ImportError as e:  # rliable or matplotlib
        print(f"error: sweep reports need {e.name}: {install_hint('sweep')}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    for skipped in skipped_jobs(Path(args.run_dir)):
        print(f"left out job {skipped}")
    for rank, p in enumerate(ranked(points), start=1):
        print(
            f"{rank}. {p.name}: final IQM {p.final:.1f} [{p.final_ci[0]:.1f}, "
            f"{p.final_ci[1]:.1f}], mean {p.final_mean:.1f}, best {p.best:.1f}, "
            f"area under curve {p.auc:.1f} ({len(p.curves.seeds)} seeds)"
        )
    out = Path(args.run_dir)
    files = ("sweep.csv", "ranking.csv", "sweep.png", "profile.png")
    print(f"-> {', '.join(str(out / name) for name in files)}")


if __name__ == "__main__":
    main()
