"""BC, DAgger and AggreVaTeD against the number of expert-labelled steps, from an expert that
jaxrl trained (issue: imitation learning).

The expert is a finished run directory (`--expert`); without one, a SAC expert is trained first
with the test suite's Pendulum settings (tests/learning.py: 64-64 networks, 20k steps). For each
budget D of expert-labelled steps every method trains `--seeds` seeds in one program:

* BC on D / episode-length whole expert episodes, for D env steps (the same iterations and
  updates as DAgger's);
* DAgger for D env steps (it labels every visited state);
* AggreVaTeD for D env steps (Q* scores every visited state): its defaults (reparameterised
  gradient, states aggregated across iterations), the online step on each iteration's own states
  alone, and the paper's online likelihood-ratio one.

Scores are normalised, (R − R_random) / (R_expert − R_random), R_random the mean return of
uniform actions and R_expert the expert seed's own final evaluation. Writes
benchmarks/results/imitation.md (or `--name`.md) and the plot of score against labelled steps.

    python benchmarks/imitation.py [--expert RUN_DIR] [--env Pendulum-v1] [--seeds 4]
        [--budgets 3200 6400 16000 32000] [--learner 64,64] [--name imitation]
"""

from __future__ import annotations

import argparse
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

sys.path.insert(1, str(REPO / "tests"))

from learning import PENDULUM_SAC_EXPERT, normalized_scores, random_policy_return

import jaxrl

QUIET = ("log.progress=false", "log.tensorboard=false")
METHODS = {
    "BC": ("agent=bc",),
    "DAgger": ("agent=dagger",),
    "AggreVaTeD (aggregated)": ("agent=aggrevated",),
    "AggreVaTeD (online)": ("agent=aggrevated", "agent.aggregate=false"),
    "AggreVaTeD (online, likelihood ratio: the paper's)": (
        "agent=aggrevated",
        "agent.aggregate=false",
        "agent.estimator=likelihood_ratio",
    ),
}


def pendulum_expert(workdir: Path) -> Path:
    """The test suite's SAC expert (tests/learning.py:PENDULUM_SAC_EXPERT), trained here."""
    run_dir = workdir / "expert"
    jaxrl.train(*PENDULUM_SAC_EXPERT, run_dir=run_dir)
    return run_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--expert", type=Path, default=None)
    parser.add_argument("--env", default="Pendulum-v1")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--budgets", type=int, nargs="+", default=[3200, 6400, 16000, 32000])
    parser.add_argument("--learner", default="64,64", help="the learner's hidden sizes")
    parser.add_argument("--extra", nargs="*", default=[], help="overrides for every learner")
    parser.add_argument("--name", default="imitation")
    parser.add_argument("--methods", nargs="+", choices=list(METHODS), default=list(METHODS))
    args = parser.parse_args()
    methods = {name: METHODS[name] for name in args.methods}

    workdir = Path(tempfile.mkdtemp(prefix="imitation_"))
    expert = args.expert or pendulum_expert(workdir)
    expert_policy = jaxrl.load(expert)  # the seed the learners imitate (the run's first)
    expert_agent = json.loads((Path(expert) / "config.json").read_text())["agent"]["name"]
    summary = json.loads((Path(expert) / "summary.json").read_text())
    expert_return = next(
        r["final_eval_return"] for r in summary["runs"] if r["seed"] == expert_policy.seed
    )
    episode_steps = expert_policy.spec.max_episode_steps
    random = random_policy_return(args.env)
    print(f"expert {expert}: return {expert_return:.1f}; random {random:.1f}")

    scores: dict[str, list[np.ndarray]] = {name: [] for name in methods}
    seconds: dict[str, float] = dict.fromkeys(methods, 0.0)
    for budget in args.budgets:
        for index, (name, agent) in enumerate(methods.items()):
            extra = [f"agent.expert_episodes={budget // episode_steps}"] if name == "BC" else []
            t0 = time.perf_counter()
            result = jaxrl.train(
                *agent,
                *extra,
                f"agent.expert={expert}",
                f"env={args.env}",
                f"num_seeds={args.seeds}",
                f"agent.hidden_sizes=[{args.learner}]",
                f"budget.env_steps={budget}",
                *args.extra,
                *QUIET,
                run_dir=workdir / f"method{index}_{budget}",
            )
            seconds[name] += time.perf_counter() - t0
            scores[name].append(normalized_scores(result.summary, expert_return, random))
            s = scores[name][-1]
            print(f"{name} D={budget}: score {s.mean():.3f} per seed {np.round(s, 3).tolist()}")

    header = ["expert-labelled steps", *methods]
    rows = [
        [
            f"{budget:,}",
            *(
                f"{fmt(scores[m][i].mean(), 2)} ({fmt(scores[m][i].min(), 2)}–"
                f"{fmt(scores[m][i].max(), 2)})"
                for m in methods
            ),
        ]
        for i, budget in enumerate(args.budgets)
    ]
    plot = RESULTS / f"{args.name}.png"
    draw(args, scores, plot)
    extra = " ".join(args.extra)
    chosen = "" if len(methods) == len(METHODS) else " --methods " + " ".join(map(repr, methods))
    text = "\n\n".join(
        [
            f"# Imitation on {args.env}: BC, DAgger and AggreVaTeD against expert-labelled steps",
            f"Machine: {machine()}. Command: `python benchmarks/imitation.py --env {args.env} "
            f"--seeds {args.seeds} --budgets {' '.join(map(str, args.budgets))} --learner "
            f"{args.learner}{' --extra ' + extra if extra else ''}"
            f"{f' --expert {args.expert}' if args.expert else ''}"
            f"{chosen}`.",
            f"Expert: a `{expert_agent}` run, seed {expert_policy.seed}, final evaluation "
            f"{expert_return:.1f}; uniform random actions {random:.1f}. Score = "
            f"(R − R_random) / (R_expert − R_random) of each seed's final evaluation "
            f"(deterministic episodes); mean over {args.seeds} seeds (min–max).",
            markdown_table(header, rows),
            "Training seconds per method, all budgets (compile included): "
            + ", ".join(f"{m} {seconds[m]:.0f} s" for m in methods)
            + ".",
            f"![score against labelled steps]({plot.name})",
        ]
    )
    write_report(text + "\n", RESULTS / f"{args.name}.md")


def draw(args: argparse.Namespace, scores: dict[str, list[np.ndarray]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for name, per_budget in scores.items():
        means = [s.mean() for s in per_budget]
        low = [s.min() for s in per_budget]
        high = [s.max() for s in per_budget]
        ax.plot(args.budgets, means, marker="o", label=name)
        ax.fill_between(args.budgets, low, high, alpha=0.15)
    ax.set_xscale("log")
    title = f"{args.env}: {args.seeds} seeds (mean, min–max)"
    finish_imitation_plot(fig, ax, 1.0, title, "normalised return", out)


if __name__ == "__main__":
    main()
