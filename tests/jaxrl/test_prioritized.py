"""jaxrl/prioritized.py: proportional prioritised replay, its draws, weights and priority updates
against numbers worked out by hand, and DQN's use of it through the off-policy driver."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import prioritized, replay
from jaxrl.config import ConfigError
from jaxrl.prioritized import Prioritization

P = Prioritization(exponent=0.5, importance_start=0.4, epsilon=1e-6, horizon=100)


def four_rows(priorities=(1.0, 2.0, 5.0, 3.0)) -> prioritized.PrioritizedBuffer:
    """Four rows whose priorities raised to α = ½ (what a row holds) are `priorities`."""
    items = replay.add(replay.init(jnp.zeros(()), 4), jnp.arange(4.0))
    buffer = prioritized.init(items, 4)
    data = jnp.asarray(priorities, jnp.float32)
    return buffer._replace(priorities=buffer.priorities._replace(data=data, size=jnp.int32(4)))


ELIGIBLE = jnp.array([True, True, False, True])  # row 2 (priority 25) may not be drawn


def test_draws_in_proportion_to_priority_to_the_alpha():
    """Priorities 1, 4, (25, not eligible), 9 with α = ½: masses 1, 2, 0, 3 of 6. Over 4,000
    draws of 8 (stratified) the rows come up 1/6, 2/6, 0 and 3/6 of the time (±0.01)."""
    buffer = four_rows()
    draw = jax.jit(lambda k: prioritized.sample_rows(buffer, ELIGIBLE, k, 8, P, jnp.int32(0))[0])
    rows = np.concatenate([np.asarray(draw(k)) for k in jax.random.split(jax.random.key(0), 4000)])
    frequency = np.bincount(rows, minlength=4) / rows.size
    np.testing.assert_allclose(frequency, [1 / 6, 2 / 6, 0, 3 / 6], atol=0.01)


def test_stratified_draws_and_importance_weights_by_hand():
    """Three draws, one per third of the cumulative mass (1, 3, 3, 6): the first falls in row 0
    or 1, the second in row 1 or 3 (mass 2..4), the third in row 3. β = 0.4 at step 0, 3
    eligible rows: w = (3·P)^−0.4, P = 1/6, 2/6, 3/6 → 1.3195, 1, 0.8503, over the batch's max."""
    buffer = four_rows()
    rows, weights = prioritized.sample_rows(buffer, ELIGIBLE, jax.random.key(3), 3, P, jnp.int32(0))
    rows = np.asarray(rows)
    assert rows[0] in (0, 1) and rows[1] in (1, 3) and rows[2] == 3
    raw = {0: (3 / 6) ** -0.4, 1: (6 / 6) ** -0.4, 3: (9 / 6) ** -0.4}
    expected = np.array([raw[r] for r in rows])
    np.testing.assert_allclose(weights, expected / expected.max(), rtol=1e-5)
    assert raw[0] == pytest.approx(1.3195, abs=1e-4) and raw[3] == pytest.approx(0.8503, abs=1e-4)


def test_importance_exponent_anneals_to_one_over_the_horizon():
    at = lambda steps: float(prioritized.importance_exponent(P, jnp.float32(steps)))
    assert at(0) == pytest.approx(0.4) and at(50) == pytest.approx(0.7) and at(250) == 1.0


def test_td_errors_become_priorities_and_new_rows_get_the_largest():
    """Rows 0 and 3 drawn with TD errors −4 and 0.25 (ε = 1e-6, α = ½): they hold
    √(4 + ε) ≈ 2 and √(0.25 + ε) ≈ 0.5, the largest seen becomes ≈ 2, and the next transitions
    added get it."""
    buffer = four_rows((1.0, 1.0, 1.0, 1.0))
    buffer = prioritized.with_td_errors(buffer, jnp.array([0, 3]), jnp.array([-4.0, 0.25]), P)
    np.testing.assert_allclose(buffer.priorities.data, [2, 1, 1, 0.5], rtol=1e-5)
    assert float(buffer.max_priority) == pytest.approx(2.0, rel=1e-5)
    grown = prioritized.add_priorities(buffer, 2)  # rows 0 and 1 (the ring is full)
    np.testing.assert_allclose(grown.priorities.data[:2], [2.0, 2.0], rtol=1e-5)


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"priority_exponent": -1.0}, "agent.priority_exponent=-1.0 must be >= 0"),
        ({"importance_exponent": 1.5}, "agent.importance_exponent=1.5 must be in [0, 1]"),
        ({"priority_epsilon": 0.0}, "agent.priority_epsilon=0.0 must be > 0"),
    ],
)
def test_bad_settings_are_config_errors(kwargs: dict, fragment: str):
    from agents.dqn import DQNConfig

    with pytest.raises(ConfigError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        DQNConfig(prioritized=True, **kwargs)


def test_dqn_with_prioritized_n_step_replay_updates_the_drawn_rows():
    """DQN on CartPole-v1 (2 envs, 3-step returns, prioritised): after 2 iterations of 256 env
    steps (29 rounds of 4 updates of 16 from step 64), the priorities stay aligned with the
    transitions (same size), most rows were drawn and carry (|TD error| + ε)^α instead of the
    initial 1, and the newest 2 steps' 4 rows, which have no 3-step successors yet, were never
    drawn: they still carry the largest priority of when they were added."""
    import envs
    from agents.dqn import DQNConfig, make_dqn
    from jaxrl.config import EnvConfig
    from jaxrl.offpolicy import num_updates
    from jaxrl.prng import make_key

    cfg = DQNConfig(
        prioritized=True,
        n_step=3,
        buffer_size=1000,
        batch_size=16,
        learning_starts=64,
        train_freq=8,
        gradient_steps=4,
        iteration_steps=256,
        hidden_sizes=(16,),
    )
    env = envs.make(EnvConfig("CartPole-v1"), num_envs=2)
    agent = make_dqn(cfg, env, total_env_steps=512)
    step = jax.jit(agent.train_step)
    state, env_state = agent.init(make_key(0)), env.reset(make_key(1))
    for i in range(2):
        state, env_state, metrics = step(state, env_state, make_key(10 + i))
    buffer = state.buffer
    assert int(buffer.priorities.size) == int(buffer.items.size) == 512
    priorities = np.asarray(buffer.priorities.data)[:512]
    assert int(state.learner.updates) == num_updates(cfg, 2, 512, cfg.n_step) == 116
    assert np.isfinite(float(metrics["loss"]))
    assert (priorities != 1.0).sum() > 400
    newest = priorities[-4:]
    assert (newest == newest[0]).all() and 1.0 < newest[0] <= float(buffer.max_priority)
    assert float(buffer.max_priority) == pytest.approx(priorities.max())
