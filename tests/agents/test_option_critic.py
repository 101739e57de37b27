"""Option-Critic: the intra-option target, the policy and termination steps and option choice
against numbers worked out by hand, and learning on four-rooms (the paper's transfer
experiment on a smaller budget)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from agents import option_critic as oc
from envs.fourrooms import (
    EAST_DOORWAY_GOAL,
    NUM_CELLS,
    TRANSFER_GOALS,
    FourRoomsConfig,
    shortest_path_lengths,
)
from jaxrl.datatypes import Box, Discrete, EnvSpec, TimeStep
from jaxrl.env import episode_info


def test_termination_mixture_and_advantage_by_hand() -> None:
    values = jnp.array([[1.0, 3.0, 2.0], [1.0, 3.0, 2.0]])
    beta = jnp.array([[0.2, 0.5, 0.9], [0.2, 0.5, 0.9]])
    option = jnp.array([0, 2])
    # (1 − 0.2)·1 + 0.2·3 = 1.4 and (1 − 0.9)·2 + 0.9·3 = 2.9
    np.testing.assert_allclose(oc.termination_mixture(values, beta, option), [1.4, 2.9], 1e-6)
    # Q(s′, ω) − max Q(s′, ·) + ξ: 1 − 3 + 0.5 and 2 − 3 + 0.5
    np.testing.assert_allclose(oc.termination_advantage(values, option, 0.5), [-1.5, -0.5], 1e-6)


@dataclasses.dataclass(frozen=True)
class TwoStates:
    """Always from state 0 to state 1 with reward 0.5; `terminal` says whether that ends it."""

    terminal: bool

    @property
    def spec(self) -> EnvSpec:
        return EnvSpec("two", "jax", Box(np.zeros(2), np.ones(2), (2,)), Discrete(2), 1, 9)

    def reset(self, key):
        obs = jnp.array([[1.0, 0.0]])
        zeros = jnp.zeros(1)
        flags = jnp.zeros(1, bool)
        return (), TimeStep(obs, zeros, flags, flags, obs, episode_info(zeros, zeros, flags))

    def step(self, state, action, key):
        s1 = jnp.array([[0.0, 1.0]])
        end = jnp.full(1, self.terminal)
        reward = jnp.full(1, 0.5)
        info = episode_info(reward, jnp.ones(1, jnp.int32), end)
        return (), TimeStep(s1, reward, end, jnp.zeros(1, bool), s1, info)

    def with_num_envs(self, n):
        return self


def one_step(terminal: bool) -> tuple[oc.StepResult, oc.OptionCriticState]:
    """W_Ω = [[1, 0], [2, 4]] (rows: states), W_β = 0 (β = ½), W_U = 0, and option 0's policy
    in state 0 at logits [0, ln 3] (π = [¼, ¾]); option 0 running, γ 0.9, critic lr 0.5,
    intra lr 0.25, termination lr 0.25, temperature 0.01."""
    env = TwoStates(terminal)
    cfg = oc.OptionCriticConfig(num_options=2, gamma=0.9)
    setup = oc.OptionCriticSetup(cfg, 2, 2, 1, env)
    state = oc.init(setup, jax.random.PRNGKey(0))
    state = state._replace(
        option_values=jnp.array([[1.0, 0.0], [2.0, 4.0]]),
        policy_weights=state.policy_weights.at[0, 0].set(jnp.array([0.0, 0.01 * np.log(3.0)])),
        option=jnp.array([0], jnp.int32),
    )
    return oc.env_step(setup, state, env.reset(None), jax.random.PRNGKey(1)), state


def test_one_step_of_algorithm_1_by_hand() -> None:
    """U(s1, 0) = ½·2 + ½·max(2, 4) = 3, so g = 0.5 + 0.9·3 = 3.2. Critics: W_Ω[s0, 0] =
    1 + 0.5·(3.2 − 1) = 2.1 and W_U[s0, 0, a] = 0.5·3.2 = 1.6. Policy: signal Q_U − Q_Ω =
    1.6 − 2.1 = −0.5 times (e_a − π): for a = 1, 0.25·(−0.5)·[−¼, ¼] = [1/32, −1/32]; for a = 0,
    0.25·(−0.5)·[¾, −¾]. Termination at s1: A = 2 − 4 = −2, β(1 − β) = ¼, so
    W_β[s1, 0] = −0.25·¼·(−2) = 0.125 (option 0 is made to continue)."""
    out, before = one_step(terminal=False)
    a = int(out.action[0])
    new = out.state
    np.testing.assert_allclose(new.option_values, [[2.1, 0.0], [2.0, 4.0]], atol=1e-6)
    expected_u = np.zeros((2, 2, 2))
    expected_u[0, 0, a] = 1.6
    np.testing.assert_allclose(new.action_values, expected_u, atol=1e-6)
    score = np.eye(2)[a] - np.array([0.25, 0.75])
    expected_pi = np.asarray(before.policy_weights).copy()
    expected_pi[0, 0] += 0.25 * -0.5 * score
    np.testing.assert_allclose(new.policy_weights, expected_pi, atol=1e-6)
    np.testing.assert_allclose(new.termination_weights, [[0.0, 0.0], [0.125, 0.0]], atol=1e-6)
    np.testing.assert_allclose(out.beta, [1 / (1 + np.exp(-0.125))], atol=1e-6)
    assert int(out.option_used[0]) == 0


def test_a_terminal_step_bootstraps_nothing_and_ends_the_option() -> None:
    """g = r = 0.5: W_Ω[s0, 0] = 1 + 0.5·(0.5 − 1) = 0.75; no termination step at a terminal
    state, and the next episode starts without an option."""
    out, _ = one_step(terminal=True)
    np.testing.assert_allclose(out.state.option_values[0], [0.75, 0.0], atol=1e-6)
    np.testing.assert_allclose(out.state.termination_weights, np.zeros((2, 2)), atol=0)
    assert bool(out.option_ended[0]) and int(out.state.option[0]) == oc.NO_OPTION


@pytest.mark.parametrize("policy", oc.OPTION_POLICIES)
def test_option_choice_frequencies(policy: str) -> None:
    """Greedy with probability 1 − ε + ε/K; softmax in proportion to exp(Q/temperature)."""
    cfg = oc.OptionCriticConfig(num_options=3, option_policy=policy, epsilon=0.3, temperature=1.0)
    setup = oc.OptionCriticSetup(cfg, 1, 2, 20_000, None)
    values = jnp.tile(jnp.array([[0.0, 1.0, np.log(2.0) + 1.0]]), (20_000, 1))
    chosen = np.asarray(oc.choose_options(setup, values, jax.random.PRNGKey(3)))
    frequencies = np.bincount(chosen, minlength=3) / chosen.size
    if policy == "egreedy":
        expected = np.array([0.1, 0.1, 0.8])
    else:
        weights = np.exp([0.0, 1.0, np.log(2.0) + 1.0])
        expected = weights / weights.sum()
    np.testing.assert_allclose(frequencies, expected, atol=0.015)


def test_the_greedy_policy_acts_on_one_observation_or_a_batch() -> None:
    env = TwoStates(False)
    setup = oc.OptionCriticSetup(oc.OptionCriticConfig(num_options=2), 2, 2, 1, env)
    state = oc.init(setup, jax.random.PRNGKey(0))
    state = state._replace(
        option_values=jnp.array([[0.0, 1.0], [1.0, 0.0]]),  # option 1 in state 0, 0 in state 1
        policy_weights=jnp.zeros((2, 2, 2)).at[0, 1, 1].set(1.0).at[1, 0, 0].set(1.0),
    )
    obs = jnp.eye(2)
    np.testing.assert_array_equal(oc.act(setup, state, obs, None), [1, 0])
    assert int(oc.act(setup, state, obs[1], None)) == 0


SEEDS, EPISODES, SWITCH = 16, 600, 300


@pytest.fixture(scope="module")
def transfer_lengths() -> np.ndarray:
    """Steps per episode [seeds, episodes] of 4-option runs with the authors' settings (their
    env's slip rule), the goal moved at episode SWITCH: all seeds in one vmapped program."""
    env = envs.make(
        FourRoomsConfig(goal_switch_episodes=SWITCH, slip_rule="empty_neighbor"), num_envs=1
    )
    setup = oc.OptionCriticSetup(oc.OptionCriticConfig(), NUM_CELLS, 4, 1, env)

    def run(key):
        init_key, env_key, train_key = jax.random.split(key, 3)
        state = oc.init(setup, init_key)
        return oc.train_for_episodes(setup, state, env.reset(env_key), train_key, EPISODES)[2]

    keys = jax.random.split(jax.random.PRNGKey(7), SEEDS)
    return np.asarray(jax.jit(jax.vmap(run))(keys))


def test_option_critic_learns_four_rooms_and_recovers_after_the_goal_moves(transfer_lengths):
    """Before the switch, the 50 episodes before it take at most 4× the mean shortest path to the
    east doorway (measured 13.4 steps against a limit of 30.4, first episodes ~300); within 300
    episodes after it the median run's last 100 episodes take at most 6× the mean shortest path
    to a transfer goal (measured ~32 against 52.4, right after the switch ~170–250). A few runs
    stay slow after the switch (up to ~170 steps), hence the median. AMD EPYC, 2 cores."""
    mean = transfer_lengths.mean(axis=0)
    to_doorway = shortest_path_lengths(EAST_DOORWAY_GOAL)
    to_doorway = to_doorway[np.arange(NUM_CELLS) != EAST_DOORWAY_GOAL].mean()
    to_transfer = np.mean(
        [shortest_path_lengths(g)[np.arange(NUM_CELLS) != g].mean() for g in TRANSFER_GOALS]
    )
    first, before = mean[:10].mean(), mean[SWITCH - 50 : SWITCH].mean()
    hurt = mean[SWITCH : SWITCH + 10].mean()
    recovered = np.median(transfer_lengths[:, -100:].mean(axis=1))
    report = f"first {first:.1f}, before {before:.1f}, after {hurt:.1f}, end {recovered:.1f}"
    assert first > 100, report
    assert before <= 4 * to_doorway, report
    assert hurt > 2 * before, report  # the goal did move
    assert recovered <= 6 * to_transfer, report
