"""ERL against its own DDPG learner alone on a MuJoCo env (Gymnasium's HalfCheetah-v5 through the
host bridge): does the population help at the same env-step budget, on our code?

Khadka & Tumer (NeurIPS 2018, "Evolution-Guided Policy Gradient in Reinforcement Learning",
Fig. 3) compare ERL with DDPG on six MuJoCo envs over millions of frames; this CPU affords a
fraction of that, so the claim is checked at the budget it affords and the table says which.

Two rows, each N seeds in one vmapped program through the CLI, one fresh process per row:

* ERL with the paper's defaults (jaxrl/conf/agent/erl.yaml: population 10, one episode per
  member, DDPG 128-128 tanh with layer norm, Adam 5e-5 / 5e-4, tau 0.001, batch 128, one update
  per env step of all rollouts, sync every 10 generations);
* DDPG alone with the same learner settings (`DDPG_LIKE_ERL`): one env, one update per env step,
  the same exploration noise; its first `learning_starts` steps are random actions where ERL's
  first generation comes from the random population.

Returns are the runs' own evaluations (`evals.csv`: deterministic episodes; ERL's acts with its
champion, the fittest member of the last generation). Run directories are kept under `--runs`, and
a row whose directory already holds a finished run is read, not rerun, so the two rows may run
side by side in two processes (`--rows erl` and `--rows ddpg`) and the report be written after:

    python benchmarks/erl_mujoco.py [--seeds 3] [--budget 154000] [--runs DIR] [--rows erl ddpg]
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from common import (
    RESULTS,
    eval_curves,
    finished_cli_run,
    fmt,
    last_quarter_mean,
    machine,
    markdown_table,
    write_report,
)

from jaxrl.presets import DDPG_ERL_LEARNER

ENV = "gym/HalfCheetah-v5"
ROWS = {"erl": ["agent=erl"], "ddpg": ["agent=ddpg", *DDPG_ERL_LEARNER]}
LABELS = {"erl": "ERL (population 10 + DDPG)", "ddpg": "DDPG alone, ERL's learner settings"}
QUIET = ["log.tensorboard=false", "log.progress=false"]


@dataclass
class Result:
    row: str
    command: str
    steps: list[int]
    returns: np.ndarray  # [seeds, evaluations]
    compile_s: float
    run_s: float
    env_steps: int
    peak_rss_gb: float | None


def command(row: str, args: argparse.Namespace, run_dir: Path) -> list[str]:
    return [
        *ROWS[row],
        f"env={ENV}",
        f"num_seeds={args.seeds}",
        f"budget.env_steps={args.budget}",
        *QUIET,
        f"log.dir={run_dir}",
    ]


def read(row: str, cmd: list[str], run_dir: Path, summary: dict[str, Any]) -> Result:
    steps, curves = eval_curves(run_dir, ["eval_return"])
    return Result(
        row,
        "python -m jaxrl.run " + " ".join(cmd),
        steps,
        np.array(curves["eval_return"]),
        summary["compile_seconds"],
        summary["run_seconds"],
        summary["env_steps"],
        summary.get("peak_rss_gb"),
    )


def run_or_read(row: str, args: argparse.Namespace) -> Result:
    run_dir = args.runs / row
    cmd = command(row, args, run_dir)
    return read(row, cmd, run_dir, finished_cli_run(row, cmd, run_dir))


def report(results: list[Result], args: argparse.Namespace) -> str:
    header = [
        "what",
        "seeds",
        "env steps",
        "final return, mean (min)",
        "final return per seed",
        "mean of the last quarter's evaluations",
        "best evaluation, mean over seeds",
        "env steps/s",
        "compile s",
        "run s",
        "peak RSS GB",
    ]
    rows = []
    for r in results:
        final = r.returns[:, -1]
        seeds = len(final)
        rows.append(
            [
                LABELS[r.row],
                str(seeds),
                f"{r.env_steps:,}",
                f"**{final.mean():.1f}** ({final.min():.1f})",
                ", ".join(f"{v:.1f}" for v in final),
                f"{last_quarter_mean(r.steps, r.returns).mean():.1f}",
                f"{r.returns.max(axis=1).mean():.1f}",
                f"{seeds * r.env_steps / r.run_s:,.0f}",
                fmt(r.compile_s),
                fmt(r.run_s),
                fmt(r.peak_rss_gb, 2) if r.peak_rss_gb is not None else "—",
            ]
        )
    commands = "\n".join(f"* {LABELS[r.row]}: `{r.command}`" for r in results)
    return (
        f"# ERL against its DDPG learner alone on {ENV}\n\n"
        f"`python benchmarks/erl_mujoco.py --seeds {args.seeds} --budget {args.budget}` on "
        f"{machine()}\n\n"
        + markdown_table(header, rows)
        + "\n\nReturns are each run's deterministic evaluations (`eval.episodes` episodes per seed"
        " at about 20 points of the run; ERL's with its champion). Env steps/s counts every"
        " seed's env steps per second of run time, updates included (one per env step on both"
        " rows). The two rows ran side by side on the 2 cores, so compare their seconds"
        " loosely.\n\nCommands (run from the repository root):\n\n"
        + commands
        + "\n\n![evaluation return against env steps](erl_mujoco.png)\n"
    )


def plot(results: list[Result], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for r, color in zip(results, ("tab:red", "tab:blue"), strict=False):
        steps = np.asarray(r.steps)
        for seed_returns in r.returns:
            ax.plot(steps, seed_returns, color=color, alpha=0.25, linewidth=0.8)
        ax.plot(steps, r.returns.mean(axis=0), color=color, label=f"{LABELS[r.row]} (mean)")
    ax.set_xlabel("env steps")
    ax.set_ylabel("evaluation return")
    ax.set_title(f"{ENV}: ERL against DDPG alone ({len(results[0].returns)} seeds each)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--budget", type=int, default=154_000, help="env steps per seed")
    parser.add_argument("--runs", type=Path, default=Path("/tmp/erl_mujoco"))
    parser.add_argument("--rows", nargs="+", choices=list(ROWS), default=list(ROWS))
    parser.add_argument("--out", type=Path, default=RESULTS / "erl_mujoco.md")
    args = parser.parse_args()
    results = [run_or_read(row, args) for row in args.rows]
    if len(results) < len(ROWS):
        return  # one row of two: its run directory is kept for the report
    write_report(report(results, args), args.out)
    plot(results, args.out.with_suffix(".png"))


if __name__ == "__main__":
    main()
