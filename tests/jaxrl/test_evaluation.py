"""`python -m jaxrl.evaluate` and `jaxrl.evaluate`: a run directory's policies scored on fresh
episodes, every run on the same ones."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest
from cli_helpers import QUICK_PPO, pythonpath

import envs
import jaxrl
from jaxrl.checkpoint import saved_meta, saved_steps
from jaxrl.cli import resumed_config
from jaxrl.config import ConfigError
from jaxrl.env import Env
from jaxrl.evaluation import Request, parse
from jaxrl.prng import make_key
from jaxrl.rollout import Episodes, run_episodes

EPISODES = 6
CARTPOLE_LIMIT = 500  # CartPole-v1's time limit


def evaluate_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": pythonpath()}
    return subprocess.run(
        [sys.executable, "-m", "jaxrl.evaluate", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def play(env: Env, policy: jaxrl.Policy, key: jax.Array, deterministic: bool = True) -> Episodes:
    """The policy's episodes, one per env, stepped by hand."""
    act = lambda obs, k: policy.agent.act(policy.agent_state, obs, k, deterministic)
    return jax.jit(lambda k: run_episodes(env, act, k))(key)


@pytest.fixture(scope="module")
def grid_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """PPO on CartPole, 2 learning rates × 2 seeds, trained to returns that vary from episode to
    episode (~100-300), with a checkpoint at every evaluation."""
    run_dir = tmp_path_factory.mktemp("evaluate") / "grid"
    jaxrl.train(
        *QUICK_PPO,
        "budget.env_steps=12800",
        "grid.agent.learning_rate=[1e-3,3e-4]",
        "num_seeds=2",
        "eval.every=25",
        "checkpoint.every=1",
        "checkpoint.min_seconds=0",
        "log.progress=false",
        run_dir=run_dir,
    )
    return run_dir


def test_parse_refuses_bad_input_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    run = str(tmp_path)
    refused = {
        (): "give one run directory (got none)",
        (run, run): f"give one run directory (got {run} {run})",
        (run, "episods=3"): "unknown option 'episods'; did you mean episodes? valid: episodes,",
        (run, "episodes=x"): "episodes=x must be a whole number",
        (run, "episodes=0"): "episodes=0 must be >= 1",
        (run, "seed=1", "seed=2"): "'seed' is given twice",
        (run, "eval_seed=-1"): "eval_seed=-1 must be in 0 … 4294967295",
        (run, "deterministic=maybe"): "deterministic=maybe must be true or false",
        (run, "out=/nowhere/x.json"): "out=/nowhere/x.json: the folder /nowhere does not exist",
        (str(tmp_path / "none"),): "none: no config.json there (is it a jaxrl run directory?)",
        (run, "env.num_envs=3"): "env.num_envs=3: an evaluation plays the run's env (env.num_envs "
        "stays the run's; episodes= sets the number of envs)",
        (run, "+env.id=Pendulum-v1"): "+env.id=Pendulum-v1: an evaluation plays the run's env",
    }
    for argv, message in refused.items():
        with pytest.raises(ConfigError) as caught:
            parse(list(argv))
        assert message in str(caught.value), argv
        assert "\n" not in str(caught.value)
    request = parse(
        [run, "episodes=7", "seed=3", "grid_point=1", "checkpoint=9", "out=r.json", "eval_seed=4"]
    )
    assert request == Request(Path(run), 7, 3, 1, 9, 4, Path("r.json"), deterministic=True)
    assert not parse([run, "deterministic=False"]).deterministic
    options = ("env.max_episode_steps=50", "+env.kwargs.g=1")
    assert parse([run, *options]).env_options == options


def test_cli_scores_every_run_on_the_same_episodes_and_writes_json(
    grid_run: Path, tmp_path: Path
) -> None:
    """Each run's returns are those of its own policy (`jaxrl.load`) played by hand on
    CartPole with the evaluation's key; the time-limit flags are the episodes that reached 500;
    the table and the JSON agree."""
    out = tmp_path / "scores.json"
    done = evaluate_cli(str(grid_run), f"episodes={EPISODES}", f"out={out}")
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    summary = json.loads((grid_run / "summary.json").read_text())
    latest = saved_steps(grid_run / "checkpoints")[-1]
    assert report["checkpoint"] == latest and report["episodes"] == EPISODES
    runs = report["runs"]
    assert [(r["grid_point"], r["seed"]) for r in runs] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert [r["values"]["learning_rate"] for r in runs] == pytest.approx([1e-3, 1e-3, 3e-4, 3e-4])
    assert [r["env_steps"] for r in runs] == [row["env_steps"] for row in summary["runs"]]

    env = envs.make(resumed_config(str(grid_run)).env, EPISODES)
    for row in runs:
        policy = jaxrl.load(grid_run, seed=row["seed"], grid_point=row["grid_point"])
        by_hand = jax.device_get(play(env, policy, make_key(0)))
        np.testing.assert_array_equal(row["returns"], by_hand.returns)
        returns, lengths = np.asarray(row["returns"]), np.asarray(row["lengths"])
        np.testing.assert_array_equal(row["truncated"], lengths == CARTPOLE_LIMIT)
        assert row["return_mean"] == pytest.approx(returns.mean())
        assert row["return_median"] == pytest.approx(np.median(returns))
        assert row["truncated_share"] == pytest.approx((lengths == CARTPOLE_LIMIT).mean())
    assert len({tuple(r["returns"]) for r in runs}) > 1  # four policies, not one
    assert report["mean_return"] == pytest.approx(np.mean([r["return_mean"] for r in runs]))

    table = done.stdout.splitlines()
    assert table[0].split() == [
        "seed", "grid", "point", "env", "steps", "mean", "±", "std", "median", "min", "max",
        "length", "time", "limit",
    ]  # fmt: skip
    assert table[1].split()[:2] == ["0", "learning_rate=0.001"]
    assert f"checkpoint {latest}: mean return" in table[5]
    assert f"over {EPISODES} episodes × 4 runs (eval_seed=0)" in table[5]
    assert table[6] == f"written: {out}"


def test_api_picks_runs_checkpoints_and_episodes(grid_run: Path) -> None:
    """A run alone scores as it does among all (its episodes do not depend on the others'), an
    older checkpoint is that checkpoint's (its env steps as saved), and another `eval_seed`
    draws other episodes."""
    everything = jaxrl.evaluate(grid_run, episodes=EPISODES)
    alone = jaxrl.evaluate(grid_run, episodes=EPISODES, seed=1, grid_point=1)
    assert [(r.grid_point, r.seed) for r in alone.runs] == [(1, 1)]
    np.testing.assert_array_equal(alone.runs[0].returns, everything.runs[3].returns)

    steps = saved_steps(grid_run / "checkpoints")
    assert len(steps) >= 2
    older = jaxrl.evaluate(grid_run, episodes=EPISODES, checkpoint=steps[0], seed=0)
    trained = saved_meta(grid_run / "checkpoints", steps[0])["progress"]["env_steps"]
    assert older.checkpoint == steps[0]
    assert [r.env_steps for r in older.runs] == [trained[0], trained[2]]
    assert older.runs[0].env_steps < everything.runs[0].env_steps

    # Acting as the agent explores: PPO's sampled actions, drawn from the evaluation's key.
    sampled = jaxrl.evaluate(grid_run, episodes=EPISODES, seed=1, grid_point=1, deterministic=False)
    env = envs.make(resumed_config(str(grid_run)).env, EPISODES)
    policy = jaxrl.load(grid_run, seed=1, grid_point=1)
    by_hand = jax.device_get(play(env, policy, make_key(0), deterministic=False))
    np.testing.assert_array_equal(sampled.runs[0].returns, by_hand.returns)
    assert not np.array_equal(sampled.runs[0].returns, alone.runs[0].returns)
    assert "(eval_seed=0, stochastic)" in sampled.report()

    # Another time limit: the same episodes, cut at step 50 (an episode that ends there on its
    # own is terminated, not truncated).
    cut = jaxrl.evaluate(grid_run, episodes=EPISODES, env_options=("env.max_episode_steps=50",))
    for short, full in zip(cut.runs, everything.runs, strict=True):
        np.testing.assert_array_equal(short.returns, np.minimum(full.returns, 50))
        np.testing.assert_array_equal(short.truncated, full.returns > 50)
    assert any(run.truncated.any() for run in cut.runs)
    assert "(eval_seed=0, env.max_episode_steps=50)" in cut.report()

    again = jaxrl.evaluate(grid_run, episodes=EPISODES)
    other = jaxrl.evaluate(grid_run, episodes=EPISODES, eval_seed=1)
    for same, first in zip(again.runs, everything.runs, strict=True):
        np.testing.assert_array_equal(same.returns, first.returns)  # deterministic
    assert any(
        not np.array_equal(first.returns, second.returns)
        for first, second in zip(everything.runs, other.runs, strict=True)
    )


def test_cli_refuses_what_the_run_does_not_hold_in_one_line(grid_run: Path) -> None:
    saved = ", ".join(map(str, saved_steps(grid_run / "checkpoints")))
    refused = {
        ("seed=5",): f"error: seed 5 was not trained in {grid_run}; its seeds are [0, 1]",
        ("grid_point=2",): f"error: grid_point 2 is not one of {grid_run}'s: 0 to 1 "
        "(summary.json lists their values)",
        ("checkpoint=1",): f"error: checkpoint=1 is not saved in {grid_run}; saved: {saved}",
    }
    for args, message in refused.items():
        done = evaluate_cli(str(grid_run), *args)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.splitlines() == [message]


def test_host_env_runs_each_play_their_own_pool_of_the_same_episodes(tmp_path: Path) -> None:
    """Through the host bridge (Gymnasium's CartPole) every run steps a pool of its own, reset
    with the same seed: two seeds' runs score as each does alone."""
    run_dir = tmp_path / "gym"
    jaxrl.train(
        *QUICK_PPO,
        "env=gym/CartPole-v1",
        "budget.env_steps=256",
        "num_seeds=2",
        "log.progress=false",
        run_dir=run_dir,
    )
    both = jaxrl.evaluate(run_dir, episodes=4)
    first = jaxrl.evaluate(run_dir, episodes=4, seed=0)
    np.testing.assert_array_equal(first.runs[0].returns, both.runs[0].returns)
    for run in both.runs:
        np.testing.assert_array_equal(run.truncated, run.lengths == CARTPOLE_LIMIT)
        np.testing.assert_array_equal(run.returns, run.lengths)  # reward 1 per step


def test_ctrl_c_stops_at_once_in_one_line(grid_run: Path) -> None:
    """Nothing is written until the end, so a Ctrl-C (here while JAX loads) ends it at once."""
    env = {**os.environ, "PYTHONPATH": pythonpath()}
    proc = subprocess.Popen(
        [sys.executable, "-m", "jaxrl.evaluate", str(grid_run)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert stderr.splitlines() == ["interrupted: nothing was written"] and stdout == ""


def test_option_critic_on_four_rooms_deterministic_and_on_its_own_spaces(tmp_path: Path) -> None:
    """The deep option-critic's evaluation carries its options (`act_with_memory`), which have no
    sampled form: `deterministic=false` is refused in one line; so are env options that change
    the observations it was trained on. Four-rooms pays 1 at the goal, which ends the episode:
    an episode that scores nothing is one the time limit cut."""
    run_dir = tmp_path / "oc"
    jaxrl.train(
        "agent=option_critic",
        "agent.network=deep",
        "env=FourRooms-v0",
        "budget.env_steps=500",
        "log.progress=false",
        run_dir=run_dir,
    )
    with pytest.raises(ConfigError, match=r"^deterministic=false: option_critic is evaluated with"):
        jaxrl.evaluate(run_dir, episodes=2, deterministic=False)
    with pytest.raises(ConfigError) as caught:
        jaxrl.evaluate(run_dir, episodes=2, env_options=("env.observation=grid",))
    assert str(caught.value) == (
        "the env with env.observation=grid: its observation_space Box of shape (13, 13, 3) "
        "(float32 in [0, 1]) is not this run's Box of shape (104,) (float32 in [0, 1])"
    )
    scores = jaxrl.evaluate(run_dir, episodes=8, env_options=("env.slip_prob=0",))
    run = scores.runs[0]
    np.testing.assert_array_equal(run.truncated, run.returns == 0)
    np.testing.assert_array_equal(run.lengths[run.truncated], 1000)


def test_envs_that_report_success_get_its_rate(hyar_platform_run) -> None:
    """Platform reports whether the player reached the goal: each run's success rate is the
    share of its episodes that did, and the table gains a success column. (HyAR's learning run,
    trained once for the suite.)"""
    scores = jaxrl.evaluate(hyar_platform_run.run_dir, episodes=8)
    assert len(scores.runs) == 4
    for run in scores.runs:
        assert run.successes is not None
        assert run.summary()["success_rate"] == pytest.approx(run.successes.mean())
        assert np.all(run.returns[run.successes] >= 0.95)  # the goal is the end of the level
    assert any(run.successes.any() for run in scores.runs)
    assert scores.report().splitlines()[0].split()[-1] == "success"
