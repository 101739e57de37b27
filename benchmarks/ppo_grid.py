"""A PPO learning-rate grid on CartPole-v1: 4 learning rates x 4 seeds in one compiled program
(`grid.agent.learning_rate=[...] num_seeds=4`) against the same 16 runs as a Hydra multirun
(`-m agent.learning_rate=... seed=...`: one job, and one Trainer, per run).

PureJaxRL's CartPole setting (4 envs x 128 steps, 4 minibatches x 4 epochs, lr annealed), 499,712
env steps per run, evaluated every 122 updates. Both commands run as fresh processes, each with an
empty persistent compile cache of its own (the multirun's later jobs then hit the entries of the
first job with the same learning rate: seeds are data, learning rates are constants there).

Then, in this process, the same (learning rate, seed) trained as a grid run and alone: parameters
after the first iterations compared (max |difference|), and the eval curves of the two commands
above compared point by point.

    python benchmarks/ppo_grid.py [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
from common import RESULTS, fmt, machine, markdown_table, repo_env, run_process, write_report

from jaxrl.sweep import read_evals

DEFAULT_OUT = RESULTS / "ppo_grid.md"
LEARNING_RATES = [1e-4, 2.5e-4, 5e-4, 1e-3]
SEEDS = 4
UPDATES = 976
STEPS_PER_UPDATE = 4 * 128
OVERRIDES = [
    "agent=ppo",
    "env=CartPole-v1",
    "env.num_envs=4",
    f"budget.env_steps={UPDATES * STEPS_PER_UPDATE}",
    "eval.every=122",
    "log.progress=false",
    "log.tensorboard=false",
]
EQUALITY_ITERATIONS = 8  # the first iterations compared parameter by parameter


def grid_list() -> str:
    return "[" + ",".join(f"{lr:g}" for lr in LEARNING_RATES) + "]"


def run_grid(workdir: Path) -> tuple[float, dict]:
    run_dir = workdir / "grid"
    cmd = [
        sys.executable,
        "-m",
        "jaxrl.run",
        *OVERRIDES,
        f"grid.agent.learning_rate={grid_list()}",
        f"num_seeds={SEEDS}",
        f"log.dir={run_dir}",
    ]
    env = repo_env(JAXRL_CACHE_DIR=str(workdir / "cache_grid"))
    _, wall = run_process("grid", cmd, env=env, cwd=workdir)
    return wall, json.loads((run_dir / "summary.json").read_text())


def run_multirun(workdir: Path) -> tuple[float, list[dict]]:
    sweep_dir = workdir / "multirun"
    cmd = [
        sys.executable,
        "-m",
        "jaxrl.run",
        "-m",
        *OVERRIDES,
        "agent.learning_rate=" + ",".join(f"{lr:g}" for lr in LEARNING_RATES),
        "seed=" + ",".join(str(s) for s in range(SEEDS)),
        f"hydra.sweep.dir={sweep_dir}",
    ]
    env = repo_env(JAXRL_CACHE_DIR=str(workdir / "cache_multirun"))
    _, wall = run_process("multirun", cmd, env=env, cwd=workdir)
    summaries = []
    for job in sorted(sweep_dir.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1):
        if (job / "summary.json").exists():
            cfg = json.loads((job / "config.json").read_text())
            summary = json.loads((job / "summary.json").read_text())
            summary["learning_rate"] = cfg["agent"]["learning_rate"]
            summary["seed"] = cfg["seed"]
            summary["evals"] = eval_curves(job / "evals.csv")[(None, cfg["seed"])]
            summaries.append(summary)
    return wall, summaries


def eval_curves(path: Path) -> dict[tuple[int | None, int], np.ndarray]:
    """(grid point, seed) -> [evaluations, 2]: env steps and eval return, as jaxrl.sweep reads
    them."""
    return {
        (point, seed): np.stack(curve, axis=1)
        for point, (_, seeds) in read_evals(path).items()
        for seed, curve in seeds.items()
    }


def parameter_differences(workdir: Path) -> list[float]:
    """Max |parameter difference| after EQUALITY_ITERATIONS iterations, per (lr, seed): the grid
    run against the single run with the same values."""
    import jax

    import jaxrl

    budget = f"budget.env_steps={EQUALITY_ITERATIONS * STEPS_PER_UPDATE}"
    common = [*OVERRIDES[:3], budget, "eval.every=4", "log.progress=false"]
    grid = jaxrl.train(
        *common,
        f"grid.agent.learning_rate={grid_list()}",
        f"num_seeds={SEEDS}",
        "log.tensorboard=false",
        run_dir=workdir / "eq_grid",
    )
    flat = lambda state: np.concatenate(
        [np.ravel(x) for x in jax.tree.leaves(jax.device_get(state.params))]
    )
    differences = []
    for index, run in enumerate(grid.trainer.runs):
        lr = grid.trainer.points[run.grid_point]["learning_rate"]
        single = jaxrl.train(
            *common,
            f"agent.learning_rate={lr:g}",
            f"seed={run.seed}",
            "log.tensorboard=false",
            run_dir=workdir / f"eq_single_{index}",
        )
        grid_state = jax.tree.map(lambda x, i=index: x[i], grid.carry.agent_state)
        single_state = jax.tree.map(lambda x: x[0], single.carry.agent_state)
        differences.append(float(np.max(np.abs(flat(grid_state) - flat(single_state)))))
    return differences


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    where = machine()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        grid_wall, grid = run_grid(workdir)
        multi_wall, jobs = run_multirun(workdir)
        differences = parameter_differences(workdir)
        grid_curves = {
            (grid["grid"][point]["learning_rate"], seed): curve
            for (point, seed), curve in eval_curves(workdir / "grid" / "evals.csv").items()
        }
    total_steps = sum(r["env_steps"] for r in grid["runs"])
    multi_steps = sum(j["env_steps"] for j in jobs)
    multi_compile = sum(j["compile_seconds"] for j in jobs)
    multi_run = sum(j["run_seconds"] for j in jobs)
    rows = [
        [
            f"grid: {len(LEARNING_RATES)} lr x {SEEDS} seeds, one program",
            fmt(total_steps, 0),
            f"{grid_wall:.1f}",
            fmt(grid["compile_seconds"]),
            fmt(grid["run_seconds"]),
            fmt(total_steps / grid["run_seconds"], 0),
            fmt(total_steps / grid_wall, 0),
            where,
        ],
        [
            f"Hydra multirun: {len(jobs)} jobs",
            fmt(multi_steps, 0),
            f"{multi_wall:.1f}",
            fmt(multi_compile),
            fmt(multi_run),
            fmt(multi_steps / multi_run, 0),
            fmt(multi_steps / multi_wall, 0),
            where,
        ],
    ]
    table = markdown_table(
        [
            "what",
            "env steps",
            "process wall s",
            "compile s (sum)",
            "run s (sum)",
            "env steps/s (run)",
            "env steps/s (wall)",
            "machine",
        ],
        rows,
    )
    per_lr = []
    for point in grid["grid"]:
        lr = point["learning_rate"]
        multi_finals = [j["final_eval_return"] for j in jobs if j["learning_rate"] == lr]
        grid_finals = [
            r["final_eval_return"] for r in grid["runs"] if r["grid_point"] == point["grid_point"]
        ]
        same_curves = sum(
            np.array_equal(grid_curves[(lr, j["seed"])], j["evals"])
            for j in jobs
            if j["learning_rate"] == lr
        )
        per_lr.append(
            [
                f"{lr:g}",
                " / ".join(f"{f:.1f}" for f in grid_finals),
                " / ".join(f"{f:.1f}" for f in multi_finals),
                f"{same_curves}/{len(multi_finals)}",
            ]
        )
    finals = markdown_table(
        [
            "learning rate",
            "grid: final return per seed",
            "multirun: final return per seed",
            "eval curves identical",
        ],
        per_lr,
    )
    text = "\n\n".join(
        [
            "# PPO CartPole-v1: a learning-rate grid in one program vs Hydra multirun",
            f"Generated by `python benchmarks/ppo_grid.py` on {where}.",
            table,
            finals,
            f"Parameters after {EQUALITY_ITERATIONS} iterations, grid run vs the same "
            f"(learning rate, seed) alone, max |difference| over the {len(differences)} runs: "
            f"{max(differences):.2e} (each: {', '.join(f'{d:.1e}' for d in differences)}).",
        ]
    )
    write_report(text + "\n", args.out)


if __name__ == "__main__":
    main()
