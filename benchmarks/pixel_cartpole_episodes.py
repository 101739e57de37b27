"""How a trained pixel CartPole policy's greedy episodes end: the cart leaving the track
(|x| > 2.4), the pole falling (|θ| > 12°) or CartPole-v1's 500-step limit, and where the cart and
pole were. Why: DQN on `pixel/CartPole-v1` climbs slowly towards 500
(benchmarks/results/dqn_pixel_cartpole.md), and a mean return alone does not say whether the
policy cannot balance the pole or lets the cart drift off the track, which call for different
remedies.

Loads one seed's latest checkpoint (`jaxrl.load`: the policy only, so it can run beside the
training writing that directory) and plays `--episodes` greedy episodes of the registered
Gymnasium env (with the run's `env.kwargs`) in lockstep, one batched forward pass per agent
step; the ends are read from the CartPole state after each episode's last step with
CartPole-v1's own thresholds.

For a run trained with `show_last_action`, `--last-action-row grey` (or `flipped`) plays the
same episodes with each frame's action row held grey (or its black and white swapped) in what
the policy sees: whether the policy uses the last action at all.

    python benchmarks/pixel_cartpole_episodes.py <run dir> [--episodes 100] [--out FILE]
        [--last-action-row drawn|grey|flipped]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import NamedTuple

import gymnasium as gym
import numpy as np
from common import machine, markdown_table, write_report

import envs.pixel  # registers pixel/CartPole-v1 with Gymnasium
import jaxrl

X_LIMIT = 2.4  # CartPole-v1's x_threshold
THETA_LIMIT = 12 * 2 * math.pi / 360  # CartPole-v1's theta_threshold_radians
ENDS = ("cart off the track", "pole fell", "time limit (500)")


class Episode(NamedTuple):
    end: int  # index into ENDS
    cartpole_steps: int  # the return
    final_state: np.ndarray  # [x, x_dot, theta, theta_dot] after the last step
    max_abs_x: float  # furthest the cart went from the centre


def seen_by_policy(obs: np.ndarray, last_action_row: str) -> np.ndarray:
    """The frame stacks as the policy is shown them: the bottom (action) row as drawn, grey, or
    with black and white swapped."""
    if last_action_row == "drawn":
        return obs
    seen = obs.copy()
    row = seen[:, -1]
    left, right = envs.pixel.ACTION_ROWS
    swapped = np.where(row == left, right, np.where(row == right, left, row))
    seen[:, -1] = envs.pixel.NO_ACTION_ROW if last_action_row == "grey" else swapped
    return seen


def play(run_dir: Path, seed: int | None, episodes: int, last_action_row: str) -> list[Episode]:
    """`episodes` greedy episodes, every env from its own reset seed, stepped together."""
    policy = jaxrl.load(run_dir, seed)
    if policy.spec.name != envs.pixel.ENV_ID:
        raise SystemExit(f"{run_dir} trained on {policy.spec.name}, not {envs.pixel.ENV_ID}")
    # The run's own env settings (`env.kwargs`, e.g. frame_skip=2), as the policy was trained.
    kwargs = json.loads((run_dir / "config.json").read_text())["env"]["kwargs"]
    if last_action_row != "drawn" and not kwargs.get("show_last_action"):
        raise SystemExit(f"{run_dir} was not trained with show_last_action: no row to change")
    games = [gym.make(envs.pixel.ENV_ID, **kwargs) for _ in range(episodes)]
    obs = np.stack([game.reset(seed=index)[0] for index, game in enumerate(games)])
    alive = np.ones(episodes, bool)
    returns = np.zeros(episodes, int)
    max_abs_x = np.zeros(episodes)
    ended: list[Episode | None] = [None] * episodes
    while alive.any():
        actions = np.asarray(policy(seen_by_policy(obs, last_action_row)))
        for index in np.flatnonzero(alive):
            frames, reward, terminated, truncated, _ = games[index].step(int(actions[index]))
            obs[index] = frames
            returns[index] += int(reward)
            state = np.asarray(games[index].unwrapped.cartpole.unwrapped.state, np.float64)
            max_abs_x[index] = max(max_abs_x[index], abs(state[0]))
            if terminated or truncated:
                alive[index] = False
                end = 2 if not terminated else (0 if abs(state[0]) > X_LIMIT else 1)
                ended[index] = Episode(end, int(returns[index]), state, float(max_abs_x[index]))
    for game in games:
        game.close()
    return [episode for episode in ended if episode is not None]


def end_rows(played: list[Episode]) -> list[list[str]]:
    """One row per end: its share, the returns it cut and where cart and pole were."""
    rows = []
    for index, name in enumerate(ENDS):
        those = [episode for episode in played if episode.end == index]
        if not those:
            rows.append([name, "0.00", "—", "—", "—", "—", "—"])
            continue
        states = np.stack([episode.final_state for episode in those])
        rows.append(
            [
                name,
                f"{len(those) / len(played):.2f}",
                f"{np.median([episode.cartpole_steps for episode in those]):.0f}",
                f"{np.median(np.abs(states[:, 0])):.2f}",
                f"{np.median(np.degrees(np.abs(states[:, 2]))):.1f}",
                f"{np.median(np.degrees(np.abs(states[:, 3]))):.0f}",
                f"{np.median([episode.max_abs_x for episode in those]):.2f}",
            ]
        )
    return rows


def latest_checkpoint(run_dir: Path) -> str:
    """The latest checkpoint's iteration and env steps (read before the policy loads it: a
    training still running may write a newer one meanwhile)."""
    iteration = max(int(d.name) for d in (run_dir / "checkpoints").iterdir() if d.name.isdigit())
    per_iteration = json.loads((run_dir / "config.json").read_text())["agent"]["iteration_steps"]
    return f"iteration {iteration}, {iteration * per_iteration:,} env steps"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--seed", type=int, default=None, help="the run's seed (default: first)")
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--out", type=Path, default=None, help="write the report here")
    parser.add_argument("--last-action-row", choices=("drawn", "grey", "flipped"), default="drawn")
    args = parser.parse_args()
    checkpoint = latest_checkpoint(args.run_dir)
    played = play(args.run_dir, args.seed, args.episodes, args.last_action_row)
    steps = np.array([episode.cartpole_steps for episode in played])
    quartiles = ", ".join(f"{q:.0f}" for q in np.percentile(steps, [25, 50, 75]))
    seed_option = "" if args.seed is None else f" --seed {args.seed}"
    which = "the run's" if args.seed is None else f"seed {args.seed}'s"
    text = (
        "# How greedy pixel CartPole episodes end\n\n"
        f"`python benchmarks/pixel_cartpole_episodes.py {args.run_dir}{seed_option} --episodes "
        f"{args.episodes} --last-action-row {args.last_action_row}` on {machine()}: {which} "
        f"latest checkpoint ({checkpoint}), "
        f"{len(played)} greedy episodes from reset seeds 0-{len(played) - 1}. Return (CartPole "
        f"steps) mean "
        f"{steps.mean():.1f}, quartiles {quartiles}.\n\n"
        + markdown_table(
            [
                "end",
                "share of episodes",
                "return (median)",
                "\\|x\\| at the end (median, m)",
                "\\|θ\\| at the end (median, °)",
                "\\|θ′\\| at the end (median, °/s)",
                "furthest \\|x\\| (median, m)",
            ],
            end_rows(played),
        )
        + "\n"
    )
    write_report(text, args.out)


if __name__ == "__main__":
    main()
