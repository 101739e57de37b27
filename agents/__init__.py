"""Algorithms, one module each. `REGISTRY` maps the CLI's `agent=<name>` to (config class, factory,
metrics shown live); `jaxrl.loop` and `jaxrl.run` are the only places that look agents up."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from agents.a2c import A2CConfig, make_a2c
from agents.ddpg import DDPGConfig, make_ddpg
from agents.dqn import DQNConfig, make_dqn
from agents.erl import ERLConfig, make_erl
from agents.es import ESConfig, make_es
from agents.ppo import PPOConfig, make_ppo
from agents.reinforce import REINFORCEConfig, make_reinforce
from agents.sac import SACConfig, make_sac
from agents.td3 import TD3Config, make_td3


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
    # 4 envs × train_freq 64: the 256 env steps per round of the Zoo's CartPole setting.
    "dqn": AgentEntry(
        DQNConfig, make_dqn, ("episode_return", "loss"), takes_budget=True, num_envs=4
    ),
    # One env per seed, as in the papers and the Zoo's Pendulum settings.
    "td3": AgentEntry(TD3Config, make_td3, ("episode_return", "critic_loss")),
    "ddpg": AgentEntry(DDPGConfig, make_ddpg, ("episode_return", "critic_loss")),
    "sac": AgentEntry(SACConfig, make_sac, ("episode_return", "alpha")),
    # ERL sizes its own env batch from its population (members x episodes + the learner's).
    "erl": AgentEntry(ERLConfig, make_erl, ("fitness_max", "rl_return")),
}
