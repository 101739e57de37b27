"""The hybrid-action envs as `envs.make` builds them (envs/hybrid.py): `Platform-v0`, `Goal-v0` and
`HardMove-v0` batched by `VectorEnv` with their `Hybrid` action space, episode caps, Hard Move's
keyword and the success flag their episode statistics carry up to evals.csv and summary.json.
The envs' own dynamics are tested in test_platform.py, test_goal.py and test_hardmove.py."""

from __future__ import annotations

import csv
import json
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from envs import catchpoint, goal, hardmove, platform
from envs.configs import HardMoveConfig
from jaxrl.cli import compose
from jaxrl.config import ConfigError, EnvConfig
from jaxrl.datatypes import Hybrid
from jaxrl.env import VectorEnv, random_actions
from jaxrl.loop import ChunkOutput, Progress, Run, _progress_line, _record, _summary
from jaxrl.outputs import RunLogger
from jaxrl.rollout import run_episodes

MODULES = {
    "Platform-v0": platform,
    "Goal-v0": goal,
    "HardMove-v0": hardmove,
    "CatchPoint-v0": catchpoint,
}
# name: (choices, parameters, observation size, episode cap)
LAYOUTS = {
    "Platform-v0": (3, 3, 9, 200),
    "Goal-v0": (3, 4, 17, 99),
    "HardMove-v0": (16, 16, 4, 30),
    "CatchPoint-v0": (2, 1, 4, 25),
}


@pytest.mark.parametrize("name", list(MODULES))
def test_registered_with_the_hybrid_space_cap_and_success_of_its_module(name: str) -> None:
    module = MODULES[name]
    assert name in envs.registered()
    env = envs.make(EnvConfig(id=name), 5)
    assert isinstance(env, VectorEnv) and env.spec.family == "jax"
    choices, parameters, obs_size, cap = LAYOUTS[name]
    space = env.spec.action_space
    assert isinstance(space, Hybrid) and space.choices.n == choices
    assert space.parameters.shape == (parameters,) and space.slices == module.PARAMETER_SLICES
    np.testing.assert_array_equal(space.parameters.low, module.PARAMETER_LOW)
    np.testing.assert_array_equal(space.parameters.high, module.PARAMETER_HIGH)
    assert env.spec.observation_space.shape == (obs_size,) and env.spec.num_envs == 5
    assert env.spec.max_episode_steps == module.MAX_EPISODE_STEPS == cap
    assert env.spec.reports_success and env.success is module.success
    assert envs.make(EnvConfig(id=name, max_episode_steps=7)).spec.max_episode_steps == 7


@pytest.mark.parametrize("name", list(MODULES))
def test_random_steps_truncate_at_the_cap_and_count_episodes(name: str) -> None:
    """16 envs started one step before the cap take choice 0 with zero parameters (run nowhere,
    kick to the corner flag (0, 0), fire no actuator: most go on), then 2 random actions: on the
    first step every episode ends, truncated exactly where it did not terminate; after that the
    statistics count each new episode (returns are the rewards summed since its start), nothing
    is truncated before the cap, and only a terminating step can be a success."""
    env = envs.make(EnvConfig(id=name), 16)
    cap = env.spec.max_episode_steps

    @jax.jit
    def run(key: jax.Array):
        state, _ = env.reset(key)
        state = state._replace(time=jnp.full_like(state.time, cap - 1))
        choice_0 = jax.tree.map(jnp.zeros_like, random_actions(env.spec, key))
        state, first = env.step(state, choice_0, key)

        def step(state, key):
            action_key, step_key = jax.random.split(key)
            return env.step(state, random_actions(env.spec, action_key), step_key)

        _, then = jax.lax.scan(step, state, jax.random.split(key, 2))
        return jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), first, then)

    ts = jax.device_get(run(jax.random.key(0)))
    info = ts.info
    assert ts.obs.shape == (3, 16, *env.spec.observation_space.shape)
    assert np.isfinite(ts.reward).all() and np.isfinite(ts.obs).all()
    np.testing.assert_array_equal(ts.truncated[0], ~ts.terminated[0])
    assert ts.truncated[0].any()
    assert not ts.truncated[1:].any() and not (ts.terminated & ts.truncated).any()
    np.testing.assert_array_equal(info["episode_done"], ts.terminated | ts.truncated)
    assert not (info["episode_success"] & ~ts.terminated).any()
    # Step 1 ended every episode: the running sums of the next ones, by hand.
    np.testing.assert_array_equal(info["episode_length"][1], 1)
    np.testing.assert_array_equal(info["episode_length"][2], np.where(ts.terminated[1], 1, 2))
    np.testing.assert_array_equal(info["episode_return"][1], ts.reward[1])
    since_start = np.where(ts.terminated[1], ts.reward[2], ts.reward[1] + ts.reward[2])
    np.testing.assert_allclose(info["episode_return"][2], since_start, rtol=1e-6)


def test_hard_move_successes_are_the_episodes_that_reach_the_target() -> None:
    """A policy heading for the target (the choice whose motion points most its way, at full
    magnitude) reaches it in most of 32 episodes; one that does not runs to the 30-step cap. The
    evaluation's `successes` are those episodes, as `run_episodes` records them."""
    env = envs.make(EnvConfig(id="HardMove-v0"), 32)
    motions = jnp.asarray(hardmove.choice_motions(hardmove.DEFAULT_NUM_ACTUATORS))

    def towards_target(obs: jax.Array, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        choice = jnp.argmax(obs[:, 2:] @ motions.T, axis=-1).astype(jnp.int32)
        return choice, jnp.ones((len(obs), hardmove.NUM_CHOICES), jnp.float32)

    episodes = jax.device_get(
        jax.jit(lambda k: run_episodes(env, towards_target, k))(jax.random.key(0))
    )
    successes, lengths = episodes.successes, episodes.lengths
    assert successes.dtype == bool and 0 < successes.sum() < 32
    assert successes[lengths < 30].all()  # an episode ends early only by reaching the target
    np.testing.assert_array_equal(lengths[~successes], 30)


def test_the_success_rate_reaches_evals_csv_summary_and_the_progress_line(tmp_path) -> None:
    """Two seeds' evaluations of 4 episodes, made by a call that trains nothing after one that
    trained without evaluating (the end of a long interval whose seeds' budgets ran out): each row
    of evals.csv has the share of its episodes that succeeded; summary.json the last one per seed
    and their mean; the progress line says n/a until the first evaluation."""
    spec = envs.make(EnvConfig(id="Platform-v0")).spec
    runs = [Run(0, None), Run(1, None)]
    logger = RunLogger(tmp_path, [r.columns([]) for r in runs], ["a", "b"], False, None, True)
    progress = Progress.start(len(runs))
    out = ChunkOutput(
        metrics={"env_steps": np.array([[10], [10]])},
        iterations=np.array([1, 1]),
        eval_returns=np.array([[1.0, 0.5, 0.2, 0.1], [1.0, 1.0, 1.0, 0.3]]),
        finite=np.array([True, True]),
        eval_successes=np.array([[True, False, False, False], [True, True, True, False]]),
    )
    trainer = SimpleNamespace(
        runs=runs,
        points=[],
        eval_every=1,
        env=SimpleNamespace(spec=spec),
        progress_metrics=(),
        share_mesh=None,
    )
    # A call inside a long interval trains without evaluating: no row, no return or success yet.
    _record(progress, out, logger, 0.0, False)
    line = _progress_line(trainer, progress, out)
    assert "eval n/a" in line and "success" not in line and progress.pending_eval == [True, True]
    _record(progress, out._replace(iterations=np.array([0, 0])), logger, 0.0, True)
    logger.close()
    with open(tmp_path / "evals.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [float(r["eval_success_rate"]) for r in rows] == [0.25, 0.75]
    cfg = SimpleNamespace(agent=SimpleNamespace(name="dqn"), env=EnvConfig(spec.name), num_seeds=2)
    summary = json.loads(json.dumps(_summary(cfg, trainer, progress, 0.0, "completed")))
    assert summary["final_eval_success_rate"] == 0.5
    assert [r["final_eval_success_rate"] for r in summary["runs"]] == [0.25, 0.75]
    assert "success 50%" in _progress_line(trainer, progress, out)


def test_hard_move_takes_its_actuators_as_a_keyword() -> None:
    cfg = compose(["agent=es", "env=HardMove-v0", "env.kwargs.num_actuators=6"])
    assert isinstance(cfg.env, HardMoveConfig) and cfg.env.num_actuators == 6
    space = envs.make(cfg.env).spec.action_space
    assert isinstance(space, Hybrid) and space.choices.n == 64 and space.parameters.shape == (64,)
    assert HardMoveConfig().num_actuators == hardmove.DEFAULT_NUM_ACTUATORS == 4
    for kwargs, message in (
        (
            {"num_actuators": 0},
            "env.kwargs.num_actuators=0 must be a whole number of actuators "
            "in [1, 16] (default 4; HyAR's paper: 4 to 10)",
        ),
        ({"num_actuators": "abc"}, "env.kwargs.num_actuators='abc' must be a whole number"),
        ({"num_actuators": 4.0}, "env.kwargs.num_actuators=4.0 must be a whole number"),
        ({"num_actuators": 17}, "env.kwargs.num_actuators=17 must be a whole number"),
        (
            {"actuators": 4},
            "env.kwargs.actuators is not an option of HardMove-v0; valid: num_actuators",
        ),
    ):
        with pytest.raises(ConfigError) as refused:
            HardMoveConfig(kwargs=kwargs)
        assert str(refused.value).startswith(message)
