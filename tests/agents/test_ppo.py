"""PPO learns CartPole-v1 and Pendulum-v1 on budgets a 2-core CPU affords, through the same
Python API as the CLI; seeds are vmapped and summarised by `jaxrl.sweep`."""

from __future__ import annotations

import numpy as np
import pytest
from learning import assert_mean_at_least

import jaxrl
from agents.ppo import PPOConfig
from jaxrl.cli import compose
from jaxrl.sweep import summarize

QUIET = ("log.progress=false", "log.tensorboard=false")


def test_yaml_composes_onto_the_schema():
    cfg = compose(["agent=ppo", "agent.clip_eps=0.1", "env.num_envs=4"])
    assert isinstance(cfg.agent, PPOConfig)
    assert (cfg.agent.num_steps, cfg.agent.num_minibatches, cfg.agent.update_epochs) == (128, 4, 4)
    assert cfg.agent.clip_eps == 0.1 and cfg.env.num_envs == 4


def test_ppo_solves_cartpole_four_seeds(tmp_path):
    """PureJaxRL's configuration (4 envs x 128 steps, 4 minibatches, 4 epochs) on 100k steps,
    4 seeds in one program, written with keyword arguments and a progress callback. Threshold:
    mean 400, below every seed measured (benchmarks/results/learning_tests.md)."""
    seen = []
    result = jaxrl.train(
        agent="ppo",
        env={"id": "CartPole-v1", "num_envs": 4},
        num_seeds=4,
        budget={"env_steps": 100000},
        eval={"every": 20},
        log={"progress": False, "tensorboard": False},
        run_dir=tmp_path,
        progress_fn=seen.append,
    )
    summary = result.summary
    assert result.status == "completed"
    assert [s["seed"] for s in summary["runs"]] == [0, 1, 2, 3]
    assert_mean_at_least(summary, 400)
    # 100k steps / 512 per iteration: 196 iterations, an evaluation every 20 and at the end
    assert [p["iteration"] for p in seen] == [*range(20, 196, 20), 196]
    assert seen[-1]["eval_returns"] == [r["final_eval_return"] for r in summary["runs"]]
    assert seen[-1]["env_steps"] == summary["env_steps"] == 196 * 512
    [point] = summarize(tmp_path)
    assert point.curves.returns.shape[0] == 4 and (tmp_path / "sweep.png").exists()


@pytest.mark.slow
def test_ppo_pendulum_tanh_squashed(tmp_path):
    """SB3 zoo-like settings (gamma 0.9, lr 1e-3, 10 epochs) with a tanh-squashed Gaussian head,
    2 seeds, 200k env steps. Threshold: mean −250, well below both seeds measured
    (benchmarks/results/learning_tests.md)."""
    result = jaxrl.train(
        "agent=ppo",
        "env=Pendulum-v1",
        "num_seeds=2",
        "env.num_envs=8",
        "agent.num_steps=256",
        "agent.num_minibatches=8",
        "agent.update_epochs=10",
        "agent.gamma=0.9",
        "agent.learning_rate=1e-3",
        "agent.ent_coef=0.0",
        "agent.squash_actions=true",
        "budget.env_steps=200000",
        "eval.every=10",
        "eval.episodes=32",
        *QUIET,
        run_dir=tmp_path,
    )
    assert_mean_at_least(result.summary, -250)


def test_loaded_policy_acts_on_one_observation_or_a_batch(tmp_path):
    jaxrl.train(
        "agent=ppo",
        "env=CartPole-v1",
        "budget.env_steps=256",
        "eval.every=1",
        "agent.num_steps=64",
        *QUIET,
        run_dir=tmp_path,
    )
    policy = jaxrl.load(tmp_path)
    assert policy(np.zeros(4)).shape == ()
    assert policy(np.zeros((3, 4))).shape == (3,)


@pytest.mark.slow
def test_ppo_on_a_brax_env_beats_a_random_policy(tmp_path):
    """brax/inverted_pendulum (spring backend, 200-step cap): a random policy drops the pole
    within a few dozen steps; PPO must hold it far longer after 60k env steps. 4 seeds in one
    program. Threshold: mean 120 and 3x random, below the mean measured
    (benchmarks/results/learning_tests.md)."""
    pytest.importorskip("brax")
    import jax

    import envs
    from jaxrl.env import random_actions
    from jaxrl.prng import make_key
    from jaxrl.rollout import run_episodes

    env_overrides = (
        "env=brax/inverted_pendulum",
        "env.backend=spring",
        "env.max_episode_steps=200",
        "env.num_envs=16",
    )
    result = jaxrl.train(
        "agent=ppo", *env_overrides, "agent.num_steps=32", "num_seeds=4",
        "budget.env_steps=6e4", "eval.every=20", *QUIET, run_dir=tmp_path,
    )  # fmt: skip
    env = envs.make(compose(["agent=ppo", *env_overrides]).env, num_envs=16)
    random_returns = jax.jit(
        lambda key: run_episodes(env, lambda obs, k: random_actions(env.spec, k), key).returns
    )(make_key(0))
    random_mean = float(np.mean(random_returns))
    assert random_mean < 60, random_mean
    assert_mean_at_least(result.summary, max(120.0, 3 * random_mean))
