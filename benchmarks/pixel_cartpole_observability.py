"""What a frame stack tells a CartPole policy about velocity, at each frame skip: a fixed linear
rule (push right when g · [x, x′, θ, θ′] > 0) fed the true state, or velocities computed the only
ways the pictures allow. Why: DQN on `pixel/CartPole-v1` (frame skip 4) plateaus at ~450 with
the pole falling near the centre of the track (benchmarks/results/pixel_cartpole_episodes.md),
although the same rule on the true state holds every episode at 500 with the same 4-step hold.
The stacked frames are one agent step apart, and under the bang-bang control that balancing
needs, the velocity at the end of a step swings with the sign of the action just held while
the mean velocity over the step, which is all two such frames show, does not. So this asks
which observations carry enough for a rule to reach 500:

* `true state`: x′ and θ′ themselves;
* `frames one agent step apart`: (position now − one agent step ago) / the step's duration,
  what the frame stack holds;
* `... + the last action`: the same, corrected by half a step of the held push's acceleration
  (Gymnasium's CartPole constants, gravity's part left out), what a policy that also saw its
  previous action could compute;
* `frames one CartPole step apart`: positions 0.02 s apart, what stacking the last two
  CartPole frames of every agent step would hold.

For each (frame skip, observation) the gains are chosen over a grid on `--tune-episodes`
episodes (reset seeds 0, 1, ...), then scored on `--episodes` other episodes (reset seeds from
10,000): the share of them reaching CartPole-v1's 500-step limit and their mean return.
Gymnasium's CartPole-v1 runs the physics; no pictures are drawn.

    python benchmarks/pixel_cartpole_observability.py [--episodes 200] [--out FILE]
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import gymnasium as gym
import numpy as np
from common import RESULTS, machine, markdown_table, write_report

TICK = 0.02  # CartPole-v1's tau: seconds per CartPole step
# Accelerations of the held push (F = +10 N, to the right) at θ = θ′ = 0 by CartPoleEnv.step's
# equations with its constants (cart M = 1.0, pole m = 0.1, half-length l = 0.5):
# θ̈ = −F / ((M + m) · l · (4/3 − m / (M + m))) ≈ −14.6 rad/s² and
# ẍ = F / (M + m) − m · l · θ̈ / (M + m) ≈ 9.8 m/s².
PUSH_THETA_ACCEL = -10.0 / (1.1 * 0.5 * (4 / 3 - 0.1 / 1.1))
PUSH_X_ACCEL = 10.0 / 1.1 - 0.1 * 0.5 * PUSH_THETA_ACCEL / 1.1
GAIN_GRID = list(
    itertools.product([0.0, 0.05, 0.1], [0.0, 0.1, 0.2], [1.0], [0.1, 0.15, 0.2, 0.3, 0.4])
)


class History(NamedTuple):
    """What an observation may be computed from at the start of an agent step."""

    now: np.ndarray  # CartPole's state [x, x′, θ, θ′]
    step_ago: np.ndarray  # ... one agent step ago
    tick_ago: np.ndarray  # ... one CartPole step ago
    push: float  # the last action as ±1 (0 before the first)
    step_seconds: float


# An observation: [x, x′, θ, θ′] computed from a History.
Observe = Callable[[History], np.ndarray]


def with_velocities(state: np.ndarray, velocity: np.ndarray) -> np.ndarray:
    """[x, x′, θ, θ′] with x′ and θ′ taken from `velocity` (a state difference per second)."""
    return np.array([state[0], velocity[0], state[2], velocity[2]])


def true_state(seen: History) -> np.ndarray:
    return seen.now


def step_apart(seen: History) -> np.ndarray:
    return with_velocities(seen.now, (seen.now - seen.step_ago) / seen.step_seconds)


def step_apart_and_action(seen: History) -> np.ndarray:
    half_step_of_push = seen.push * seen.step_seconds / 2
    return step_apart(seen) + half_step_of_push * np.array([0, PUSH_X_ACCEL, 0, PUSH_THETA_ACCEL])


def tick_apart(seen: History) -> np.ndarray:
    return with_velocities(seen.now, (seen.now - seen.tick_ago) / TICK)


OBSERVATIONS: dict[str, Observe] = {
    "true state": true_state,
    "frames one agent step apart": step_apart,
    "frames one agent step apart + the last action": step_apart_and_action,
    "frames one CartPole step apart": tick_apart,
}


def returns(gains: np.ndarray, observe: Observe, frame_skip: int, seeds: range) -> np.ndarray:
    """CartPole steps survived in each episode with the rule's action held `frame_skip` steps;
    before the first push the earlier states are the reset state and the last action 0."""
    env = gym.make("CartPole-v1", max_episode_steps=500)
    dt = TICK * frame_skip
    out = []
    for seed in seeds:
        env.reset(seed=seed)
        now = np.array(env.unwrapped.state)
        step_ago, tick_ago, push, survived, done = now, now, 0.0, 0, False
        while not done:
            action = int(gains @ observe(History(now, step_ago, tick_ago, push, dt)) > 0)
            push, step_ago = 2.0 * action - 1.0, now
            for _ in range(frame_skip):
                tick_ago = np.array(env.unwrapped.state)
                _, reward, terminated, truncated, _ = env.step(action)
                survived += int(reward)
                done = terminated or truncated
                if done:
                    break
            now = np.array(env.unwrapped.state)
        out.append(survived)
    env.close()
    return np.array(out)


def best_gains(observe: Observe, frame_skip: int, tune_episodes: int) -> np.ndarray:
    """The grid's gains with the most tuning episodes at 500, then the highest mean return."""
    seeds = range(tune_episodes)

    def score(gains: tuple[float, ...]) -> tuple[float, float]:
        survived = returns(np.array(gains), observe, frame_skip, seeds)
        return float(np.mean(survived == 500)), float(survived.mean())

    return np.array(max(GAIN_GRID, key=score))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frame-skips", type=int, nargs="+", default=[4, 2])
    parser.add_argument("--tune-episodes", type=int, default=30)
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--out", type=Path, default=RESULTS / "pixel_cartpole_observability.md")
    args = parser.parse_args()

    rows = []
    for frame_skip, (name, observe) in itertools.product(args.frame_skips, OBSERVATIONS.items()):
        gains = best_gains(observe, frame_skip, args.tune_episodes)
        survived = returns(gains, observe, frame_skip, range(10_000, 10_000 + args.episodes))
        rows.append(
            [
                str(frame_skip),
                name,
                ", ".join(f"{g:g}" for g in gains),
                f"{np.mean(survived == 500):.2f}",
                f"{survived.mean():.1f}",
            ]
        )
        print(" | ".join(rows[-1]), flush=True)
    header = [
        "frame skip",
        "velocities from",
        "gains (x, x′, θ, θ′)",
        "share at 500",
        "mean return",
    ]
    text = (
        "# What pixel CartPole's frames tell a policy about velocity\n\n"
        f"`python benchmarks/pixel_cartpole_observability.py --tune-episodes "
        f"{args.tune_episodes} --episodes {args.episodes}` on {machine()}: a linear rule's "
        f"best gains over a grid of {len(GAIN_GRID)} (chosen on reset seeds 0-"
        f"{args.tune_episodes - 1}), scored on {args.episodes} other episodes.\n\n"
        + markdown_table(header, rows)
        + "\n"
    )
    write_report(text, args.out)


if __name__ == "__main__":
    main()
