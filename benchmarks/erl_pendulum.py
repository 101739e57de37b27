"""ERL on Pendulum-v1 (and a short brax/halfcheetah run): env steps/s and return at the budget.

Rows, each one `jaxrl.loop.train` in this process (no persistent compile cache), 1 seed:

* Pendulum-v1, the learning test's configuration (tests/agents/test_erl.py): 10 members x 3
  episodes + 1 learner episode per generation, DDPG 64-64 with Adam 1e-3, tau 0.005, half an
  update per env step, sync every generation;
* Pendulum-v1 with the paper's defaults (jaxrl/conf/agent/erl.yaml: 1 episode per member, DDPG
  128-128 tanh with layer norm, Adam 5e-5 / 5e-4, tau 0.001, one update per env step, sync every
  10 generations);
* brax/halfcheetah (Brax's `generalized` backend unless --brax-backend), the paper's defaults on a
  small budget: a generation is 11 episodes of 1000 steps, so --brax-budget 55000 is 5
  generations. Skipped with --brax-budget 0 or when Brax is not installed.

Env steps/s counts env steps inside episodes per second of run time; ERL's run time is mostly its
learner's updates (updates_per_step x env steps), so the column is a training throughput, not an
env throughput.

    python benchmarks/erl_pendulum.py [--budget 62000] [--brax-budget 55000] [--out PATH]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from common import RESULTS, fmt, load_note, machine, markdown_table, write_report

from jaxrl.cli import compose
from jaxrl.loop import train
from jaxrl.presets import ERL_PENDULUM

DEFAULT_OUT = RESULTS / "erl_pendulum.md"
QUIET = ["log.progress=false", "log.tensorboard=false", "checkpoint.every=1000"]
TEST_CONFIG = list(ERL_PENDULUM)  # the pendulum preset


@dataclass
class Row:
    what: str
    env_steps: int
    compile_s: float
    run_s: float
    final_return: float
    best_return: float


def run(what: str, overrides: list[str], workdir: Path) -> Row:
    cfg = compose(["agent=erl", *overrides, *QUIET])
    s = train(cfg, workdir / str(len(list(workdir.iterdir())))).summary
    return Row(
        what,
        s["env_steps"],
        s["compile_seconds"],
        s["run_seconds"],
        s["final_eval_return"],
        s["best_eval_return"],
    )


def markdown(rows: list[Row], where: str) -> str:
    header = [
        "what",
        "env steps",
        "env steps/s",
        "compile s",
        "run s",
        "final return",
        "best return",
        "machine",
    ]
    cells = [
        [
            r.what,
            fmt(r.env_steps, 0),
            fmt(r.env_steps / r.run_s, 0),
            f"{r.compile_s:.1f}",
            f"{r.run_s:.1f}",
            f"{r.final_return:.1f}",
            f"{r.best_return:.1f}",
            where,
        ]
        for r in rows
    ]
    return markdown_table(header, cells)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", type=float, default=62000, help="Pendulum env steps")
    parser.add_argument("--brax-budget", type=float, default=55000, help="0: no Brax row")
    parser.add_argument("--brax-backend", default="generalized")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()

    pendulum = ["env=Pendulum-v1", f"budget.env_steps={args.budget:g}", "eval.every=2"]
    load_before = os.getloadavg()[0]
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="jaxrl-bench-erl-") as tmp:
        work = Path(tmp)
        rows.append(run("ERL Pendulum-v1, test config", [*pendulum, *TEST_CONFIG], work))
        print(markdown(rows[-1:], ""), flush=True)
        rows.append(run("ERL Pendulum-v1, paper defaults", [*pendulum, "preset=none"], work))
        print(markdown(rows[-1:], ""), flush=True)
        if args.brax_budget > 0 and importlib.util.find_spec("brax") is not None:
            brax = [
                "env=brax/halfcheetah",
                f"env.backend={args.brax_backend}",
                f"budget.env_steps={args.brax_budget:g}",
                "eval.every=1",
                "eval.episodes=4",
            ]
            what = f"ERL brax/halfcheetah ({args.brax_backend}), paper defaults"
            rows.append(run(what, brax, work))
            print(markdown(rows[-1:], ""), flush=True)
    load_after = os.getloadavg()[0]

    text = "\n\n".join(
        [
            "# ERL on Pendulum-v1 and brax/halfcheetah",
            f"`python benchmarks/erl_pendulum.py --budget {args.budget:g} "
            f"--brax-budget {args.brax_budget:g} --brax-backend {args.brax_backend}`",
            markdown(rows, machine()),
            "Returns are the champion's (the fittest member's) deterministic evaluation "
            "(Pendulum: 10 episodes every 2 generations; halfcheetah: 4 every generation). "
            "Env steps/s is per second of run time and includes the learner's updates. "
            + load_note(load_before, load_after),
        ]
    )
    write_report(text + "\n", args.out)


if __name__ == "__main__":
    main()
