"""Algorithms, one module each. `REGISTRY` maps the CLI's `agent=<name>` to (config class, factory,
metrics shown live); `jaxrl.loop` and `jaxrl.run` are the only places that look agents up."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from agents.a2c import A2CConfig, make_a2c
from agents.es import ESConfig, make_es
from agents.ppo import PPOConfig, make_ppo
from agents.reinforce import REINFORCEConfig, make_reinforce


class AgentEntry(NamedTuple):
    config: type
    make: Callable[..., Any]
    progress_metrics: tuple[str, ...]  # shown in the live display beside env steps and eval return
    # make(cfg, env, total_env_steps=budget) when True: agents that anneal over the run's budget.
    takes_budget: bool = False
    num_envs: int = 1  # the env batch per seed when `env.num_envs` is not given


REGISTRY: dict[str, AgentEntry] = {
    "es": AgentEntry(ESConfig, make_es, ("fitness_mean", "fitness_max")),
    # PureJaxRL's CartPole setting for PPO (4 envs); 8 for A2C; 8 episodes per REINFORCE update.
    "ppo": AgentEntry(PPOConfig, make_ppo, ("episode_return",), takes_budget=True, num_envs=4),
    "a2c": AgentEntry(A2CConfig, make_a2c, ("episode_return",), takes_budget=True, num_envs=8),
    "reinforce": AgentEntry(
        REINFORCEConfig, make_reinforce, ("episode_return",), takes_budget=True, num_envs=8
    ),
}
