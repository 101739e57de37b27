"""Where a trained Platform policy's greedy episodes end, action by action: why a seed's success
rate swings between evaluations while its return barely moves (benchmarks/results/hybrid.md).

Loads a run's latest checkpoint (`jaxrl.load`), then for one seed plays `--episodes` greedy
episodes of `Platform-v0` with the policy's actor and, for agents with a target actor (HyAR,
PA-DDPG: `jaxrl.deterministic`), with the Polyak-averaged target actor in its place. Prints
each episode's actions as `choice(parameter)@x/speed` (the player's x and horizontal speed when
the action starts) and where it ended, then each actor's success rate and mean return over
`--rate-episodes` episodes.

    python benchmarks/platform_episodes.py <run dir> --seed 4
"""

from __future__ import annotations

import argparse
from typing import Any

import jax
import numpy as np

from envs import make as make_env
from envs import platform
from jaxrl.config import EnvConfig
from jaxrl.policy import Policy, load_policy
from jaxrl.rollout import run_episodes


def with_target_actor(policy: Policy) -> Any | None:
    """The policy's agent state acting with its target actor, or None when it has none."""
    state = policy.agent_state
    learner = getattr(state, "learner", None)
    td3 = getattr(learner, "td3", learner)
    if not hasattr(td3, "target_actor_params"):
        return None
    td3 = td3._replace(actor_params=td3.target_actor_params)
    learner = learner._replace(td3=td3) if hasattr(learner, "td3") else td3
    return state._replace(learner=learner)


def episode_line(policy: Policy, agent_state: Any, key: jax.Array) -> str:
    """One greedy episode, played step by step on the host so each action can be printed."""
    state, obs = platform.reset(key)
    actions = []
    for _ in range(platform.MAX_EPISODE_STEPS):
        key, act_key, step_key = jax.random.split(key, 3)
        choice, parameters = policy.agent.act(agent_state, obs[None], act_key, True)
        choice, parameter = int(choice[0]), float(parameters[0][int(choice[0])])
        x, speed = float(state.position[0]), float(state.velocity[0])
        actions.append(f"{platform.ACTIONS[choice]}({parameter:.0f})@{x:.0f}/{speed:.0f}")
        state, obs, _, terminated = platform.step(step_key, state, (choice, parameters[0]))
        if terminated:
            break
    end = "goal" if bool(platform.success(state)) else f"fell or hit at x={state.position[0]:.0f}"
    return f"{end}: {' '.join(actions)}"


def rates(policy: Policy, agent_state: Any, episodes: int, seed: int) -> tuple[float, float]:
    """Success rate and mean return of `episodes` greedy episodes, one per env, run as the
    training loop's evaluation runs them (`jaxrl.rollout.run_episodes`)."""
    env = make_env(EnvConfig(id=platform.NAME), episodes)
    act = lambda obs, key: policy.agent.act(agent_state, obs, key, True)
    result = jax.jit(lambda key: run_episodes(env, act, key))(jax.random.PRNGKey(seed))
    return float(np.mean(result.successes)), float(np.mean(result.returns))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--seed", type=int, default=None, help="which of the run's seeds")
    parser.add_argument("--episodes", type=int, default=3, help="episodes printed per actor")
    parser.add_argument("--rate-episodes", type=int, default=50)
    args = parser.parse_args()
    policy = load_policy(args.run_dir, args.seed)
    if policy.spec.name != platform.NAME:
        parser.error(f"{args.run_dir} trained on {policy.spec.name}, not {platform.NAME}")
    actors = {"actor": policy.agent_state, "target actor": with_target_actor(policy)}
    for name, agent_state in actors.items():
        if agent_state is None:
            continue
        for episode in range(args.episodes):
            line = episode_line(policy, agent_state, jax.random.PRNGKey(episode))
            print(f"{name}, episode {episode}: {line}")
        success, mean_return = rates(policy, agent_state, args.rate_episodes, policy.seed)
        print(f"{name}: success {success:.2f}, mean return {mean_return:.3f}", end=" ")
        print(f"over {args.rate_episodes} episodes")


if __name__ == "__main__":
    main()
