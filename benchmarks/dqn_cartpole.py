"""DQN on CartPole-v1 with the default config, and optionally on pixel/CartPole-v1: env steps/s,
compile time and return.

Rows, each one `jaxrl.loop.train` in this process (no persistent compile cache):

* CartPole-v1, the defaults (4 envs, 256 env steps then 128 updates, lr 2e-3 annealed over the
  budget), 60k env steps, 1 seed, evaluated (10 deterministic episodes) every 3,072 steps;
* the same with N seeds in one program (`num_seeds=N`, vmapped), with how many end >= 475;
* with `--pixel-steps S`: pixel/CartPole-v1 (84×84×4 frames, Nature CNN, compact frame buffer)
  in the configuration of `PIXEL` below, 1 seed, S env steps, evaluated every 5,120 steps;
  the best evaluation is reported beside the final one (a random policy scores ~10).

Env steps/s is per second of run time and includes the updates (CartPole: one per 2 env steps;
pixel: one per 4), so it is a training throughput, not an env throughput.

    python benchmarks/dqn_cartpole.py [--seeds 4] [--pixel-steps 0] [--out PATH]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from common import RESULTS, fmt, load_note, machine, markdown_table, write_report

from jaxrl.cli import compose
from jaxrl.loop import train

DEFAULT_OUT = RESULTS / "dqn_cartpole.md"
QUIET = ["log.progress=false", "log.tensorboard=false", "checkpoint.every=1000"]
CARTPOLE = ["agent=dqn", "env=CartPole-v1", "budget.env_steps=60000", "eval.every=3"]
# The pixel CartPole configuration measured in the README (one update per 4 env steps).
PIXEL = [
    "agent=dqn",
    "env=pixel/CartPole-v1",
    "preset=none",  # the one-step settings below, not the `pixel-cartpole` preset
    "env.num_envs=4",
    "agent.learning_rate=2.5e-4",
    "agent.anneal_lr=false",
    "agent.loss=mse",
    "agent.batch_size=32",
    "agent.buffer_size=50000",
    "agent.frame_storage=compact",
    "agent.learning_starts=5000",
    "agent.train_freq=1",
    "agent.gradient_steps=1",
    "agent.iteration_steps=1024",
    "agent.target_update_period=1000",
    "agent.exploration_steps=20000",
    "agent.eps_end=0.02",
    "eval.every=5",
]


@dataclass
class Row:
    what: str
    seeds: int
    env_steps: int  # per seed
    compile_s: float
    run_s: float
    final_return: float  # mean over seeds
    best_return: float  # mean over seeds of each seed's best evaluation
    solved: str  # seeds whose final return is >= 475


def run(what: str, overrides: list[str], workdir: Path) -> Row:
    cfg = compose([*overrides, *QUIET])
    s = train(cfg, workdir / str(len(list(workdir.iterdir())))).summary
    finals = [seed["final_eval_return"] for seed in s["runs"]]
    return Row(
        what,
        len(finals),
        s["env_steps"],
        s["compile_seconds"],
        s["run_seconds"],
        s["final_eval_return"],
        s["best_eval_return"],
        f"{sum(f >= 475 for f in finals)}/{len(finals)}",
    )


def markdown(rows: list[Row], where: str) -> str:
    header = [
        "what",
        "env steps/s",
        "compile s",
        "run s",
        "final return",
        "best return",
        "seeds ≥ 475",
        "machine",
    ]
    cells = [
        [
            r.what,
            fmt(r.env_steps * r.seeds / r.run_s, 0),
            f"{r.compile_s:.1f}",
            f"{r.run_s:.1f}",
            f"{r.final_return:.1f}",
            f"{r.best_return:.1f}",
            r.solved,
            where,
        ]
        for r in rows
    ]
    return markdown_table(header, cells)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=4, help="seeds of the vmapped row")
    parser.add_argument("--pixel-steps", type=int, default=0, help="0: no pixel CartPole row")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()

    load_before = os.getloadavg()[0]
    rows: list[Row] = []

    def add(row: Row) -> None:
        rows.append(row)
        print(markdown([row], ""), flush=True)

    with tempfile.TemporaryDirectory(prefix="jaxrl-bench-dqn-") as tmp:
        work = Path(tmp)
        add(run("DQN CartPole-v1, defaults, 60k steps, 1 seed", CARTPOLE, work))
        add(
            run(
                f"DQN CartPole-v1, defaults, 60k steps, {args.seeds} seeds in one program",
                [*CARTPOLE, f"num_seeds={args.seeds}"],
                work,
            )
        )
        if args.pixel_steps > 0:
            what = f"DQN pixel/CartPole-v1, {args.pixel_steps:,} steps, 1 seed"
            add(run(what, [*PIXEL, f"budget.env_steps={args.pixel_steps}"], work))
    load_after = os.getloadavg()[0]

    text = "\n\n".join(
        [
            "# DQN on CartPole-v1 (and pixel/CartPole-v1)",
            f"`python benchmarks/dqn_cartpole.py --seeds {args.seeds} "
            f"--pixel-steps {args.pixel_steps}`",
            markdown(rows, machine()),
            "Returns are means over seeds of 10 deterministic episodes; env steps/s counts all "
            "seeds' steps per second of run time, updates included. "
            + load_note(load_before, load_after),
        ]
    )
    write_report(text + "\n", args.out)


if __name__ == "__main__":
    main()
