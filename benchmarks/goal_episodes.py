"""Where a trained Goal policy's greedy episodes fail: which end each episode meets (scored, the
goalie's catch, the ball off the pitch, the step limit), after which action, from where, and how
the success rate varies with the start. Why: HyAR on Goal-v0 stops at ~0.70 success where the
HyAR paper reports 0.78 (benchmarks/results/hybrid.md), and a rate alone does not say what the
remaining episodes do.

Loads a run's latest checkpoint for each of its seeds (`jaxrl.load_policy`) and plays
`--episodes` greedy episodes per seed in one compiled program, every env from its own reset;
the classification reads the env's state after each episode's last step with the same
predicates `envs/goal.py` ends an episode by.

    python benchmarks/goal_episodes.py <run dir> [--episodes 1000] [--out FILE]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from common import machine, markdown_table, write_report

from envs import goal
from jaxrl.cli import resumed_config
from jaxrl.policy import Policy, load_policy

Array = jax.Array
ENDS = ("scored", "caught by the goalie", "ball off the pitch", "step limit")
# Start |y| bands (the pitch's half width is 15): central, between, wide.
START_BANDS = ((0.0, 5.0), (5.0, 10.0), (10.0, 15.0))


class Episode(NamedTuple):
    end: Array  # int32: index into ENDS
    last_choice: Array  # int32: the choice of the episode's last action (goal.CHOICES)
    last_x: Array  # float32: the player's x when its last action started
    start_y: Array  # float32: the player's y at the reset
    kicks: Array  # int32: kick-to actions before the last action


def play(policy: Policy, episodes: int, key: Array) -> Episode:
    """`episodes` greedy episodes, one per env, stepped together; finished envs are frozen."""
    reset_keys, loop_key = jax.random.split(key)
    states, obs = jax.vmap(goal.reset)(jax.random.split(reset_keys, episodes))
    start_y = states.player_position[:, 1]
    zeros_i = jnp.zeros((episodes,), jnp.int32)
    zeros_f = jnp.zeros((episodes,), jnp.float32)

    def step(carry: Any, step_key: Array) -> tuple[Any, None]:
        states, obs, alive, terminated, last_choice, last_x, kicks = carry
        act_key, env_key = jax.random.split(step_key)
        choice, parameters = policy.agent.act(policy.agent_state, obs, act_key, True)
        new_states, new_obs, _, ended = jax.vmap(goal.step)(
            jax.random.split(env_key, episodes), states, (choice, parameters)
        )
        keep = lambda new, old: jnp.where(alive.reshape(-1, *([1] * (new.ndim - 1))), new, old)
        states = jax.tree.map(keep, new_states, states)
        obs = keep(new_obs, obs)
        last_choice = jnp.where(alive, choice, last_choice)
        last_x = jnp.where(alive, carry[0].player_position[:, 0], last_x)
        kicks = kicks + (alive & (choice == 0)).astype(jnp.int32)
        terminated = terminated | (alive & ended)
        alive = alive & ~ended
        return (states, obs, alive, terminated, last_choice, last_x, kicks), None

    carry = (states, obs, jnp.ones((episodes,), bool), jnp.zeros((episodes,), bool))
    carry = (*carry, zeros_i, zeros_f, zeros_i)
    keys = jax.random.split(loop_key, goal.MAX_EPISODE_STEPS)
    (states, _, _, terminated, last_choice, last_x, kicks), _ = jax.lax.scan(step, carry, keys)
    ball, keeper = states.ball_position, states.goalie_position
    scored = jax.vmap(goal.in_net)(ball)
    caught = jax.vmap(goal.goalie_catches)(keeper, ball)
    end = jnp.where(~terminated, 3, jnp.where(scored, 0, jnp.where(caught, 1, 2))).astype(jnp.int32)
    shots = last_choice != 0
    return Episode(end, last_choice, last_x, start_y, kicks - (~shots).astype(jnp.int32))


def seed_rows(seed: int | str, ep: Episode) -> list[list[str]]:
    """One row per end: its share of the seed's episodes and what preceded it."""
    rows = []
    for index, name in enumerate(ENDS):
        mask = ep.end == index
        if not mask.any():
            rows.append([str(seed), name, "0.00", "—", "—", "—"])
            continue
        shot = mask & (ep.last_choice != 0)
        rows.append(
            [
                str(seed),
                name,
                f"{mask.mean():.2f}",
                f"{shot.sum() / mask.sum():.2f}",
                f"{np.median(ep.last_x[mask]):.1f}",
                f"{ep.kicks[mask].mean():.2f}",
            ]
        )
    return rows


def in_band(ep: Episode, low: float, high: float) -> np.ndarray:
    """The episodes whose start has low <= |y| < high."""
    return (np.abs(ep.start_y) >= low) & (np.abs(ep.start_y) < high)


def band_rates(ep: Episode) -> list[str]:
    """Success rate for starts in each |y| band."""
    rates = []
    for low, high in START_BANDS:
        mask = in_band(ep, low, high)
        rates.append(f"{(ep.end[mask] == 0).mean():.2f} ({mask.sum()})" if mask.any() else "—")
    return rates


def band_end_rows(ep: Episode) -> list[list[str]]:
    """For each start |y| band (all seeds pooled): each end's share, and the player's median x
    at the last action of the episodes that the goalie caught."""
    rows = []
    for low, high in START_BANDS:
        band = in_band(ep, low, high)
        shares = [f"{(ep.end[band] == index).mean():.2f}" for index in range(len(ENDS))]
        caught = band & (ep.end == 1)
        where = f"{np.median(ep.last_x[caught]):.1f}" if caught.any() else "—"
        rows.append([f"[{low:g}, {high:g})", *shares, where])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--episodes", type=int, default=1000, help="greedy episodes per seed")
    parser.add_argument("--out", type=Path, default=None, help="write the report here")
    args = parser.parse_args()
    end_rows, band_rows = [], []
    pooled: list[Episode] = []
    for seed in resumed_config(args.run_dir).seeds:
        policy = load_policy(args.run_dir, seed)
        if policy.spec.name != goal.NAME:
            parser.error(f"{args.run_dir} trained on {policy.spec.name}, not {goal.NAME}")
        ep = jax.device_get(
            jax.jit(lambda k, p=policy: play(p, args.episodes, k))(jax.random.PRNGKey(seed))
        )
        pooled.append(ep)
        end_rows += seed_rows(seed, ep)
        band_rows.append([str(seed), f"{(ep.end == 0).mean():.2f}", *band_rates(ep)])
    everything = Episode(*(np.concatenate(parts) for parts in zip(*pooled, strict=True)))
    end_rows += seed_rows("all", everything)
    band_rows.append(["all", f"{(everything.end == 0).mean():.2f}", *band_rates(everything)])
    bands = [
        f"start \\|y\\| in [{low:g}, {high:g}): success (episodes)" for low, high in START_BANDS
    ]
    text = (
        f"# Where HyAR's greedy Goal episodes end\n\n"
        f"`python benchmarks/goal_episodes.py {args.run_dir} --episodes {args.episodes}` on "
        f"{machine()}: the run's latest checkpoint, {args.episodes} greedy episodes per seed.\n\n"
        + markdown_table(
            [
                "seed",
                "end",
                "share of episodes",
                "of them after a shot",
                "player x at the last action (median)",
                "kick-to actions before the last (mean)",
            ],
            end_rows,
        )
        + "\n\n"
        + markdown_table(["seed", "success", *bands], band_rows)
        + "\n\n"
        + markdown_table(
            [
                "start \\|y\\| (all seeds)",
                *ENDS,
                "player x at the last action before a catch (median)",
            ],
            band_end_rows(everything),
        )
        + "\n"
    )
    write_report(text, args.out)


if __name__ == "__main__":
    main()
