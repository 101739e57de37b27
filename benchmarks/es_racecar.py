"""ES on our PyBullet race car (`bullet/RaceCar-v0`) until it drives a full lap of the oval: the
original work's longest experiment (64 members × 5 episodes of up to 2,000 steps each, 1,400
generations in ~4 hours, ending "close to the end of a track with
several turns"; ../shared/reference/original-experiments.md), here timed to the lap.

Each seed is one CLI process (its own compile, its own clock), stopped by `budget.target_return`
at its first evaluation whose mean return reaches the track's length: the return is the distance
driven along the centreline (m), so 45.1 is one lap. Settings (`SETTINGS`): 16 members (8
antithetic pairs), one episode each of at most 600 steps (30 s at 20 Hz: a lap needs 1.5 m/s on
average, half the top speed), σ 0.05 and Adam 0.03 (wider than the agent's CartPole 0.02 /
0.02; picked once for this run, not tuned), 5 evaluation episodes of the mean policy; the rest
are the agent's defaults (64-64 tanh, observation normalisation, centred ranks).

Where the time goes: the race car's host step is timed alone (one env, random actions, resets
included) and multiplied by the steps a run computed: a generation's batched loop steps every
member's env until its longest episode ends, so a run computes more steps than its episodes
count.

    python benchmarks/es_racecar.py [--seeds 0 1 2] [--runs DIR] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from common import (
    RESULTS,
    eval_curves,
    finished_cli_run,
    fmt,
    machine,
    markdown_table,
    write_report,
)

from envs.bullet.racecar import OvalTrack  # importing envs.bullet registers bullet/*

ENV = "bullet/RaceCar-v0"
LAP_M = math.ceil(OvalTrack().length * 100) / 100  # the centreline, 20 + 8π m, rounded up
SETTINGS = (
    "agent.population_size=16",
    "agent.episodes_per_member=1",
    "env.max_episode_steps=600",
    "agent.sigma=0.05",
    "agent.learning_rate=0.03",
    "eval.episodes=5",
)
BUDGET = 1_000_000  # env steps per seed: a ceiling, the lap stops the run long before
QUIET = ["log.tensorboard=false", "log.progress=false"]
# The original: 1,400 generations in about 4 hours, not a full lap.
ORIGINAL_S = 4 * 3600


@dataclass
class Result:
    seed: int
    command: str
    steps: np.ndarray  # [evaluations]: env steps counted at each
    returns: np.ndarray  # [evaluations]
    elapsed_s: np.ndarray  # [evaluations]: run seconds at each
    generations: int
    compile_s: float
    run_s: float
    env_steps: int
    env_steps_computed: int
    peak_rss_gb: float
    load: dict[str, float | None]  # the 1-minute load average before and after the run


def command(seed: int, run_dir: Path) -> list[str]:
    return [
        "agent=es",
        f"env={ENV}",
        *SETTINGS,
        f"seed={seed}",
        f"budget.env_steps={BUDGET}",
        f"budget.target_return={LAP_M}",
        *QUIET,
        f"log.dir={run_dir}",
    ]


def run_or_read(seed: int, runs: Path) -> Result:
    run_dir = runs / f"seed{seed}"
    cmd = command(seed, run_dir)
    load_file = run_dir / "load.json"
    fresh, before = not (run_dir / "summary.json").exists(), os.getloadavg()[0]
    summary = finished_cli_run(f"seed {seed}", cmd, run_dir)
    if fresh:
        load_file.write_text(json.dumps({"before": before, "after": os.getloadavg()[0]}))
    load = json.loads(load_file.read_text()) if load_file.exists() else {}
    steps, curves = eval_curves(run_dir, ["eval_return", "elapsed_seconds"])
    return Result(
        seed,
        "python -m jaxrl.run " + " ".join(cmd),
        np.asarray(steps),
        np.asarray(curves["eval_return"][0]),
        np.asarray(curves["elapsed_seconds"][0]),
        summary["iterations"],
        summary["compile_seconds"],
        summary["run_seconds"],
        summary["env_steps"],
        summary["env_steps_computed"],
        summary["peak_rss_gb"],
        {"before": load.get("before"), "after": load.get("after")},
    )


def host_step_seconds(steps: int = 3000) -> float:
    """Seconds per step of one race car on the host, random actions, resets included."""
    import gymnasium

    env = gymnasium.make(ENV)
    env.reset(seed=0)
    env.action_space.seed(0)
    start = time.perf_counter()
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    elapsed = time.perf_counter() - start
    env.close()
    return elapsed / steps


def report(results: list[Result], step_s: float) -> str:
    header = [
        "seed",
        "lap at generation",
        "env steps to the lap",
        "run s to the lap",
        "compile s",
        "lap return (m, 5 episodes)",
        "env steps/s",
        "steps computed",
        "host stepping share of run s",
        "peak RSS GB",
        "1-minute load before / after",
    ]
    rows = [
        [
            str(r.seed),
            str(r.generations) if r.returns[-1] >= LAP_M else "no lap",
            f"{r.env_steps:,}",
            fmt(r.run_s),
            fmt(r.compile_s),
            fmt(r.returns[-1]),
            f"{r.env_steps / r.run_s:,.0f}",
            f"{r.env_steps_computed:,}",
            f"{r.env_steps_computed * step_s / r.run_s:.0%}",
            fmt(r.peak_rss_gb, 2),
            f"{fmt(r.load['before'])} / {fmt(r.load['after'])}",
        ]
        for r in results
    ]
    to_lap = np.array([r.compile_s + r.run_s for r in results])
    return (
        f"# ES on {ENV}: time to a full lap\n\n"
        f"`python benchmarks/es_racecar.py --seeds {' '.join(str(r.seed) for r in results)}` on "
        f"{machine()}\n\n"
        + markdown_table(header, rows)
        + f"\n\nCompile + run to the lap: median {np.median(to_lap):,.0f} s (max "
        f"{to_lap.max():,.0f} s) against the original's ~{ORIGINAL_S / 3600:.0f} hours (1,400 "
        f"generations of 64 members × 5 episodes of up to 2,000 steps, no full lap): "
        f"{ORIGINAL_S / np.median(to_lap):,.0f}× less time. A lap is {LAP_M} m of centreline; "
        "the lap return is the mean of the stopping evaluation's 5 episodes of the mean policy.\n\n"
        f"Host step: {step_s * 1e6:,.0f} µs (one env, random actions, resets included: 12 "
        "physics substeps of 1/240 s and the observation). A generation's batched loop steps "
        "every member's env until its longest episode ends; 'steps computed' counts those steps, "
        "and times the host step they give the share of the run's seconds spent in PyBullet for "
        "the training rollouts. Each generation's evaluation (5 episodes of up to 600 steps) adds "
        "up to 3,000 host steps more, not counted there. Run seconds on a shared CPU (a load "
        "well above 0) include time other processes took.\n\n"
        "Commands (run from the repository root):\n\n"
        + "\n".join(f"* seed {r.seed}: `{r.command}`" for r in results)
        + "\n\n![evaluation return against run seconds](es_racecar.png)\n"
    )


def plot(results: list[Result], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for r in results:
        ax.plot(r.elapsed_s, r.returns, "o-", markersize=3, label=f"seed {r.seed}")
    ax.axhline(LAP_M, color="gray", linestyle="--", label=f"one lap ({LAP_M} m)")
    ax.set_xlabel("run seconds")
    ax.set_ylabel("evaluation return (m along the track)")
    ax.set_title(f"ES on {ENV}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--runs", type=Path, default=Path("/tmp/es_racecar"))
    parser.add_argument("--out", type=Path, default=RESULTS / "es_racecar.md")
    args = parser.parse_args()
    results = [run_or_read(seed, args.runs) for seed in args.seeds]
    write_report(report(results, host_step_seconds()), args.out)
    plot(results, args.out.with_suffix(".png"))


if __name__ == "__main__":
    main()
