"""How a learning test judges a run: several seeds trained in one program, never one seed.

XLA:CPU rounds differently on AMD EPYC and Intel Xeon machines and RL amplifies the last bit
(a test passing on one failed on the other), so a learning test trains `num_seeds` seeds in one
compiled program and asserts the mean over seeds of a return, against a threshold well below
what was measured: the per-seed values and machines are in benchmarks/results/learning_tests.md.
"""

from __future__ import annotations

import numpy as np

# The off-policy agents' Pendulum recipe (tests of SAC, TD3, DDPG): 64-64 networks, Adam 1e-3,
# 1,000 random warm-up steps, a buffer of all 20k steps, 2 seeds in one program.
PENDULUM_OFF_POLICY_20K = (
    "env=Pendulum-v1",
    "num_seeds=2",
    "agent.hidden_sizes=[64,64]",
    "agent.actor_lr=1e-3",
    "agent.critic_lr=1e-3",
    "agent.learning_starts=1000",
    "agent.buffer_size=20000",
    "budget.env_steps=20000",
    "eval.every=20",
)
# The Pendulum SAC expert of the imitation tests (conftest.pendulum_sac_expert, also test_sac's
# learning run), of benchmarks/imitation.py and of notebooks/04_imitation.ipynb.
PENDULUM_SAC_EXPERT = (
    "agent=sac",
    *PENDULUM_OFF_POLICY_20K,
    "log.progress=false",
    "log.tensorboard=false",
)

# HyAR on Platform at a CPU's budget (conftest.hyar_platform_run: test_hyar's learning run, handed
# to notebooks/06_hybrid_actions.ipynb, which trains the same when run on its own): 64-unit
# networks and a 2,000-step warm-up instead of the reference's 256 units and ~11,000 steps; 4
# seeds, which spread 2 per core over 2 cores (3 would share one device and run slower:
# benchmarks/results/learning_tests.md).
HYAR_PLATFORM = (
    "agent=hyar",
    "env=Platform-v0",
    "num_seeds=4",
    "budget.env_steps=30000",
    "agent.hidden_sizes=[64,64]",
    "agent.vae_hidden_size=64",
    "agent.learning_starts=2000",
    "eval.every=3",
    "eval.episodes=20",
    "log.progress=false",
    "log.tensorboard=false",
)


def seed_values(summary: dict, key: str = "final_eval_return") -> np.ndarray:
    """`key` of every seed's row of a run's summary."""
    return np.array([row[key] for row in summary["runs"]], dtype=np.float64)


def assert_mean_at_least(summary: dict, threshold: float, key: str = "final_eval_return") -> None:
    """The mean over seeds of `key` reaches `threshold`; the message lists every seed."""
    values = seed_values(summary, key)
    assert len(values) >= 2, f"a learning test trains several seeds, got {len(values)}"
    assert values.mean() >= threshold, (
        f"mean {key} over seeds {values.mean():.1f} < {threshold}: per seed {values.tolist()}"
    )


def random_policy_return(env_id: str, episodes: int = 64) -> float:
    """The mean return of uniformly random actions over `episodes` episodes (one per env of a
    batch): the zero of a normalised score."""
    import envs
    from jaxrl.config import EnvConfig
    from jaxrl.env import random_actions
    from jaxrl.prng import make_key
    from jaxrl.rollout import run_episodes

    env = envs.make(EnvConfig(env_id), num_envs=episodes)
    episodes_run = run_episodes(env, lambda obs, key: random_actions(env.spec, key), make_key(0))
    return float(episodes_run.returns.mean())


def normalized_scores(summary: dict, expert: float, random: float) -> np.ndarray:
    """Each seed's final evaluation as (R − R_random) / (R_expert − R_random): 1 is the expert."""
    return (seed_values(summary) - random) / (expert - random)
