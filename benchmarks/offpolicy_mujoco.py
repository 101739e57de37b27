"""SAC and TD3 on Gymnasium's MuJoCo HalfCheetah-v5 and Hopper-v5 (through the host bridge) at
300k env steps, beside published curves at the same step counts.

Each row is one CLI run per seed with the agent's defaults (SAC: 256-256, Adam 3e-4, batch 256,
automatic entropy, 5k random steps; TD3: Fujimoto et al.'s settings, 10k random steps), one
update per env step, in a fresh process; one more TD3 row on each env runs the paper's own
settings, those its published curves come from (Hopper's, added later, reports on its own:
`--rows td3_paper-hopper --out <file>`). Returns are the run's own evaluations (`evals.csv`,
deterministic episodes).

References, read from the published data at the same env steps:

* TD3 paper (Fujimoto et al. 2018): the learning curves in github.com/sfujim/TD3 (commit
  34770cc, `learning_curves/<Env>/TD3_<Env>-v1_<seed>.npy`: 10 seeds, 10 deterministic episodes
  every 5,000 steps on the v1 envs); the mean over seeds at each mark.
* RL Baselines3 Zoo: the SAC and TD3 agents in github.com/DLR-RM/rl-trained-agents (commit
  cd35bde, `<algo>/<Env>-v3_1/0.monitor.csv`: one seed each, v3 envs, 10k random steps); their
  training episodes' mean return over the 20k env steps before each mark (exploring, so a
  little below a deterministic evaluation). The SAC agents ran SB3's SAC defaults, which are
  ours. The TD3 agents did not: their configs (`<Env>-v3/config.yml`) leave the network at SB3
  1.x's 400-300, and HalfCheetah's sets nothing else, so SB3 1.x's Adam 1e-3, batch 100 and
  gradient steps taken at each episode's end applied (Hopper's sets Adam 3e-4, batch 256, one
  step per env step).

Run directories are kept under `--runs` (`<row>/seed<k>`); a finished one is read, not
rerun, so rows and seeds may run side by side in separate processes (`--rows sac-halfcheetah
--seeds 1`), and the report be written after from all of them. A seed is its own process, not
one of several in a program: the host bridge steps every seed's env on one core either way, and
a seed added later joins the row without rerunning the others:

    python benchmarks/offpolicy_mujoco.py [--budget 300000] [--runs DIR] [--rows ...] [--seeds ...]
"""

from __future__ import annotations

import argparse
import sys
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

# The TD3 paper's own settings, which its published curves come from (github.com/sfujim/TD3's
# README); the agent's defaults are the repository's later ones.
from jaxrl.presets import TD3_PAPER

ENVS = {"halfcheetah": "gym/HalfCheetah-v5", "hopper": "gym/Hopper-v5"}


@dataclass(frozen=True)
class Row:
    agent: str
    env: str  # a key of ENVS
    settings: tuple[str, ...] = ()  # overrides of the agent's defaults
    label: str = ""  # how the table names the row; the agent's name when empty
    seeds: tuple[int, ...] = (0,)  # those the report shows

    @property
    def name(self) -> str:
        return self.label or self.agent.upper()


ROWS = {
    "sac-halfcheetah": Row("sac", "halfcheetah", seeds=(0, 1, 2)),
    "td3-halfcheetah": Row("td3", "halfcheetah", seeds=(0, 1, 2)),
    "td3_paper-halfcheetah": Row(
        "td3",
        "halfcheetah",
        TD3_PAPER,
        "TD3, the paper's settings (400-300, 1e-3, 100)",
        (0, 1, 2),
    ),
    "sac-hopper": Row("sac", "hopper", seeds=(0, 1, 2)),
    "td3-hopper": Row("td3", "hopper", seeds=(0, 1, 2, 3)),
    # Whether the paper's settings close the defaults' gap on Hopper as they did on HalfCheetah.
    "td3_paper-hopper": Row(
        "td3", "hopper", TD3_PAPER, "TD3, the paper's settings (400-300, 1e-3, 100)", (0, 1, 2, 3)
    ),
}
QUIET = ["log.tensorboard=false", "log.progress=false"]
DEFAULT_OUT = RESULTS / "offpolicy_mujoco.md"
MARKS = (50_000, 100_000, 150_000, 200_000, 250_000, 300_000)
# The published curves at MARKS (see the module docstring for where each comes from).
TD3_PAPER_CURVES = {
    "halfcheetah": (3352, 5514, 6239, 6833, 7017, 7697),
    "hopper": (285, 659, 1211, 2441, 2031, 2410),
}
ZOO = {
    "sac-halfcheetah": (1565, 4302, 5397, 6198, 6482, 6834),
    "sac-hopper": (341, 902, 2239, 2006, 1547, 1565),
    "td3-halfcheetah": (2911, 5132, 6406, 7166, 7816, 8481),
    "td3-hopper": (232, 342, 552, 878, 1824, 2367),
}


@dataclass
class Result:
    row: str
    command: str  # seed 0's; the others differ in `seed=` and `log.dir=` only
    seeds: list[int]
    steps: np.ndarray  # [evaluations]
    returns: np.ndarray  # [seeds, evaluations]
    elapsed_s: np.ndarray  # [seeds, evaluations]: run seconds at each evaluation
    compile_s: float  # the mean over seeds
    run_s: np.ndarray  # [seeds]
    env_steps: int  # per seed
    peak_rss_gb: float  # the most of any seed's process


def command(row: str, seed: int, args: argparse.Namespace) -> list[str]:
    spec = ROWS[row]
    return [
        f"agent={spec.agent}",
        f"env={ENVS[spec.env]}",
        "preset=none",  # the agent's bare defaults, then the row's settings
        *spec.settings,
        "num_seeds=1",
        f"seed={seed}",
        f"budget.env_steps={args.budget}",
        *QUIET,
        f"log.dir={args.runs / row / f'seed{seed}'}",
    ]


def run_or_read(row: str, args: argparse.Namespace) -> Result:
    """`--seeds` of `row` (its own seeds by default): each run unless its directory holds a
    finished run."""
    seeds = args.seeds or ROWS[row].seeds
    steps, returns, elapsed, summaries = None, [], [], []
    for seed in seeds:
        run_dir = args.runs / row / f"seed{seed}"
        summaries.append(finished_cli_run(f"{row} seed {seed}", command(row, seed, args), run_dir))
        seed_steps, curves = eval_curves(run_dir, ["eval_return", "elapsed_seconds"])
        if steps is not None and seed_steps != steps:
            raise SystemExit(
                f"{row}: seed {seed} evaluated at other env steps than seed {seeds[0]}"
            )
        steps = seed_steps
        returns.append(curves["eval_return"][0])
        elapsed.append(curves["elapsed_seconds"][0])
    return Result(
        row,
        "python -m jaxrl.run " + " ".join(command(row, seeds[0], args)),
        list(seeds),
        np.asarray(steps),
        np.array(returns),
        np.array(elapsed),
        float(np.mean([s["compile_seconds"] for s in summaries])),
        np.array([s["run_seconds"] for s in summaries]),
        summaries[0]["env_steps"],
        max(s["peak_rss_gb"] for s in summaries),
    )


def at_marks(result: Result) -> list[float]:
    """The mean over seeds of the last evaluation at or before each mark (NaN before the first)."""
    mean = result.returns.mean(axis=0)
    values = []
    for mark in MARKS:
        before = np.flatnonzero(result.steps <= mark)
        values.append(float(mean[before[-1]]) if before.size else float("nan"))
    return values


def first_reaching(result: Result, target: float) -> str:
    """Env steps and run seconds of the first evaluation whose mean over seeds reaches `target`."""
    hits = np.flatnonzero(result.returns.mean(axis=0) >= target)
    if not hits.size:
        return "not reached"
    i = hits[0]
    return f"{result.steps[i] / 1000:,.0f}k ({result.elapsed_s[:, i].mean():,.0f} s)"


def report(results: list[Result], args: argparse.Namespace) -> str:
    header = [
        "run",
        "env",
        "seeds",
        "final return, mean (per seed)",
        "best evaluation",
        *[f"at {m // 1000}k: ours / Zoo / TD3 paper" for m in MARKS[1::2]],
        "first reaching the Zoo's 300k figure: env steps (run s)",
        "env steps/s per seed",
        "compile s",
        "run s per seed",
        "peak RSS GB",
    ]
    rows = []
    for r in results:
        spec = ROWS[r.row]
        zoo = ZOO[f"{spec.agent}-{spec.env}"]
        final = r.returns[:, -1]
        ours = at_marks(r)
        marks = []
        for i in range(1, len(MARKS), 2):
            paper = f"{TD3_PAPER_CURVES[spec.env][i]:,}" if spec.agent == "td3" else "—"
            marks.append(f"{fmt(ours[i], 0)} / {zoo[i]:,} / {paper}")
        rows.append(
            [
                spec.name,
                ENVS[spec.env],
                str(len(final)),
                f"**{final.mean():,.0f}** ({', '.join(f'{v:,.0f}' for v in final)})",
                f"{r.returns.mean(axis=0).max():,.0f}",
                *marks,
                first_reaching(r, zoo[-1]),
                f"{r.env_steps / r.run_s.mean():,.0f}",
                fmt(r.compile_s),
                fmt(r.run_s.mean()),
                fmt(r.peak_rss_gb, 2),
            ]
        )
    commands = "\n".join(f"* {r.row}: `{r.command}`" for r in results)
    return (
        f"# SAC and TD3 on Gymnasium MuJoCo at {args.budget:,} env steps\n\n"
        f"`python benchmarks/offpolicy_mujoco.py {' '.join(sys.argv[1:])}` on {machine()}, from "
        "each seed's run directory\n\n"
        + markdown_table(header, rows)
        + "\n\nOurs: the mean over seeds of the run's deterministic evaluations (`eval.episodes`"
        " episodes each), the last one at or before each mark. Zoo: RL Baselines3 Zoo's trained"
        " SAC/TD3 agents (rl-trained-agents cd35bde, `<algo>/<Env>-v3_1/0.monitor.csv`, one seed,"
        " v3 envs): mean return of the training episodes in the 20k env steps before the mark;"
        " its SAC ran our settings, its TD3 SB3 1.x's 400-300 networks (and on HalfCheetah Adam"
        " 1e-3, batch 100)."
        " TD3 paper: Fujimoto et al. 2018's published curves (github.com/sfujim/TD3 34770cc,"
        " `learning_curves/`, 10 seeds, v1 envs), mean at the mark. Env steps/s: a seed's env"
        " steps per second of its process's run time, one update per env step and the"
        " evaluations included; two or three runs shared the 2 cores at any time, so compare"
        " their seconds loosely.\n\nCommands (run from the repository root):\n\n"
        + commands
        + "\n\n![evaluation return against env steps](offpolicy_mujoco.png)\n"
    )


def plot(results: list[Result], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"sac": "tab:blue", "td3": "tab:red"}
    shown = [env for env in ENVS if any(ROWS[r.row].env == env for r in results)]
    fig, axes = plt.subplots(1, len(shown), figsize=(5.5 * len(shown), 4), squeeze=False)
    for ax, env in zip(axes[0], shown, strict=True):
        for r in results:
            spec = ROWS[r.row]
            if spec.env != env:
                continue
            style = ":" if spec.settings else "-"
            label = f"{spec.name} ({len(r.seeds)} seed{'s' if len(r.seeds) > 1 else ''})"
            color = colors[spec.agent]
            ax.plot(r.steps, r.returns.mean(axis=0), style, color=color, label=label)
            if len(r.seeds) > 1:
                low, high = r.returns.min(axis=0), r.returns.max(axis=0)
                ax.fill_between(r.steps, low, high, color=color, alpha=0.1, linewidth=0)
        for agent in colors:
            zoo = ZOO[f"{agent}-{env}"]
            ax.plot(MARKS, zoo, "o--", color=colors[agent], alpha=0.4, label=f"{agent} Zoo")
        ax.plot(MARKS, TD3_PAPER_CURVES[env], "s--", color="tab:gray", label="TD3 paper (10 seeds)")
        ax.set_title(ENVS[env])
        ax.set_xlabel("env steps")
        ax.set_ylabel("evaluation return")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--seeds", type=int, nargs="+", help="run these seeds of --rows (default: each row's own)"
    )
    parser.add_argument("--budget", type=int, default=300_000, help="env steps per seed")
    parser.add_argument("--runs", type=Path, default=Path("/tmp/offpolicy_mujoco"))
    parser.add_argument("--rows", nargs="+", choices=list(ROWS), default=list(ROWS))
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help="the report; another file than the default takes a report of the rows and seeds "
        "given alone",
    )
    args = parser.parse_args()
    results = [run_or_read(row, args) for row in args.rows]
    if (len(results) < len(ROWS) or args.seeds) and args.out == DEFAULT_OUT:
        return  # some rows or seeds only: their run directories are kept for the report
    write_report(report(results, args), args.out)
    plot(results, args.out.with_suffix(".png"))


if __name__ == "__main__":
    main()
