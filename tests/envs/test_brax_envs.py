"""The Brax family behind our batched functional Env.

Brax compiles slowly on CPU (tens of seconds per env), so the end-flag bookkeeping is checked
exactly on a scripted Brax env that compiles in milliseconds, against Brax's own EpisodeWrapper,
and the physics envs are compiled once per test module on the cheap `spring` backend.
"""

from __future__ import annotations

import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from envs.brax_envs import BraxEnv, make_brax
from envs.configs import BraxEnvConfig
from jaxrl.cli import compose
from jaxrl.config import ConfigError
from jaxrl.datatypes import Box, EnvSpec, TimeStep


def rollout(env, key: jax.Array, actions: jax.Array) -> TimeStep:
    """The TimeSteps of `env` driven by `actions` [T, B, ...], stacked on a leading time axis."""

    def body(state, inputs):
        action, k = inputs
        state, ts = env.step(state, action, k)
        return state, ts

    reset_key, loop_key = jax.random.split(key)
    state, _ = env.reset(reset_key)
    _, steps = jax.lax.scan(body, state, (actions, jax.random.split(loop_key, len(actions))))
    return steps


def hand_episode_stats(ts: TimeStep) -> tuple[np.ndarray, np.ndarray]:
    """Episode return and length at every step, summed by hand from rewards and end flags."""
    reward = np.asarray(ts.reward)
    done = np.asarray(ts.terminated | ts.truncated)
    returns, lengths = np.zeros_like(reward), np.zeros(reward.shape, np.int32)
    running, count = np.zeros(reward.shape[1]), np.zeros(reward.shape[1], np.int32)
    for t in range(len(reward)):
        running, count = running + reward[t], count + 1
        returns[t], lengths[t] = running, count
        running, count = np.where(done[t], 0.0, running), np.where(done[t], 0, count)
    return returns, lengths


# --- configuration: needs no Brax ---------------------------------------------------------------


def test_brax_names_are_registered_and_compose_with_a_backend():
    assert {"brax/hopper", "brax/halfcheetah", "brax/inverted_pendulum"} <= set(envs.registered())
    cfg = compose(["agent=es", "env=brax/hopper", "env.backend=positional"])
    assert isinstance(cfg.env, BraxEnvConfig)
    assert (cfg.env.id, cfg.env.backend) == ("brax/hopper", "positional")
    assert compose(["env=brax/walker2d"]).env.backend == "generalized"


def test_unknown_backend_is_a_config_error_naming_the_valid_ones():
    with pytest.raises(ConfigError, match=r"env\.backend='bullet'.*generalized, positional"):
        compose(["agent=es", "env=brax/hopper", "env.backend=bullet"])
    with pytest.raises(ConfigError, match=r"unknown config key 'env\.bogus'.*backend"):
        compose(["env=brax/hopper", "env.bogus=1"])


def test_without_brax_the_error_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr("envs.brax_envs.brax_available", lambda: False)
    with pytest.raises(ConfigError, match=r'pip install -e "\.\[brax\]"'):
        envs.make(BraxEnvConfig(id="brax/hopper"))


# --- end flags, auto-reset and statistics, exactly, on a scripted Brax env ----------------------


@pytest.fixture(scope="module")
def scripted():
    """A Brax Env whose episodes end where the actions say: obs = [steps so far, initial draw],
    reward = steps so far, terminated when action > 0."""
    pytest.importorskip("brax")
    from brax.envs.base import Env as BraxBaseEnv
    from brax.envs.base import State

    class Scripted(BraxBaseEnv):
        def reset(self, rng):
            x0 = jax.random.uniform(rng)
            return State(jnp.zeros(()), jnp.stack([0.0, x0]), jnp.zeros(()), jnp.zeros(()), {})

        def step(self, state, action):
            t = state.pipeline_state + 1
            obs = jnp.stack([t, state.obs[1]])
            return state.replace(pipeline_state=t, obs=obs, reward=t, done=(action[0] > 0) * 1.0)

        observation_size = 2
        action_size = 1
        backend = "scripted"

    return Scripted()


LIMIT = 5


@pytest.fixture(scope="module")
def scripted_run(scripted):
    """Four envs for 17 steps: 0 never terminates, 1 terminates at its 3rd step, 2 on the very
    step that reaches the limit (terminated, not truncated), 3 at random."""
    n, steps = 4, 17
    act = np.zeros((steps, n, 1), np.float32)
    act[2, 1, 0] = 1.0
    act[LIMIT - 1, 2, 0] = act[2 * LIMIT - 1, 2, 0] = 1.0
    act[:, 3, 0] = np.random.default_rng(0).random(steps) < 0.3
    spec = EnvSpec("scripted", "brax", Box(-np.inf, np.inf, (2,)), Box(-1, 1, (1,)), n, LIMIT)
    env = BraxEnv(scripted, spec)
    ts = jax.jit(lambda k, a: rollout(env, k, a))(jax.random.PRNGKey(0), jnp.asarray(act))
    return act, jax.device_get(ts)


def test_truncation_and_termination_match_brax_episode_wrapper(scripted, scripted_run):
    from brax.envs.wrappers import training

    act, ts = scripted_run
    wrapped = training.AutoResetWrapper(
        training.EpisodeWrapper(training.VmapWrapper(scripted), LIMIT, 1)
    )

    def brax_flags(actions):
        state = wrapped.reset(jax.random.split(jax.random.PRNGKey(0), actions.shape[1]))

        def body(state, action):
            state = wrapped.step(state, action)
            return state, (state.done, state.info["truncation"])

        return jax.lax.scan(body, state, actions)[1]

    done, truncation = jax.device_get(jax.jit(brax_flags)(jnp.asarray(act)))
    np.testing.assert_array_equal(ts.truncated, truncation > 0)
    np.testing.assert_array_equal(ts.terminated, (done > 0) & ~(truncation > 0))
    assert not np.any(ts.terminated & ts.truncated)
    # The scripted cases, spelled out.
    assert np.flatnonzero(ts.truncated[:, 0]).tolist() == [4, 9, 14]
    assert np.flatnonzero(ts.terminated[:, 1]).tolist() == [2]
    assert np.flatnonzero(ts.truncated[:, 1]).tolist() == [7, 12]
    assert np.flatnonzero(ts.terminated[:, 2]).tolist() == [4, 9]
    assert not ts.truncated[:10, 2].any()


def test_same_step_auto_reset_and_final_obs(scripted_run):
    _, ts = scripted_run
    done = ts.terminated | ts.truncated
    steps_in_episode = hand_episode_stats(ts)[1]
    # final_obs is the last observation of the episode; obs starts the next one where it ended.
    np.testing.assert_array_equal(ts.final_obs[..., 0], steps_in_episode)
    np.testing.assert_array_equal(ts.obs[..., 0], np.where(done, 0, steps_in_episode))
    np.testing.assert_array_equal(ts.obs[~done], ts.final_obs[~done])
    # Each episode keeps its initial draw; a new episode gets a fresh one (caches are redrawn
    # round-robin, every env's at least every REFRESH_PERIOD steps, here every 4).
    firsts = ts.obs[:, 0, 1][done[:, 0]]
    assert len(set(firsts.tolist())) == len(firsts) == 3
    np.testing.assert_array_equal(ts.final_obs[1:, :, 1], ts.obs[:-1, :, 1])


def test_episode_statistics_are_the_hand_sums(scripted_run):
    _, ts = scripted_run
    returns, lengths = hand_episode_stats(ts)
    done = ts.terminated | ts.truncated
    np.testing.assert_array_equal(ts.info["episode_done"], done)
    np.testing.assert_allclose(ts.info["episode_return"][done], returns[done])
    np.testing.assert_array_equal(ts.info["episode_length"][done], lengths[done])
    # Rewards are 1, 2, ... within an episode: a truncated one of LIMIT steps returns 15.
    assert ts.info["episode_return"][4, 0] == sum(range(1, LIMIT + 1))


# --- a real Brax env: hopper, compiled once ------------------------------------------------------

HOPPER_LIMIT = 30


@pytest.fixture(scope="module")
def hopper():
    """brax/hopper on `spring` for 70 steps: env 0 driven hard enough to fall, 1-3 passive."""
    pytest.importorskip("brax")
    env = make_brax("brax/hopper", 4, HOPPER_LIMIT, "spring")
    act = np.zeros((70, 4, 3), np.float32)
    act[:, 0] = -1.0  # full torque backwards on every joint: tips over in about 8 steps
    ts = jax.jit(lambda k, a: rollout(env, k, a))(jax.random.PRNGKey(1), jnp.asarray(act))
    return env, jax.device_get(ts)


def test_hopper_spec_and_shapes(hopper):
    env, ts = hopper
    spec = env.spec
    assert (spec.name, spec.family, spec.num_envs) == ("brax/hopper", "brax", 4)
    assert spec.observation_space.shape == (11,)  # Gymnasium's Hopper-v5 has 11 too
    assert isinstance(spec.action_space, Box) and spec.action_space.shape == (3,)
    np.testing.assert_array_equal(spec.action_space.low, -1.0)
    np.testing.assert_array_equal(spec.action_space.high, 1.0)
    assert spec.max_episode_steps == HOPPER_LIMIT
    assert ts.obs.shape == ts.final_obs.shape == (70, 4, 11)
    assert ts.reward.shape == ts.terminated.shape == ts.truncated.shape == (70, 4)
    assert ts.obs.dtype == np.float32 and ts.reward.dtype == np.float32
    assert np.all(np.isfinite(ts.obs)) and np.all(np.isfinite(ts.reward))
    assert env.with_num_envs(7).spec.num_envs == 7
    assert make_brax("brax/hopper", 1, None, "spring").spec.max_episode_steps == 1000


def test_hopper_falling_is_terminated_and_the_time_limit_truncated(hopper):
    _, ts = hopper
    fell = np.flatnonzero(ts.terminated[:, 0])
    assert len(fell) and fell[0] < HOPPER_LIMIT - 1 and not ts.truncated[: fell[0] + 1, 0].any()
    # A fall: the torso (obs[0] is its height) below Brax's healthy range, or tipped past 0.2 rad.
    z, angle = ts.final_obs[fell[0], 0, 0], ts.final_obs[fell[0], 0, 1]
    assert z <= 0.7 or abs(angle) >= 0.2
    # Passive hoppers stand for 30 steps (0.24 s): truncated at the limit, never terminated.
    for i in (1, 2, 3):
        assert np.flatnonzero(ts.truncated[:, i]).tolist() == [29, 59]
        assert not ts.terminated[:, i].any()


def test_hopper_auto_reset_and_statistics(hopper):
    _, ts = hopper
    done = ts.terminated | ts.truncated
    returns, lengths = hand_episode_stats(ts)
    np.testing.assert_allclose(ts.info["episode_return"][done], returns[done], rtol=1e-5)
    np.testing.assert_array_equal(ts.info["episode_length"][done], lengths[done])
    np.testing.assert_array_equal(ts.obs[~done], ts.final_obs[~done])
    # After a reset the hopper stands again, its torso near Brax's initial height of 1.25 m.
    assert np.all(np.abs(ts.obs[done][:, 0] - 1.25) < 0.05)
    assert not np.allclose(ts.obs[done], ts.final_obs[done])


# --- ES trains on a Brax env ---------------------------------------------------------------------


def test_es_runs_on_a_brax_env(tmp_path: Path):
    pytest.importorskip("brax")
    from jaxrl.loop import train

    cfg = compose(
        [
            "agent=es",
            "env=brax/inverted_pendulum",
            "env.backend=spring",
            "env.max_episode_steps=50",
            "agent.population_size=8",
            "agent.episodes_per_member=2",
            "agent.hidden_sizes=[16]",
            "eval.every=2",
            "eval.episodes=4",
            "budget.env_steps=1",
            "log.tensorboard=false",
            "log.progress=false",
            f"log.dir={tmp_path}",
        ]
    )
    result = train(cfg, tmp_path)
    summary = result.summary
    assert result.status == "completed" and summary["env"] == "brax/inverted_pendulum"
    # The pole earns 1 per step it stays up, for at most 50 steps.
    assert 1 <= summary["final_eval_return"] <= 50
    # One more generation with the run's compiled chunk (the step count rewound below the budget
    # of 1).
    rewound = result.carry._replace(env_steps=result.carry.env_steps * 0)
    _, out = result.compiled_chunk(rewound, result.trainer.hyper, np.int32(2), np.bool_(True))
    assert out.iterations.tolist() == [1]  # [seeds]: the budget stops it after one
    metrics = {name: np.asarray(values)[:, 0] for name, values in out.metrics.items()}
    for name in ("fitness_mean", "fitness_max", "fitness_min"):
        assert np.all((metrics[name] >= 1) & (metrics[name] <= 50)), (name, metrics[name])
    assert np.all(metrics["fitness_max"] >= metrics["fitness_min"])
    assert math.isfinite(float(metrics["grad_norm"].max()))
