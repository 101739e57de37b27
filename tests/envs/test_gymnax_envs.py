"""Parity of the JAX-native classic-control envs with Gymnasium's reference implementations.

Each parity run steps our env (`envs.make`, batch of one) next to `gymnasium.make(name)` for a
few hundred steps. Before every step both are set to the *same* state (Gymnasium's state rounded
to float32, written back into `env.unwrapped.state` and into our core state), so the only
difference left is float32 vs float64 arithmetic and tolerances can stay tight; chaotic envs
(CartPole) would otherwise drift apart within ~100 steps. The time counters are *not* synced:
our `VectorState.time` and Gymnasium's `TimeLimit` must agree on truncation by themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any, NamedTuple

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from envs.gymnax_envs import TWIN_STATE
from jaxrl.config import EnvConfig
from jaxrl.datatypes import Box, Discrete, TimeStep
from jaxrl.env import VectorEnv, VectorState

ATOL = 1e-5  # float32 (ours) vs float64 (Gymnasium) after one step from identical states
RTOL = 1e-5

# The fields of each gymnax core state that hold Gymnasium's `env.unwrapped.state`, in order:
# the mapping videos draw through, so these parity tests check it too.
STATE_FIELDS = TWIN_STATE

Policy = Callable[[np.ndarray, np.random.Generator], Any]  # (Gymnasium obs, rng) -> action


class JaxSide(NamedTuple):
    env: VectorEnv
    reset: Callable[[jax.Array], tuple[VectorState, TimeStep]]
    step_from: Callable[..., tuple[VectorState, TimeStep]]  # (state, s, sync, action, key)


@cache
def _jax_side(name: str, max_episode_steps: int | None = None) -> JaxSide:
    """Our env plus a jitted 'where `sync`, overwrite the core state with `s`; then step',
    compiled once per (env, time limit) and shared by every test."""
    env = envs.make(EnvConfig(name, max_episode_steps=max_episode_steps))
    fields = STATE_FIELDS[name]

    def step_from(
        state: VectorState, s: jax.Array, sync: jax.Array, action: jax.Array, key: jax.Array
    ) -> tuple[VectorState, TimeStep]:
        old = state.core
        core = old.replace(
            **{f: jnp.where(sync, s[:, i], getattr(old, f)) for i, f in enumerate(fields)}
        )
        return env.step(state._replace(core=core), action, key)

    return JaxSide(env, jax.jit(env.reset), jax.jit(step_from))


class Ends(NamedTuple):
    terminated: list[int]  # 1-based global step indices at which an episode ended this way
    truncated: list[int]


def _run_parity(
    name: str,
    policy: Policy,
    steps: int,
    seed: int,
    max_episode_steps: int | None = None,
    sync_every_step: bool = True,
    atol: float = ATOL,
) -> Ends:
    """Step both implementations side by side and assert parity at every step.

    With `sync_every_step=False` both sides are synced only at the start of each episode and then
    run freely, which also checks the state each side carries from step to step. Flags are
    checked as we go; observations and rewards are gathered and compared at the end (one
    vectorised assert instead of thousands of slow `assert_allclose` calls).
    """
    ours = _jax_side(name, max_episode_steps)
    kwargs = {} if max_episode_steps is None else {"max_episode_steps": max_episode_steps}
    genv = gymnasium.make(name, **kwargs)
    gobs, _ = genv.reset(seed=seed)
    state, _ = ours.reset(jax.random.key(seed))
    key = jax.random.key(
        seed + 1
    )  # the core's randomness only feeds auto-resets, which we overwrite
    rng = np.random.default_rng(seed)
    dtype = np.int32 if isinstance(ours.env.spec.action_space, Discrete) else np.float32
    ep_return, ep_length = 0.0, 0
    ends = Ends([], [])
    got_obs, want_obs, got_reward, want_reward, next_obs = [], [], [], [], []
    for t in range(1, steps + 1):
        s32 = np.asarray(genv.unwrapped.state, np.float64).astype(np.float32)
        sync = sync_every_step or ep_length == 0
        if sync:
            genv.unwrapped.state = s32.astype(np.float64)
        action = policy(gobs, rng)
        gobs, greward, gterm, gtrunc, _ = genv.step(action)
        state, ts = ours.step_from(state, s32[None], sync, np.asarray([action], dtype), key)
        ts, time = jax.device_get((ts, state.time))
        got_obs.append(ts.final_obs[0])
        want_obs.append(gobs)
        got_reward.append(ts.reward[0])
        want_reward.append(greward)
        where = f"{name} step {t}"
        assert bool(ts.terminated[0]) == gterm, where
        # Gymnasium's TimeLimit also says truncated when the last step terminates; we never do.
        assert bool(ts.truncated[0]) == (gtrunc and not gterm), where
        ep_return += float(greward)
        ep_length += 1
        done = gterm or gtrunc
        assert bool(ts.info["episode_done"][0]) == done, where
        if not done:
            next_obs.append((ts.obs[0], ts.final_obs[0]))
            assert time[0] == ep_length, where
            continue
        (ends.terminated if gterm else ends.truncated).append(t)
        assert abs(ts.info["episode_return"][0] - ep_return) <= RTOL * abs(ep_return) + atol, where
        assert ts.info["episode_length"][0] == ep_length, where
        assert time[0] == 0, where  # auto-reset on the same step
        assert not np.array_equal(ts.obs, ts.final_obs), where
        ep_return, ep_length = 0.0, 0
        gobs, _ = genv.reset(seed=seed + t)
    np.testing.assert_allclose(np.stack(got_obs), np.stack(want_obs), rtol=RTOL, atol=atol)
    np.testing.assert_allclose(got_reward, want_reward, rtol=RTOL, atol=atol)
    # Where nothing ended, `obs` is `final_obs`: equal up to XLA recomputing the observation in
    # two fusions (seen: 3e-8 on Pendulum).
    nxt = np.asarray(next_obs)
    np.testing.assert_allclose(nxt[:, 0], nxt[:, 1], rtol=1e-6, atol=1e-7)
    return ends


def _random_discrete(n: int) -> Policy:
    return lambda obs, rng: int(rng.integers(n))


def _random_box(low: float, high: float) -> Policy:
    """Uniform torques/forces, deliberately beyond the action bounds to exercise clipping."""
    return lambda obs, rng: rng.uniform(low, high, size=(1,)).astype(np.float32)


def _cartpole_balance(obs: np.ndarray, rng: np.random.Generator) -> int:
    """A linear controller that keeps the pole up (and the cart inside ±2.4) for 500+ steps."""
    return int(np.dot((0.05, 0.1, 1.0, 0.5), obs) > 0)


def test_cartpole_parity_across_terminations() -> None:
    """Random pushes: the pole falls every few dozen steps; every step and flag must agree."""
    ends = _run_parity("CartPole-v1", _random_discrete(2), steps=300, seed=0)
    assert len(ends.terminated) >= 5
    assert ends.truncated == []


def test_cartpole_parity_truncates_at_500() -> None:
    """A balancing run reaches the registered cap: truncated (not terminated) exactly at step
    500, and the next episode starts cleanly."""
    ends = _run_parity("CartPole-v1", _cartpole_balance, steps=520, seed=1)
    assert ends == Ends([], [500])


def test_cartpole_parity_with_short_time_limit() -> None:
    """`EnvConfig(max_episode_steps=...)` overrides the cap; terminations and truncations mix."""
    ends = _run_parity("CartPole-v1", _random_discrete(2), steps=200, seed=2, max_episode_steps=15)
    assert len(ends.terminated) >= 2
    assert len(ends.truncated) >= 2
    # Truncations fall exactly 15 steps after the previous episode end.
    starts = {0, *ends.terminated, *ends.truncated}
    assert all(t - 15 in starts for t in ends.truncated)


def test_pendulum_parity_truncates_at_200() -> None:
    """Random (partly out-of-bounds) torques for two and a half episodes: Pendulum never
    terminates and is truncated at steps 200 and 400."""
    ends = _run_parity("Pendulum-v1", _random_box(-3.0, 3.0), steps=450, seed=3)
    assert ends == Ends([], [200, 400])


def test_pendulum_free_running_matches() -> None:
    """Synced only at episode starts, our own carried state (theta unwrapped, theta_dot clipped)
    must keep tracking Gymnasium's; the pendulum is not chaotic enough to drift past 1e-4."""
    ends = _run_parity(
        "Pendulum-v1", _random_box(-2.0, 2.0), steps=250, seed=4, sync_every_step=False, atol=1e-4
    )
    assert ends == Ends([], [200])


def _acrobot_swing(obs: np.ndarray, rng: np.random.Generator) -> int:
    """Pump energy by torquing along the second joint's velocity: reaches the goal height."""
    return 2 if obs[5] > 0 else 0


def _mountain_car_swing(obs: np.ndarray, rng: np.random.Generator) -> int:
    """Push along the velocity: the classic energy-pumping policy that reaches the flag."""
    return 2 if obs[1] > 0 else 0


def _mountain_car_continuous_swing(obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return np.asarray([1.0 if obs[1] > 0 else -1.0], np.float32)


@pytest.mark.parametrize(
    ("name", "policy"),
    [
        ("Acrobot-v1", _acrobot_swing),
        ("MountainCar-v0", _mountain_car_swing),
        ("MountainCarContinuous-v0", _mountain_car_continuous_swing),
    ],
)
def test_other_classic_control_parity(name: str, policy: Policy) -> None:
    """The remaining JAX-native envs step like Gymnasium's too, through at least one goal."""
    ends = _run_parity(name, policy, steps=300, seed=5)
    assert len(ends.terminated) >= 1
    assert ends.truncated == []


@pytest.mark.parametrize("name", sorted(STATE_FIELDS))
def test_spaces_match_gymnasium(name: str) -> None:
    """Spaces, bounds and time limits of every JAX-native env equal Gymnasium's."""
    ours = envs.make(EnvConfig(name, num_envs=3))
    genv = gymnasium.make(name)
    spec = ours.spec
    assert (spec.name, spec.family, spec.num_envs) == (name, "jax", 3)
    assert spec.max_episode_steps == genv.spec.max_episode_steps
    gobs_space = genv.observation_space
    assert isinstance(spec.observation_space, Box)
    assert spec.observation_space.shape == gobs_space.shape
    np.testing.assert_array_equal(spec.observation_space.low, gobs_space.low)
    np.testing.assert_array_equal(spec.observation_space.high, gobs_space.high)
    gact = genv.action_space
    if isinstance(gact, gymnasium.spaces.Discrete):
        assert isinstance(spec.action_space, Discrete)
        assert spec.action_space.n == gact.n
    else:
        assert isinstance(spec.action_space, Box)
        assert spec.action_space.shape == gact.shape
        np.testing.assert_array_equal(spec.action_space.low, gact.low)
        np.testing.assert_array_equal(spec.action_space.high, gact.high)


@pytest.mark.parametrize(
    ("name", "low", "high"),
    [
        ("CartPole-v1", [-0.05] * 4, [0.05] * 4),
        ("Pendulum-v1", [-np.pi, -1.0], [np.pi, 1.0]),
    ],
)
def test_reset_distribution_matches_gymnasium(
    name: str, low: list[float], high: list[float]
) -> None:
    """Initial states are drawn from Gymnasium's ranges: all inside, and filling them."""
    env = envs.make(EnvConfig(name)).with_num_envs(2000)
    state, ts = jax.jit(env.reset)(jax.random.key(7))
    s = np.stack([np.asarray(getattr(state.core, f)) for f in STATE_FIELDS[name]], axis=1)
    assert ts.obs.shape == (2000, *env.spec.observation_space.shape)
    assert ts.obs.dtype == jnp.float32
    assert np.all(s >= np.asarray(low) - 1e-6) and np.all(s <= np.asarray(high) + 1e-6)
    span = np.asarray(high) - np.asarray(low)
    assert np.all(np.abs(s.min(0) - low) < 0.01 * span), s.min(0)
    assert np.all(np.abs(s.max(0) - high) < 0.01 * span), s.max(0)
    # Gymnasium's observation of such a state, for a few of them.
    genv = gymnasium.make(name).unwrapped
    for i in range(5):
        genv.state = s[i].astype(np.float64)
        gobs = genv._get_obs() if hasattr(genv, "_get_obs") else np.asarray(genv.state, np.float32)
        np.testing.assert_allclose(ts.obs[i], gobs, atol=ATOL)
