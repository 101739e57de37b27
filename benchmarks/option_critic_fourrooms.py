"""The four-rooms transfer experiment of Bacon, Harb & Precup (2017, "The Option-Critic
Architecture", Figure 3): steps per episode over 2,000 episodes, the goal moved from the east
doorway to a random cell of the lower-right room at episode 1,000, option-critic with 4 and 8
options against a primitive actor-critic (option-critic with one option: a Boltzmann policy
improved with Q_U − Q_Ω, the paper's AC-PG). Every configuration's seeds train in one vmapped
program (`agents.option_critic.train_for_episodes`).

Settings are those of the run behind the paper's figure (the command in the authors'
fourrooms/README.md with transfer.py's defaults): critic lr 0.5, intra-option and termination lr
0.25, baseline, Boltzmann policies at temperature 0.01, γ 0.99, episodes capped at 1,000 steps,
and the reference env's slip rule (`env.slip_rule=empty_neighbor`). The paper averaged 350 runs.

Writes benchmarks/results/option_critic_fourrooms.md, the learning curve
(option_critic_fourrooms.png) and the termination probabilities of each option of a 4-option run
trained for the episodes before the switch (option_critic_terminations.png).

    python benchmarks/option_critic_fourrooms.py [--seeds 350] [--episodes 2000]
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np
from common import RESULTS, fmt, machine, markdown_table, write_report

import envs
from agents import option_critic
from envs.configs import FourRoomsConfig
from envs.fourrooms import (
    EAST_DOORWAY_GOAL,
    NUM_CELLS,
    TRANSFER_GOALS,
    draw_grid,
    shortest_path_lengths,
)

CONFIGS = {"option-critic, 4 options": 4, "option-critic, 8 options": 8, "AC-PG (1 option)": 1}
WINDOWS = ((0, 10), (90, 100), (990, 1000), (1000, 1010), (1090, 1100), (1990, 2000))


def train(num_options: int, seeds: int, episodes: int, switch: int):
    """Every seed's episode lengths [seeds, episodes] and final state, and the seconds taken."""
    env_cfg = FourRoomsConfig(goal_switch_episodes=switch, slip_rule="empty_neighbor")
    env = envs.make(env_cfg, num_envs=1)
    cfg = option_critic.OptionCriticConfig(num_options=num_options)
    setup = option_critic.OptionCriticSetup(cfg, NUM_CELLS, 4, 1, env)

    def run(key: jax.Array):
        init_key, env_key, train_key = jax.random.split(key, 3)
        state = option_critic.init(setup, init_key)
        state, _, lengths = option_critic.train_for_episodes(
            setup, state, env.reset(env_key), train_key, episodes
        )
        return state, lengths

    keys = jax.random.split(jax.random.PRNGKey(0), seeds)
    start = time.perf_counter()
    compiled = jax.jit(jax.vmap(run)).lower(keys).compile()
    compile_seconds = time.perf_counter() - start
    start = time.perf_counter()
    state, lengths = jax.block_until_ready(compiled(keys))
    return np.asarray(lengths), state, compile_seconds, time.perf_counter() - start


def plot_curves(curves: dict[str, np.ndarray], switch: int, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for label, lengths in curves.items():
        mean = lengths.mean(axis=0)
        sem = lengths.std(axis=0) / np.sqrt(len(lengths))
        x = np.arange(1, mean.size + 1)
        (line,) = ax.plot(x, mean, label=label, linewidth=1)
        ax.fill_between(x, mean - 1.96 * sem, mean + 1.96 * sem, color=line.get_color(), alpha=0.25)
    ax.axvline(switch, color="grey", linestyle=":", linewidth=1)
    ax.set_yscale("log")
    ax.set_xlabel("episode")
    ax.set_ylabel("steps per episode (mean, 95% band)")
    ax.set_title(f"Four-rooms, goal moved at episode {switch} ({len(lengths)} runs each)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_terminations(state, goal: int, path) -> None:
    """Each option's β(s) of run 0 on the grid (dark: likely to end there)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    weights = np.asarray(state.termination_weights[0])  # [cells, options]
    beta = 1 / (1 + np.exp(-weights))
    options = beta.shape[1]
    fig, axes = plt.subplots(1, options, figsize=(3 * options, 3.2))
    for k, ax in enumerate(np.atleast_1d(axes)):
        ax.imshow(draw_grid(beta[:, k], goal=goal, scale=12))
        ax.set_title(f"option {k}: β(s)")
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=350)
    parser.add_argument("--episodes", type=int, default=2000)
    args = parser.parse_args()
    switch = args.episodes // 2
    where = machine(load=True)
    curves, rows = {}, []
    for label, num_options in CONFIGS.items():
        lengths, _, compile_s, run_s = train(num_options, args.seeds, args.episodes, switch)
        curves[label] = lengths
        mean = lengths.mean(axis=0)
        windows = [fmt(mean[a:b].mean()) for a, b in WINDOWS if b <= args.episodes]
        rows.append([label, *windows, fmt(compile_s), fmt(run_s), f"{lengths.sum():,}"])
        print(label, windows, f"compile {compile_s:.1f}s run {run_s:.1f}s", flush=True)
    plot_curves(curves, switch, RESULTS / "option_critic_fourrooms.png")
    # The options as they stand when the goal moves: 4 options trained for as many episodes
    # with the goal in the east doorway all along.
    _, before_switch, _, _ = train(4, 8, switch, 0)
    plot_terminations(
        before_switch,
        EAST_DOORWAY_GOAL,
        RESULTS / "option_critic_terminations.png",
    )
    distances = shortest_path_lengths(EAST_DOORWAY_GOAL)
    starts = distances[np.arange(NUM_CELLS) != EAST_DOORWAY_GOAL]
    after = np.mean(
        [shortest_path_lengths(g)[np.arange(NUM_CELLS) != g].mean() for g in TRANSFER_GOALS]
    )
    header = [
        "agent",
        *[f"episodes {a + 1}–{b}" for a, b in WINDOWS if b <= args.episodes],
        "compile s",
        "run s",
        "env steps",
    ]
    text = "\n".join(
        [
            "# Option-critic on four-rooms: the paper's transfer experiment",
            "",
            f"`python benchmarks/option_critic_fourrooms.py --seeds {args.seeds} --episodes "
            f"{args.episodes}` on {where}. Mean steps per episode over {args.seeds} runs "
            f"(each configuration's runs in one vmapped program); the goal moves at episode "
            f"{switch + 1}. Shortest paths without slips: {starts.mean():.2f} steps on average "
            f"from a uniform start to the east doorway, {after:.2f} to a transfer goal "
            f"(averaged over the goals).",
            "",
            markdown_table(header, rows),
            "",
            "![learning curves](option_critic_fourrooms.png)",
            "",
            "![termination probabilities](option_critic_terminations.png)",
            "",
        ]
    )
    write_report(text, RESULTS / "option_critic_fourrooms.md")


if __name__ == "__main__":
    main()
