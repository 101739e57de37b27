"""BC, DAgger and AggreVaTeD on BipedalWalker-v3 (Box2D through the host bridge) from the SAC
expert shipped in benchmarks/experts/bipedalwalker_sac: evaluation return against the number of
expert-labelled steps (issue: imitation learning, the original experiment's failure redone).

DAgger and AggreVaTeD label (or score) every state they visit, so each of their evaluations is a
point of the curve: one run each, evaluated `--evals` times. BC is one run per number of expert
episodes, placed at the states those episodes hold. Writes
benchmarks/results/imitation_bipedalwalker.md and .png.

    python benchmarks/imitation_bipedalwalker.py [--seeds 2] [--bc-episodes 2 5 10]

The original target, BipedalWalkerHardcore-v3, from its own expert (benchmarks/experts/README.md),
AggreVaTeD only: writes benchmarks/results/imitation_bipedalwalker_hardcore.md and .png.

    python benchmarks/imitation_bipedalwalker.py --hardcore --methods AggreVaTeD
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import (
    REPO,
    RESULTS,
    finish_imitation_plot,
    fmt,
    machine,
    markdown_table,
    write_report,
)

import jaxrl

# --hardcore picks the second: (env, shipped expert, results file stem).
TASKS = {
    False: ("gym/BipedalWalker-v3", "bipedalwalker_sac", "imitation_bipedalwalker"),
    True: (
        "gym/BipedalWalkerHardcore-v3",
        "bipedalwalkerhardcore_sac",
        "imitation_bipedalwalker_hardcore",
    ),
}
COMMON = ("eval.episodes=5", "log.progress=false", "log.tensorboard=false")
# (overrides, env steps): every visited state is labelled, so env steps are labelled steps.
# BC and DAgger fit the expert's actions by squared error: the SAC expert's actions are often at
# the bounds (±1), where the tanh-Gaussian likelihood (`nll`) needs an unbounded mean and
# underfits; a DAgger learner trained by `nll` walks but stumbles in some evaluations.
SUPERVISED_LOSS = "agent.loss=mse"
CURVES = {
    "DAgger": (("agent=dagger", SUPERVISED_LOSS), 16_000),
    # More Adam steps per iteration than the default 50: the aggregated states grow by 400 per
    # iteration and each iteration fits all of them (follow-the-leader).
    "AggreVaTeD": (("agent=aggrevated", "agent.gradient_steps=150"), 64_000),
}
BC_BUDGET = 16_000  # BC's training iterations, the same as DAgger's


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--evals", type=int, default=8, help="evaluations of each curve run")
    parser.add_argument("--bc-episodes", type=int, nargs="*", default=[2, 5, 10])
    parser.add_argument("--hardcore", action="store_true", help="BipedalWalkerHardcore-v3")
    parser.add_argument(
        "--methods",
        nargs="+",
        choices=list(CURVES),
        default=list(CURVES),
        help="the curve runs (BC's runs are --bc-episodes; none with --bc-episodes alone)",
    )
    parser.add_argument("--curve-steps", type=int, help="env steps of each curve run")
    parser.add_argument("--out", help="results file stem (default: the task's)")
    args = parser.parse_args()

    env_id, expert_name, stem = TASKS[args.hardcore]
    stem = args.out or stem
    expert_dir = REPO / "benchmarks" / "experts" / expert_name
    workdir = Path(tempfile.mkdtemp(prefix=f"{stem}_"))
    summary = json.loads((expert_dir / "summary.json").read_text())
    expert_return = summary["runs"][0]["final_eval_return"]
    base = (f"env.id={env_id}", f"agent.expert={expert_dir}", f"num_seeds={args.seeds}", *COMMON)

    curves: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # steps [E], returns [E, seeds]
    seconds: dict[str, float] = {}
    for name in args.methods:
        overrides, budget = CURVES[name]
        t0 = time.perf_counter()
        result = jaxrl.train(
            *overrides,
            *base,
            f"budget.env_steps={args.curve_steps or budget}",
            f"eval.per_run={args.evals}",
            run_dir=workdir / name,
        )
        seconds[name] = time.perf_counter() - t0
        curves[name] = eval_curve(result.run_dir / "evals.csv", args.seeds)
        print(f"{name}: {curves[name][1].tolist()} ({seconds[name]:.0f} s)", flush=True)

    bc_points: list[tuple[np.ndarray, np.ndarray, int]] = []  # labelled, returns per seed
    for episodes in args.bc_episodes:
        t0 = time.perf_counter()
        result = jaxrl.train(
            "agent=bc",
            SUPERVISED_LOSS,
            f"agent.expert_episodes={episodes}",
            *base,
            f"budget.env_steps={BC_BUDGET}",
            "eval.per_run=1",
            run_dir=workdir / f"bc_{episodes}",
        )
        seconds["BC"] = seconds.get("BC", 0.0) + time.perf_counter() - t0
        labelled = np.asarray(result.carry.agent_state.labelled_steps)
        returns = np.array([r["final_eval_return"] for r in result.summary["runs"]])
        bc_points.append((labelled, returns, episodes))
        print(f"BC {episodes} episodes: {labelled.tolist()} labels, {returns.tolist()}", flush=True)

    plot = RESULTS / f"{stem}.png"
    draw(curves, bc_points, expert_return, args.seeds, env_id.removeprefix("gym/"), plot)
    rows = [
        [name, f"{int(steps):,}", ", ".join(fmt(r) for r in returns)]
        for name, (all_steps, all_returns) in curves.items()
        for steps, returns in zip(all_steps, all_returns, strict=True)
    ]
    rows += [
        [f"BC, {episodes} expert episodes", f"{int(labelled.mean()):,}", ", ".join(map(fmt, r))]
        for labelled, r, episodes in bc_points
    ]
    ninety = f"; 90% of it: {0.9 * expert_return:.1f}" if expert_return > 0 else ""
    text = "\n\n".join(
        [
            f"# Imitation on {env_id.removeprefix('gym/')} from a jaxrl SAC expert",
            f"Machine: {machine(load=True)} at the end. Command: `python "
            f"benchmarks/imitation_bipedalwalker.py {' '.join(sys.argv[1:])}`.",
            f"Expert: `benchmarks/experts/{expert_name}/` (SAC, final evaluation "
            f"{expert_return:.1f}{ninety}). Learners: 256-256, "
            f"8 host envs per seed, {args.seeds} seeds in one program, defaults but for "
            f"`agent.loss=mse` (BC, DAgger) and AggreVaTeD's `agent.gradient_steps=150`; "
            f"evaluations of 5 deterministic episodes. "
            f"DAgger and AggreVaTeD label or score every visited state (labelled steps = env "
            f"steps); BC's are the states of its expert episodes, trained for {BC_BUDGET:,} "
            f"env steps of iterations.",
            markdown_table(["method", "expert-labelled steps", "evaluation per seed"], rows),
            "Seconds (compile included): "
            + ", ".join(f"{name} {s:.0f}" for name, s in seconds.items())
            + ".",
            f"![return against labelled steps]({plot.name})",
        ]
    )
    write_report(text + "\n", RESULTS / f"{stem}.md")


def eval_curve(path: Path, seeds: int) -> tuple[np.ndarray, np.ndarray]:
    """(env steps [E], returns [E, seeds]) of a run's evaluations."""
    rows = list(csv.DictReader(path.open()))
    steps = sorted({int(r["env_steps"]) for r in rows})
    returns = np.full((len(steps), seeds), np.nan)
    for r in rows:
        returns[steps.index(int(r["env_steps"])), int(r["seed"])] = float(r["eval_return"])
    return np.array(steps), returns


def draw(curves, bc_points, expert_return: float, seeds: int, env: str, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for name, (steps, returns) in curves.items():
        ax.plot(steps, returns.mean(axis=1), marker="o", label=name)
        ax.fill_between(steps, returns.min(axis=1), returns.max(axis=1), alpha=0.15)
    if bc_points:
        draw_bc(ax, bc_points)
    title = f"{env}: {seeds} seeds (mean, min–max)"
    finish_imitation_plot(fig, ax, expert_return, title, "evaluation return", out)


def draw_bc(ax, bc_points) -> None:
    labelled = [p[0].mean() for p in bc_points]
    ax.errorbar(
        labelled,
        [p[1].mean() for p in bc_points],
        yerr=np.array([[p[1].mean() - p[1].min(), p[1].max() - p[1].mean()] for p in bc_points]).T,
        marker="s",
        linestyle="--",
        capsize=3,
        label="BC (expert episodes)",
    )


if __name__ == "__main__":
    main()
