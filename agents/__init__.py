"""Algorithms, one module each. `REGISTRY` maps the CLI's `agent=<name>` to (config class, factory,
metrics shown live); `jaxrl.cli`, `jaxrl.loop` and `jaxrl.policy` are the only places that look
agents up.

Entries name their module instead of importing it: an agent module pulls in JAX and its own
machinery, so listing names imports nothing, checking settings imports only `agents/configs.py`
(no JAX), and a run imports only its agent.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class AgentEntry:
    module: str  # imported on the first use of `make`
    config_name: str  # in `agents/configs.py`
    make_name: str
    progress_metrics: tuple[str, ...]  # shown in the live display beside env steps and eval return
    # make(cfg, env, total_env_steps=budget) when True: agents that anneal over the run's budget.
    takes_budget: bool = False

    @property
    def config(self) -> type:
        """The agent's config dataclass (from `agents.configs`, which imports no JAX)."""
        return getattr(importlib.import_module("agents.configs"), self.config_name)

    @property
    def make(self) -> Callable[..., Any]:
        """The agent's factory (imports its module)."""
        return getattr(importlib.import_module(self.module), self.make_name)

    def build(self, agent_cfg: Any, env: Any, total_env_steps: float) -> Any:
        """The agent of `agent_cfg` on `env`; the run's budget reaches the agents that anneal
        over it."""
        budget = {"total_env_steps": total_env_steps} if self.takes_budget else {}
        return self.make(agent_cfg, env, **budget)


REGISTRY: dict[str, AgentEntry] = {
    "es": AgentEntry("agents.es", "ESConfig", "make_es", ("fitness_mean", "fitness_max")),
    "ppo": AgentEntry(
        "agents.ppo", "PPOConfig", "make_ppo", ("episode_return",), takes_budget=True
    ),
    "a2c": AgentEntry(
        "agents.a2c", "A2CConfig", "make_a2c", ("episode_return",), takes_budget=True
    ),
    "reinforce": AgentEntry(
        "agents.reinforce",
        "REINFORCEConfig",
        "make_reinforce",
        ("episode_return",),
        takes_budget=True,
    ),
    "dqn": AgentEntry(
        "agents.dqn",
        "DQNConfig",
        "make_dqn",
        ("episode_return", "loss"),
        takes_budget=True,
    ),
    "td3": AgentEntry(
        "agents.td3", "TD3Config", "make_td3", ("episode_return", "critic_loss"), takes_budget=True
    ),
    "ddpg": AgentEntry(
        "agents.ddpg",
        "DDPGConfig",
        "make_ddpg",
        ("episode_return", "critic_loss"),
        takes_budget=True,
    ),
    "sac": AgentEntry(
        "agents.sac", "SACConfig", "make_sac", ("episode_return", "alpha"), takes_budget=True
    ),
    "erl": AgentEntry("agents.erl", "ERLConfig", "make_erl", ("fitness_max", "rl_return")),
    "option_critic": AgentEntry(
        "agents.option_critic",
        "OptionCriticConfig",
        "make_option_critic",
        ("episode_length", "option_duration"),
    ),
    "ppoc": AgentEntry(
        "agents.ppoc",
        "PPOCConfig",
        "make_ppoc",
        ("episode_return", "option_duration"),
        takes_budget=True,
    ),
    "bc": AgentEntry("agents.bc", "BCConfig", "make_bc", ("dataset_size", "loss")),
    "dagger": AgentEntry(
        "agents.dagger", "DAggerConfig", "make_dagger", ("expert_share", "dataset_size")
    ),
    "aggrevated": AgentEntry(
        "agents.aggrevated", "AggreVaTeDConfig", "make_aggrevated", ("expert_share", "loss")
    ),
    "pdqn": AgentEntry(
        "agents.pdqn", "PDQNConfig", "make_pdqn", ("episode_return", "loss"), takes_budget=True
    ),
    "paddpg": AgentEntry(
        "agents.paddpg",
        "PADDPGConfig",
        "make_paddpg",
        ("episode_return", "critic_loss"),
        takes_budget=True,
    ),
    "hyar": AgentEntry(
        "agents.hyar",
        "HyARConfig",
        "make_hyar",
        ("episode_return", "critic_loss"),
        takes_budget=True,
    ),
}
