"""The hybrid-action agents on the hybrid-action envs, beside HyAR's Table 2: the evaluation
success rate (greedy, noise-free episodes; the goal reached) against env steps, every seed of a
row trained in one program through the CLI, one fresh process per row.

Reference figures are Li et al. (ICLR 2022, "HyAR"), Table 2: mean of 5 runs (success rate, but
Platform's is the mean return: its script records no success), at their budgets (the reference
scripts' `max_timesteps`: Platform 200k, Goal 300k, Hard Move 1M env steps;
github.com/TJU-DRL-LAB/self-supervised-rl, commit ece9562, RL_with_Action_Representation/
HyAR/HyAR_RL/main_embedding_*_td3.py; Catch Point 1M). HyAR-TD3 itself there: Platform 0.98, Goal
0.78, Catch Point 0.90, Hard Move n=4 0.93, n=6 0.92, n=8 0.89, n=10 0.75. Their baselines run
on TD3 ("PDQN-TD3", "PATD3"); the rows here name what ran. Every row trains with its agent's
preset for the env (jaxrl/presets.py: the reference scripts' per-env settings and schedules)
except the budget: what this 2-core CPU affords; the table says both.

Rows run one at a time and their curves are kept in benchmarks/results/hybrid.json, so the table
(benchmarks/results/hybrid.md) and the curves (hybrid.png, one panel per env) can be filled in
over several sessions:

    python benchmarks/hybrid.py --list
    python benchmarks/hybrid.py --rows "P-DQN, Platform" "MP-DQN, Platform" [--seeds 5]
    python benchmarks/hybrid.py --report      # the table and the plot from what is stored
    python benchmarks/hybrid.py --adopt "HyAR, Platform" <run dir> "<its command>"
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from common import (
    REPO,
    RESULTS,
    eval_curves,
    fmt,
    last_quarter_mean,
    load_note,
    machine,
    markdown_table,
    repo_env,
    run_process,
    write_report,
)

STORE = RESULTS / "hybrid.json"


@dataclass(frozen=True)
class Env:
    name: str  # the label in tables and plots
    overrides: tuple[str, ...]
    budget: int  # env steps per seed on this CPU
    paper_budget: int  # HyAR's reference scripts


@dataclass(frozen=True)
class Row:
    agent: str
    overrides: tuple[str, ...]
    env: Env
    paper: str  # HyAR's Table 2 figure for this method and env, "—" where the issue gives none
    budget: int | None = None  # env steps per seed when not the env's


PLATFORM = Env("Platform", ("env=Platform-v0",), 100_000, 200_000)
GOAL = Env("Goal", ("env=Goal-v0",), 100_000, 300_000)
HARD_MOVE = {
    n: Env(
        f"Hard Move n={n}", ("env=HardMove-v0", f"+env.kwargs.num_actuators={n}"), 200_000, 10**6
    )
    for n in (4, 6, 8, 10)
}
# HyAR_RL/main_embedding_direction_catch_td3.py's max_timesteps: 1M.
CATCH_POINT = Env("Catch Point", ("env=CatchPoint-v0",), 100_000, 10**6)
PDQN = ("agent=pdqn", "agent.multi_pass=false")
MPDQN = ("agent=pdqn", "agent.multi_pass=true")
# P-DQN's own exploration noise, which the `goal` preset replaced by the reference's (none).
GAUSSIAN = ("agent.exploration_noise=0.1",)
PADDPG = ("agent=paddpg",)
HYAR = ("agent=hyar",)
# The reference's Catch Point latents (main_embedding_direction_catch_td3.py: 2 × 2 for z_k,
# 2 × 1 + 2 for z_x), where every other env has 6 and 6, the agent's defaults.
CATCH_POINT_LATENTS = ("agent.discrete_latent_size=4", "agent.parameter_latent_size=4")


def two_buffers(
    env: Env, paper: str, budget: int, label: str = "HyAR", overrides: tuple[str, ...] = ()
) -> Row:
    """HyAR with the reference's two buffers: TD3 on its own newest 100k steps, the VAE on every
    step of the run (the buffer holds the whole budget)."""
    return Row(
        f"{label}, TD3 on its own newest 100k, VAE on all",
        (*HYAR, *overrides, f"agent.buffer_size={budget}", "agent.td3_buffer_size=100000"),
        env,
        paper,
        budget=budget,
    )


# HyAR's Table 2 as the issue quotes it: the best baseline (PDQN-TD3) on Goal and Hard Move n = 8.
def platform_seed_blocks(
    name: str, overrides: tuple[str, ...], seeds: tuple[int, ...] = (0, 5, 10)
) -> list[Row]:
    """HyAR on Platform at the paper's budget in 5-seed programs starting at each of `seeds`;
    labels name the block but for seeds 0-4."""
    return [
        Row(
            name + (f", seeds {seed}-{seed + 4}" if seed else ""),
            (*HYAR, *overrides, f"seed={seed}"),
            PLATFORM,
            "0.98 (return)",
            budget=200_000,
        )
        for seed in seeds
    ]


ROWS = [
    Row("P-DQN", PDQN, PLATFORM, "—"),
    Row("MP-DQN", MPDQN, PLATFORM, "—"),
    Row("PA-DDPG", PADDPG, PLATFORM, "—"),
    Row("P-DQN", PDQN, GOAL, "0.71 (PDQN-TD3)"),
    # The same at the paper's Goal budget, trained as a run directory and stored with --adopt.
    Row("P-DQN, 300k env steps", PDQN, GOAL, "0.71 (PDQN-TD3)", budget=300_000),
    # HyAR's PDQN-TD3 (Table 2's P-DQN) as its script runs: twin Q-networks, clipped double-Q
    # target, ε over 1,000 episodes (~1,300 env steps of Goal's ε = 1 episodes, 1.3 steps each).
    Row(
        "P-DQN, twin Q-networks, ε over 1,300 steps, 300k env steps",
        (*PDQN, "agent.twin_q=true", "agent.exploration_steps=1300"),
        GOAL,
        "0.71 (PDQN-TD3)",
        budget=300_000,
    ),
    Row("MP-DQN", MPDQN, GOAL, "—"),
    Row("MP-DQN, 300k env steps", MPDQN, GOAL, "—", budget=300_000),
    # The `goal` preset before it took the reference's (next to no) parameter noise: the agent's
    # Gaussian σ 0.1 on the chosen parameters.
    Row("P-DQN, Gaussian parameter noise σ 0.1", (*PDQN, *GAUSSIAN), GOAL, "0.71 (PDQN-TD3)"),
    Row("MP-DQN, Gaussian parameter noise σ 0.1", (*MPDQN, *GAUSSIAN), GOAL, "—"),
    Row(
        "P-DQN, σ 0.1, 300k env steps",
        (*PDQN, *GAUSSIAN),
        GOAL,
        "0.71 (PDQN-TD3)",
        budget=300_000,
    ),
    # The same with the parameter actor held at the hand-made prior (a learning rate of 1e-9):
    # what the Q-network's choices alone reach, against the learning actor's decline after 120k.
    Row(
        "P-DQN, σ 0.1, 300k env steps, parameters held at the prior",
        (*PDQN, *GAUSSIAN, "agent.actor_lr=1e-9"),
        GOAL,
        "0.71 (PDQN-TD3)",
        budget=300_000,
    ),
    Row(
        "P-DQN, σ 0.1, twin Q-networks, 300k env steps",
        (*PDQN, *GAUSSIAN, "agent.twin_q=true"),
        GOAL,
        "0.71 (PDQN-TD3)",
        budget=300_000,
    ),
    Row("PA-DDPG", PADDPG, GOAL, "—"),
    Row("P-DQN", PDQN, HARD_MOVE[4], "—"),
    Row("P-DQN", PDQN, HARD_MOVE[8], "0.05 (PDQN-TD3)"),
    Row("PA-DDPG", PADDPG, HARD_MOVE[8], "—"),
    Row("P-DQN", PDQN, CATCH_POINT, "—"),
    Row("MP-DQN", MPDQN, CATCH_POINT, "—"),
    Row("PA-DDPG", PADDPG, CATCH_POINT, "—"),
    Row("HyAR", HYAR, PLATFORM, "0.98 (return)", budget=200_000),
    # The reference's VAE step every 10 episodes is ~1 per 100 env steps once Platform's
    # episodes run to the goal; the default's 25 matches its early, short episodes.
    Row(
        "HyAR, VAE step every 100",
        (*HYAR, "agent.vae_every=100"),
        PLATFORM,
        "0.98 (return)",
        budget=200_000,
    ),
    # The reference's two buffers on Platform: TD3 on its own newest 1e5 transitions, the VAE
    # on all of the run's (the default buffer holds the whole budget).
    Row(
        "HyAR, TD3 on its own newest 100k, VAE on all",
        (*HYAR, "agent.td3_buffer_size=100000"),
        PLATFORM,
        "0.98 (return)",
        budget=200_000,
    ),
    # Whether the representation's changes make the greedy policy's success flip from one
    # evaluation to the next: the latent range measured on 10× the transitions (a steadier
    # percentile), and no VAE step after the pre-training (the range never measured again).
    Row(
        "HyAR, range from 50k samples",
        (*HYAR, "agent.range_samples=50000"),
        PLATFORM,
        "0.98 (return)",
        budget=200_000,
    ),
    Row(
        "HyAR, VAE frozen after its pre-training",
        (*HYAR, "agent.vae_train_after=1000000"),
        PLATFORM,
        "0.98 (return)",
        budget=200_000,
    ),
    # Twice the final exploration noise: whether seeds whose last hop falls short find the
    # longer hop when they try more of its neighbours.
    Row(
        "HyAR, final exploration σ 0.2",
        (*HYAR, "agent.exploration_noise=0.2"),
        PLATFORM,
        "0.98 (return)",
        budget=200_000,
    ),
    # A third of the reference's actor learning rate: whether a slower actor leaves the last
    # run-up's window less often.
    Row(
        "HyAR, actor learning rate 1e-4",
        (*HYAR, "agent.actor_lr=0.0001"),
        PLATFORM,
        "0.98 (return)",
        budget=200_000,
    ),
    # The same two on five more seeds (5-9): whether the slower actor's lead holds.
    Row("HyAR, seeds 5-9", (*HYAR, "seed=5"), PLATFORM, "0.98 (return)", budget=200_000),
    Row(
        "HyAR, actor learning rate 1e-4, seeds 5-9",
        (*HYAR, "agent.actor_lr=0.0001", "seed=5"),
        PLATFORM,
        "0.98 (return)",
        budget=200_000,
    ),
    Row(
        "HyAR, final exploration σ 0.2, seeds 5-9",
        (*HYAR, "agent.exploration_noise=0.2", "seed=5"),
        PLATFORM,
        "0.98 (return)",
        budget=200_000,
    ),
    # Both: a slower actor that keeps trying hops around its own, on fifteen seeds.
    *platform_seed_blocks(
        "HyAR, σ 0.2 and actor learning rate 1e-4",
        ("agent.exploration_noise=0.2", "agent.actor_lr=0.0001"),
    ),
    # Both, with TD3's learning rates annealed to 0 over the budget: whether the greedy policy,
    # settling as the run ends, stops swinging between the last evaluations.
    *platform_seed_blocks(
        "HyAR, σ 0.2, actor learning rate 1e-4, annealed",
        ("agent.exploration_noise=0.2", "agent.actor_lr=0.0001", "agent.anneal_lr=true"),
    ),
    # The preset with more of what steadied it, on the seeds it left lowest (5-9): a larger
    # final exploration noise, and TD3's own target smoothing (0.2; the reference's 0.1), each
    # favouring hops that still land when perturbed. Seeds 15-19 of σ 0.3 came after its seeds
    # 0-14 had ended highest at the final evaluation: held out for the choice of the preset.
    *platform_seed_blocks(
        "HyAR, σ 0.3 and actor learning rate 1e-4",
        ("agent.exploration_noise=0.3", "agent.actor_lr=0.0001"),
        seeds=(5, 0, 10, 15),
    ),
    Row(
        "HyAR, σ 0.2, actor learning rate 1e-4, target smoothing 0.2, seeds 5-9",
        (
            *HYAR,
            "agent.exploration_noise=0.2",
            "agent.actor_lr=0.0001",
            "agent.target_noise=0.2",
            "seed=5",
        ),
        PLATFORM,
        "0.98 (return)",
        budget=200_000,
    ),
    # The preset with a quarter of the periodic VAE steps (the change that lifted the reference's
    # settings most, above): whether a representation that moves less keeps the decoded hops,
    # and so the greedy policy's success, steadier between evaluations.
    *platform_seed_blocks(
        "HyAR, σ 0.2, actor learning rate 1e-4, a VAE step every 100",
        ("agent.exploration_noise=0.2", "agent.actor_lr=0.0001", "agent.vae_every=100"),
        seeds=(5,),
    ),
    # The `goal` preset: the reference's warm-up and budget, and its two buffers: TD3 draws
    # from its own newest 1e5 transitions (no warm-up ones), the VAE from every transition of
    # the run (its 2e6 buffer holds them all).
    Row("HyAR", HYAR, GOAL, "0.78", budget=321_000),
    # The same on seeds 0-2 alone, beside the other 3-seed rows.
    two_buffers(GOAL, "0.78", 321_000),
    # The slower actor that steadied Platform's seeds, on Goal's preset.
    Row(
        "HyAR, actor learning rate 1e-4",
        (*HYAR, "agent.actor_lr=0.0001"),
        GOAL,
        "0.78",
        budget=321_000,
    ),
    # The preset before: one 100k buffer for both, warm-up included.
    Row(
        "HyAR, one 100k buffer for TD3 and the VAE",
        (*HYAR, "agent.buffer_size=100000", "agent.td3_buffer_size=0"),
        GOAL,
        "0.78",
        budget=321_000,
    ),
    # Before that: the default 200k, which keeps older transitions (and the warm-up's) for
    # longer; alone, and with ~1.3 updates per env step as the reference's TD3 makes (one more
    # at each episode's start; a trained policy's greedy Goal episode is 3.1 env steps).
    Row(
        "HyAR, buffer 200k",
        (*HYAR, "agent.buffer_size=200000", "agent.td3_buffer_size=0"),
        GOAL,
        "0.78",
        budget=321_000,
    ),
    Row(
        "HyAR, buffer 200k, 1.25 updates per env step",
        (
            *HYAR,
            "agent.buffer_size=200000",
            "agent.td3_buffer_size=0",
            "agent.train_freq=4",
            "agent.gradient_steps=5",
        ),
        GOAL,
        "0.78",
        budget=321_000,
    ),
    # The reference's VAE steps: a new Adam at each, so each is about vae_lr·sign(gradient)
    # (on the one 100k buffer).
    Row(
        "HyAR, VAE steps without Adam's moments",
        (
            *HYAR,
            "agent.buffer_size=100000",
            "agent.td3_buffer_size=0",
            "agent.vae_adam_moments=false",
        ),
        GOAL,
        "0.78",
        budget=321_000,
    ),
    # The preset's with the reference's loop: one more TD3 update as each episode starts.
    Row(
        "HyAR, an update as each episode starts",
        (*HYAR, "agent.update_at_episode_start=true"),
        GOAL,
        "0.78",
        budget=321_000,
    ),
    Row("HyAR", HYAR, HARD_MOVE[4], "0.93", budget=250_000),
    Row("HyAR", HYAR, HARD_MOVE[6], "0.92", budget=250_000),
    # 150k env steps of the preset's random warm-up, then 500k of learning: what one session
    # of this CPU affords with 5 seeds in one program.
    Row("HyAR", HYAR, HARD_MOVE[8], "0.89", budget=650_000),
    # n=4 and n=6 with 250k env steps of learning after the warm-up (both still rose at 250k).
    Row("HyAR, 400k env steps", HYAR, HARD_MOVE[4], "0.93", budget=400_000),
    Row("HyAR, 400k env steps", HYAR, HARD_MOVE[6], "0.92", budget=400_000),
    Row("HyAR", HYAR, HARD_MOVE[10], "0.75", budget=250_000),
    # n=10 with 250k env steps of learning after the warm-up (n=8 was above 0.8 by then).
    Row("HyAR, 400k env steps", HYAR, HARD_MOVE[10], "0.75", budget=400_000),
    # 550k of learning (the 400k row still rose: 0.14, 0.42, 0.66 at its end), 5 seeds in one
    # program.
    Row("HyAR, 700k env steps", HYAR, HARD_MOVE[10], "0.75", budget=700_000),
    # The same in two programs before that one ran: seeds 0-2 (`--seeds 3`), then seeds 3 and 4.
    Row("HyAR, 700k env steps, seeds 0-2", HYAR, HARD_MOVE[10], "0.75", budget=700_000),
    Row(
        "HyAR, 700k env steps, seeds 3-4", (*HYAR, "seed=3"), HARD_MOVE[10], "0.75", budget=700_000
    ),
    # The paper's budget (the `hard-move` preset's own): 850k env steps of learning after the
    # warm-up, 5 seeds in one program carried across sessions by its checkpoints
    # (hyar_hardmove10_1m.md); stored with --adopt.
    Row("HyAR, 1M env steps", HYAR, HARD_MOVE[10], "0.75", budget=1_000_000),
    # The reference's two Hard Move buffers (main_embedding_hard_move_td3.py): TD3 on its own
    # steps only (1e6: every one of them), the VAE on all, the random warm-up's included.
    Row(
        "HyAR, TD3 on its own steps, VAE on all",
        (*HYAR, "agent.buffer_size=250000", "agent.td3_buffer_size=100000"),
        HARD_MOVE[10],
        "0.75",
        budget=250_000,
    ),
    Row("HyAR", HYAR, CATCH_POINT, "0.90"),
    # 375k env steps of learning after the preset's 125k warm-up (the 225k row still rose).
    Row("HyAR, 500k env steps", HYAR, CATCH_POINT, "0.90", budget=500_000),
    # The reference's Catch Point buffers (main_embedding_direction_catch_td3.py): TD3 on its own
    # newest 1e5 steps, the VAE on all (its 1e6 holds the whole run).
    two_buffers(CATCH_POINT, "0.90", 225_000),
    # The reference's Catch Point latents (the `catch-point` preset's since these rows).
    *(
        Row(label, (*HYAR, *CATCH_POINT_LATENTS), CATCH_POINT, "0.90", budget=budget)
        for label, budget in (
            ("HyAR, 4-dim latents", 225_000),
            ("HyAR, 4-dim latents, 500k env steps", 500_000),
        )
    ),
    two_buffers(CATCH_POINT, "0.90", 225_000, "HyAR, 4-dim latents", CATCH_POINT_LATENTS),
]


AGENT_COLORS = {agent: f"C{i}" for i, agent in enumerate(dict.fromkeys(row.agent for row in ROWS))}


def label(row: Row) -> str:
    return f"{row.agent}, {row.env.name}"


def run(row: Row, args: argparse.Namespace, run_dir: Path) -> dict:
    """One row through the CLI: its command, seconds, final summary figures and curves."""
    overrides = [
        *row.overrides,
        *row.env.overrides,
        f"num_seeds={args.seeds}",
        f"budget.env_steps={int((row.budget or row.env.budget) * args.budget_scale)}",
        f"eval.per_run={args.evaluations}",
        f"eval.episodes={args.eval_episodes}",
        "log.progress=false",
        "log.tensorboard=false",
    ]
    _, wall = run_process(
        label(row),
        [sys.executable, "-m", "jaxrl.run", *overrides, f"log.dir={run_dir}"],
        cwd=REPO,
        env=repo_env(),
    )
    return read_run(run_dir, "python -m jaxrl.run " + " ".join(overrides), wall)


def read_run(run_dir: Path, command: str, wall: float | None) -> dict:
    """A finished run directory's figures and curves, under the command that trained it."""
    summary = json.loads((run_dir / "summary.json").read_text())
    steps, curves = eval_curves(run_dir, ["eval_success_rate", "eval_return"])
    return {
        "command": command,
        "machine": machine(),
        "wall_s": wall,
        "compile_s": summary["compile_seconds"],
        "run_s": summary["run_seconds"],
        "peak_rss_gb": summary.get("peak_rss_gb"),  # summaries of runs since it was added
        "steps": steps,
        "success": curves["eval_success_rate"],
        "returns": curves["eval_return"],
    }


def fraction_at(result: dict, share: float) -> str:
    """Mean success over seeds at the first evaluation at or past `share` of the run, with the
    worst seed's."""
    steps = np.asarray(result["steps"])
    index = int(np.searchsorted(steps, share * steps[-1]))
    column = np.asarray(result["success"])[:, index]
    return f"{column.mean():.2f} (min {column.min():.2f}) at {steps[index] // 1000}k"


def report(store: dict[str, dict]) -> None:
    header = [
        "agent",
        "env",
        "success at half the budget",
        "final success (worst seed)",
        "final success per seed",
        "mean success, last quarter",
        "mean return: final / last quarter",
        "HyAR Table 2 (at its budget)",
        "seeds",
        "budget here / paper's",
        "compile s",
        "run s",
        "peak RSS GB",
    ]
    rows, commands = [], []
    for row in ROWS:
        result = store.get(label(row))
        if result is None:
            continue
        success = np.asarray(result["success"])
        returns = np.asarray(result["returns"])
        final = success[:, -1]
        rows.append(
            [
                row.agent,
                row.env.name,
                fraction_at(result, 0.5),
                f"**{final.mean():.2f}** ({final.min():.2f})",
                ", ".join(f"{v:.2f}" for v in final),
                f"{last_quarter_mean(result['steps'], result['success']).mean():.2f}",
                f"{np.mean(returns[:, -1]):.2f} / "
                f"{last_quarter_mean(result['steps'], returns).mean():.2f}",
                row.paper,
                str(len(final)),
                f"{result['steps'][-1] // 1000}k / {row.env.paper_budget // 1000}k",
                fmt(result["compile_s"]),
                fmt(result["run_s"]),
                "—" if result.get("peak_rss_gb") is None else f"{result['peak_rss_gb']:.2f}",
            ]
        )
        commands.append(
            f"* {label(row)} ({result['machine']}; {result['load']}): `{result['command']}`"
        )
    text = "\n".join(
        [
            "# Hybrid-action agents against HyAR's Table 2",
            "",
            "`python benchmarks/hybrid.py` (module docstring). Each row's seeds train in one "
            "program; about 20 evaluations per run, each of `eval.episodes` greedy, noise-free "
            "episodes per seed, give its success rate (the goal reached). Cells: mean over seeds "
            "(the worst seed's). Seconds are the run's `summary.json` (compile, run); other "
            "processes shared the CPU during some rows, so compare them loosely.",
            "",
            "Which figure Table 2 gives differs by env, as HyAR's scripts record them: Platform's "
            "(`main_embedding_platform_td3.py`) is the mean evaluation return (its `evaluate` "
            "returns that alone, and a run that reaches the goal scores 1), Goal's the share of "
            "episodes scoring 50, Hard Move's and Catch Point's their success flag. Their "
            "budgets (`max_timesteps`) count TD3's env steps only, after the random warm-up "
            "episodes; ours count the warm-up too.",
            "",
            markdown_table(header, rows),
            "",
            "Commands (each with `log.dir=<a temporary directory>`) and machines:",
            "",
            *commands,
            "",
            "![success rate against env steps](hybrid.png)",
            "",
        ]
    )
    write_report(text, RESULTS / "hybrid.md")
    plot(store)


def plot(store: dict[str, dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    env_order = [PLATFORM, GOAL, *HARD_MOVE.values(), CATCH_POINT]  # Hard Move panels by n
    stored = {row.env.name for row in ROWS if label(row) in store}
    env_names = [env.name for env in env_order if env.name in stored]
    fig, axes = plt.subplots(
        1, len(env_names), figsize=(4.2 * len(env_names), 7.0), squeeze=False, sharey=True
    )
    for ax, env_name in zip(axes[0], env_names, strict=True):
        for row in ROWS:
            result = store.get(label(row))
            if row.env.name != env_name or result is None:
                continue
            steps, success = np.asarray(result["steps"]), np.asarray(result["success"])
            color = AGENT_COLORS[row.agent]  # one colour per agent in every panel
            ax.plot(steps, success.mean(axis=0), label=row.agent, color=color, linewidth=2)
            for seed_curve in success:
                ax.plot(steps, seed_curve, color=color, linewidth=0.5, alpha=0.3)
        ax.set_title(env_name)
        ax.set_xlabel("env steps per seed")
        ax.xaxis.set_major_formatter(lambda x, _: f"{x / 1000:.0f}k")
        ax.set_ylim(-0.02, 1.02)
        # Below the panel: Platform alone has more rows than its curves leave room for.
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), fontsize=7)
    axes[0][0].set_ylabel("evaluation success rate")
    fig.suptitle("mean over seeds (thick), each seed (thin)", fontsize=9)
    fig.tight_layout()
    fig.savefig(RESULTS / "hybrid.png", dpi=110)
    plt.close(fig)


def stored_results() -> dict[str, Any]:
    """Every row's result stored so far (empty before the first)."""
    return json.loads(STORE.read_text()) if STORE.exists() else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", nargs="*", default=[], help="labels to run (see --list)")
    parser.add_argument("--list", action="store_true", help="print the row labels and stop")
    parser.add_argument("--report", action="store_true", help="only rewrite the table and plot")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--evaluations", type=int, default=20, help="evaluations per run")
    parser.add_argument("--eval-episodes", type=int, default=50)
    parser.add_argument("--budget-scale", type=float, default=1.0, help="× each row's budget")
    parser.add_argument(
        "--adopt",
        nargs=3,
        metavar=("ROW", "RUN_DIR", "COMMAND"),
        help="store a run trained outside this script (on this machine) as ROW's result, with "
        "the command that trained it, instead of running anything",
    )
    args = parser.parse_args()
    if args.list:
        print("\n".join(f"{label(row)}: {' '.join(row.overrides)}" for row in ROWS))
        return
    store = stored_results()
    chosen = [row for row in ROWS if label(row) in args.rows]
    unknown = set(args.rows) - {label(row) for row in ROWS}
    if unknown:
        parser.error(f"unknown rows {sorted(unknown)}; see --list")
    if args.adopt:
        row_label, run_dir, command = args.adopt
        if row_label not in {label(row) for row in ROWS}:
            parser.error(f"unknown row {row_label!r}; see --list")
        result = read_run(Path(run_dir), command, None)
        result["load"] = "trained outside this script; its load was not recorded"
        store[row_label] = result
        STORE.write_text(json.dumps(store, indent=1))
        report(store)
        return
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        for i, row in enumerate(chosen):
            result = run(row, args, Path(tmp) / str(i))
            result["load"] = load_note(load_before, os.getloadavg()[0])
            # Read again: another process of this script may have stored a row meanwhile.
            store = stored_results()
            store[label(row)] = result
            STORE.write_text(json.dumps(store, indent=1))
            final = np.asarray(result["success"])[:, -1]
            print(f"{label(row)}: final success {final.mean():.2f} {final.round(2).tolist()}")
    report(store)


if __name__ == "__main__":
    main()
