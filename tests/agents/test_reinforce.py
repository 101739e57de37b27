"""REINFORCE (whole episodes, reward-to-go, learned baseline) learns CartPole-v1; an action head
it cannot use is refused by the CLI before anything compiles."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from learning import assert_mean_at_least

import jaxrl
from agents.reinforce import REINFORCEConfig
from jaxrl.cli import compose

REPO = Path(__file__).resolve().parents[2]


def test_yaml_follows_the_reference_experiment():
    cfg = compose(["agent=reinforce"])
    assert isinstance(cfg.agent, REINFORCEConfig)
    assert cfg.agent.hidden_sizes == (128,) and cfg.agent.learning_rate == 1e-2
    assert cfg.agent.normalize_advantages and cfg.agent.gamma == 0.99


def test_reinforce_learns_cartpole(tmp_path):
    """4 seeds in one program, 250k env steps each (8 envs). Threshold: mean 300, well below the
    mean measured (benchmarks/results/learning_tests.md)."""
    result = jaxrl.train(
        "agent=reinforce",
        "env=CartPole-v1",
        "env.num_envs=8",
        "num_seeds=4",
        "budget.env_steps=250000",
        "eval.every=10",
        "log.progress=false",
        "log.tensorboard=false",
        run_dir=tmp_path,
    )
    assert result.status == "completed"
    assert_mean_at_least(result.summary, 300)


def test_cli_refuses_squashing_discrete_actions(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "jaxrl.run",
            "agent=reinforce",
            "env=CartPole-v1",
            "agent.squash_actions=true",
            f"log.dir={tmp_path}",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert out.returncode == 2, out.stderr
    assert "squash_actions=true applies to Box action spaces" in out.stderr
    assert "Traceback" not in out.stderr


def test_reinforce_learns_on_a_host_pool(tmp_path):
    """The episodic path on a host env: a host pool cannot freeze finished envs, so each
    iteration restarts its episodes. 30k steps of gym/CartPole-v1 (8 envs), 4 seeds; a random
    policy scores about 22. Threshold: mean 120, well below the mean measured
    (benchmarks/results/learning_tests.md)."""
    result = jaxrl.train(
        "agent=reinforce",
        "env=gym/CartPole-v1",
        "num_seeds=4",
        "budget.env_steps=30000",
        "log.progress=false",
        "log.tensorboard=false",
        run_dir=tmp_path,
    )
    assert result.status == "completed"
    assert_mean_at_least(result.summary, 120)
