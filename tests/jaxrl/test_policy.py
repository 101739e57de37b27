"""`jaxrl.load`: the policy alone, from a run directory's env spec and checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import numpy as np
import pytest

import envs
import jaxrl
from jaxrl import loop
from jaxrl.config import EnvConfig
from jaxrl.datatypes import Box, Discrete, EnvSpec, Hybrid
from jaxrl.env import SpecOnlyEnv


def test_env_spec_json_round_trip() -> None:
    """Bounds per element (with infinities) come back as they were; a bound every element shares
    is written once (a pixel env's 84·84·4 zeros and 255s)."""
    box = Box(np.array([-4.8, -np.inf], np.float32), np.array([4.8, np.inf], np.float32), (2,))
    shape = (84, 84, 4)
    pixels = Box(np.zeros(shape, np.uint8), np.full(shape, 255, np.uint8), shape, np.uint8)
    for observation_space, action_space in ((box, Discrete(3)), (pixels, box)):
        spec = EnvSpec("e", "host", observation_space, action_space, 8, 27_000, False)
        data = json.loads(json.dumps(spec.to_json()))
        back = EnvSpec.from_json(data)
        for name in ("name", "family", "num_envs", "max_episode_steps", "vmappable"):
            assert getattr(back, name) == getattr(spec, name)
        for original, restored in (
            (spec.observation_space, back.observation_space),
            (spec.action_space, back.action_space),
        ):
            assert type(restored) is type(original)
            assert np.dtype(restored.dtype) == np.dtype(original.dtype)
            if isinstance(original, Box):
                assert restored.shape == original.shape
                np.testing.assert_array_equal(restored.low, original.low)
                np.testing.assert_array_equal(restored.high, original.high)
                assert restored.low.dtype == original.low.dtype
            else:
                assert restored.n == original.n
    pixel_data = EnvSpec("p", "host", pixels, Discrete(6), 1, 1, False).to_json()
    assert pixel_data["observation_space"]["low"] == 0.0
    assert pixel_data["observation_space"]["high"] == 255.0


def test_hybrid_env_spec_json_round_trip() -> None:
    """A hybrid action space (Goal's: 3 choices, 4 parameters in slices of 2, 1, 1) and the
    success flag come back as they were; a spec written before there was one reports none."""
    spec = envs.make(EnvConfig(id="Goal-v0"), 2).spec
    data = json.loads(json.dumps(spec.to_json()))
    assert data["action_space"]["type"] == "Hybrid"
    assert data["action_space"]["slices"] == [[0, 2], [2, 3], [3, 4]]
    back = EnvSpec.from_json(data)
    space, restored = spec.action_space, back.action_space
    assert isinstance(restored, Hybrid) and restored.choices.n == 3
    assert restored.slices == space.slices == ((0, 2), (2, 3), (3, 4))
    np.testing.assert_array_equal(restored.parameters.low, np.float32([0, -15, -7.01, -7.01]))
    np.testing.assert_array_equal(restored.parameters.high, space.parameters.high)
    assert restored.parameters.shape == (4,) and restored.parameters.low.dtype == np.float32
    assert back.reports_success and (back.name, back.max_episode_steps) == ("Goal-v0", 99)
    del data["reports_success"]
    assert not EnvSpec.from_json(data).reports_success
    with pytest.raises(ValueError, match="2 parameter slices for 3 choices"):
        Hybrid(Discrete(3), space.parameters, ((0, 2), (2, 4)))
    with pytest.raises(ValueError, match=r"parameter slice \(3, 5\) is not within \[0, 4\]"):
        Hybrid(Discrete(1), space.parameters, ((3, 5),))


def test_spec_only_env_gives_zeros_of_the_spec_shapes() -> None:
    spec = EnvSpec("e", "jax", Box(-np.ones(3), np.ones(3), (3,)), Discrete(2), 1, 10)
    env = SpecOnlyEnv(spec).with_num_envs(5)
    state, ts = env.reset(jax.random.PRNGKey(0))
    state, ts = env.step(state, np.zeros(5, np.int32), jax.random.PRNGKey(1))
    assert ts.obs.shape == (5, 3) and ts.obs.dtype == np.float32
    assert not np.any(ts.obs) and not np.any(ts.terminated | ts.truncated)


def test_load_builds_no_env_no_trainer_and_reads_no_buffer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A DQN run of two seeds: the loaded policy of seed 1 has exactly the trained parameters and
    acts as the trained agent does, while building an env or a trainer would fail and the replay
    buffer's items are never read."""
    result = jaxrl.train(
        "agent=dqn",
        "env=CartPole-v1",
        "agent.hidden_sizes=[16]",
        "agent.learning_starts=64",
        "agent.iteration_steps=256",
        "agent.buffer_size=4096",
        num_seeds=2,
        budget={"env_steps": 512},
        log={"progress": False, "tensorboard": False},
        run_dir=tmp_path / "run",
    )
    trained = jax.tree.map(lambda x: x[1], result.carry.agent_state)
    obs = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)
    expected_actions = result.trainer.agent.act(trained, obs, jax.random.PRNGKey(0), True)

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("jaxrl.load built an env or a trainer")

    monkeypatch.setattr(envs, "make", refuse)
    monkeypatch.setattr(loop.Trainer, "__post_init__", refuse)
    policy = jaxrl.load(result.run_dir, seed=1)
    np.testing.assert_array_equal(policy.params, result.trainer.agent.params(trained))
    np.testing.assert_array_equal(policy(obs), expected_actions)
    assert policy.agent_state.buffer.data is None
    assert policy.seed == 1 and policy.spec.name == "CartPole-v1"
