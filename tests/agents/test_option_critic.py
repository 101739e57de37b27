"""Option-Critic: the intra-option target, the policy and termination steps and option choice
against numbers worked out by hand, and learning on four-rooms (the paper's transfer
experiment on a smaller budget); the deep network's n-step targets with the termination
mixture, its termination and policy gradients by hand, its option bookkeeping, refusals, and
learning CartPole-v1."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cli_helpers import cli, error_lines
from jax._src.interpreters import partial_eval as pe
from learning import assert_mean_at_least, seed_values

import envs
import jaxrl
from agents import configs
from agents import option_critic as oc
from envs.configs import FourRoomsConfig
from envs.fourrooms import EAST_DOORWAY_GOAL, NUM_CELLS, TRANSFER_GOALS, shortest_path_lengths
from jaxrl.cli import compose
from jaxrl.config import ConfigError, EnvConfig
from jaxrl.datatypes import Array, Box, Discrete, EnvSpec, TimeStep
from jaxrl.env import episode_info
from jaxrl.loop import Trainer


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


@pytest.mark.parametrize("policy", configs.OPTION_POLICIES)
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
    east doorway; within 300 episodes after it the median run's last 100 episodes take at most
    6× the mean shortest path to a transfer goal. A few runs stay slow after the switch, hence
    the median. Both limits sit above the lengths measured (benchmarks/results/learning_tests.md).
    """
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


# --- Deep option-critic ----------------------------------------------------------------------


def test_deep_is_chosen_by_agent_network_with_its_own_defaults():
    """`agent.network=deep` takes the deep defaults for the keys left null and a batch of envs;
    a key given keeps its value; the linear agent's defaults are unchanged."""
    deep = compose(["agent=option_critic", "agent.network=deep", "agent.critic_lr=0.01"]).agent
    assert (deep.critic_lr, deep.intra_lr, deep.option_policy, deep.temperature) == (
        0.01,
        5e-4,
        "egreedy",
        1.0,
    )
    assert deep.deliberation_cost == 1.0 and deep.NUM_ENVS == configs.DEEP_NUM_ENVS
    linear = oc.OptionCriticConfig()
    assert (linear.critic_lr, linear.option_policy, linear.temperature, linear.NUM_ENVS) == (
        0.5,
        "softmax",
        0.01,
        1,
    )
    assert linear.deliberation_cost == 0.0


def test_n_step_returns_by_hand():
    """γ 0.9, rewards 1, bootstraps U = [10, 20, 30, 40]: step 1 is truncated (it bootstraps
    from U of its final observation, 20), step 2 terminated (nothing after it), step 3 ends the
    rollout (U = 40); step 0 runs on into step 1."""
    rewards = jnp.ones((4, 1))
    bootstrap = jnp.array([[10.0], [20.0], [30.0], [40.0]])
    truncated = jnp.array([[False], [True], [False], [False]])
    terminated = jnp.array([[False], [False], [True], [False]])
    returns = oc.n_step_returns(rewards, terminated, truncated, bootstrap, 0.9)
    g1, g3 = 1 + 0.9 * 20, 1 + 0.9 * 40
    np.testing.assert_allclose(returns[:, 0], [1 + 0.9 * g1, g1, 1.0, g3], rtol=1e-6)


def deep_steps(option, action, reward, terminated, truncated) -> oc.DeepSteps:
    """A [T, 1] rollout of the fields the loss reads (observations are not)."""
    col = lambda x, dtype: jnp.asarray(x, dtype)[:, None]
    t = len(option)
    zeros = jnp.zeros((t, 1))
    flags = jnp.zeros((t, 1), bool)
    return oc.DeepSteps(
        obs=zeros,
        option=col(option, jnp.int32),
        action=col(action, jnp.int32),
        reward=col(reward, jnp.float32),
        terminated=col(terminated, bool),
        truncated=col(truncated, bool),
        next_obs=zeros,
        chose=flags,
        arrived=flags,
        arrival_beta=zeros,
        episode_done=flags,
        episode_return=zeros,
        episode_length=zeros.astype(jnp.int32),
    )


def test_deep_targets_bootstrap_with_the_target_networks_termination_mixture():
    """Two steps with option 1, γ 0.5, rewards 1 and 2. At s′_1 the target network's
    Q′ = [4, 2, 6] and β_1 = σ(ln 3) = ¾: U = ¼·2 + ¾·6 = 5, so G_1 = 2 + 0.5·5 = 4.5 and
    G_0 = 1 + 0.5·4.5 = 3.25 (step 0's own U is not used: the episode goes on). With step 1
    terminal, G_1 = 2 and G_0 = 2."""
    cfg = oc.OptionCriticConfig(network="deep", gamma=0.5)
    logits = jnp.zeros((2, 1, 3)).at[1, 0, 1].set(np.log(3.0))
    target_values = jnp.array([[[0.0, 100.0, 0.0]], [[4.0, 2.0, 6.0]]])
    steps = deep_steps([1, 1], [0, 0], [1.0, 2.0], [False, False], [False, False])
    returns = oc.deep_targets(cfg, logits, target_values, steps)
    np.testing.assert_allclose(returns[:, 0], [3.25, 4.5], rtol=1e-6)
    terminal = steps._replace(terminated=jnp.array([[False], [True]]))
    np.testing.assert_allclose(oc.deep_targets(cfg, logits, target_values, terminal)[:, 0], [2, 2])


def one_step_outputs(next_termination_logit: float) -> tuple[oc.OptionOutputs, oc.OptionOutputs]:
    """One state, options 0 and 1, two actions. At s: Q = [1, 2], option 0's logits [0, ln 3]
    (π = [¼, ¾] at temperature 1). At s′: Q = [1, 3], option 0's termination logit given."""
    outputs = oc.OptionOutputs(
        option_values=jnp.array([[[1.0, 2.0]]]),
        termination_logits=jnp.zeros((1, 1, 2)),
        policy_logits=jnp.array([[[[0.0, np.log(3.0)], [0.0, 0.0]]]]),
    )
    next_outputs = oc.OptionOutputs(
        option_values=jnp.array([[[1.0, 3.0]]]),
        termination_logits=jnp.array([[[next_termination_logit, 0.0]]]),
        policy_logits=jnp.zeros((1, 1, 2, 2)),
    )
    return outputs, next_outputs


@pytest.mark.parametrize("xi", [0.0, 2.5])
def test_deep_termination_gradient_sign_and_magnitude(xi: float):
    """Option 0 at s′ with β = σ(0) = ½: the loss's gradient in its termination logit is
    β(1 − β)(Q(s′, 0) − max Q(s′) + ξ) = ¼·(1 − 3 + ξ): −0.5 without a deliberation cost (a
    descent step raises β: option 1 is better at s′), +0.125 with ξ = 2.5 (it lowers β: the
    switch costs more than it gains). Only option 0's logit moves. A terminal s′ gives none."""
    cfg = oc.OptionCriticConfig(network="deep", deliberation_cost=xi)
    outputs, next_outputs = one_step_outputs(0.0)
    steps = deep_steps([0], [1], [0.0], [False], [False])
    target = jnp.zeros((1, 1, 2))

    def loss_of(logits: Array, steps: oc.DeepSteps) -> Array:
        heads = next_outputs._replace(termination_logits=logits)
        return oc.deep_loss(cfg, outputs, heads, target, steps)[0]

    grad = jax.grad(loss_of)(next_outputs.termination_logits, steps)
    np.testing.assert_allclose(grad[0, 0], [0.25 * (1 - 3 + xi), 0.0], atol=1e-6)
    terminal = steps._replace(terminated=jnp.array([[True]]))
    np.testing.assert_allclose(jax.grad(loss_of)(next_outputs.termination_logits, terminal), 0)


def test_deep_policy_gradient_uses_the_return_against_q_omega():
    """Action 1 of option 0 at s, terminal next state, reward 5: G = 5 and Q_Ω(s, 0) = 1, so
    the policy loss's gradient in option 0's logits is −(G − Q)(e_1 − π) = −4·[−¼, ¼] = [1, −1],
    plus the entropy bonus's; without `baseline` the signal is G = 5; the critic's gradient in
    Q_Ω(s, 0) is Q − G = −4."""
    outputs, next_outputs = one_step_outputs(0.0)
    steps = deep_steps([0], [1], [5.0], [True], [False])
    target = jnp.zeros((1, 1, 2))
    pi = np.array([0.25, 0.75])
    entropy_grad = pi * (np.log(pi) + (-(pi * np.log(pi)).sum()))  # ∂(−H)/∂logits

    for baseline, signal in ((True, 4.0), (False, 5.0)):
        cfg = oc.OptionCriticConfig(network="deep", baseline=baseline, ent_coef=0.5)
        loss = lambda o, cfg=cfg: oc.deep_loss(cfg, o, next_outputs, target, steps)[0]
        grads = jax.grad(loss)(outputs)
        expected = -signal * (np.array([0.0, 1.0]) - pi) + 0.5 * entropy_grad
        np.testing.assert_allclose(grads.policy_logits[0, 0, 0], expected, atol=1e-5)
        np.testing.assert_allclose(grads.policy_logits[0, 0, 1], 0.0, atol=0)
        np.testing.assert_allclose(grads.option_values[0, 0], [-4.0, 0.0], atol=1e-6)


def test_an_option_continues_ends_or_is_chosen_where_none_arrived():
    """β ≈ 0 (logit −50): the arriving option goes on; β ≈ 1 (logit 50): it ends and the
    ε-greedy policy over options (ε 0) picks the best, option 2; no option: it picks too."""
    cfg = oc.OptionCriticConfig(network="deep", num_options=3, epsilon=0.0)
    setup = oc.DeepSetup(cfg, None, None, None, 3, 2)
    values = jnp.tile(jnp.array([[0.0, 1.0, 2.0]]), (3, 1))
    logits = jnp.array([[-50.0, 0.0, 0.0], [50.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    arriving = jnp.array([0, 0, oc.NO_OPTION])
    option, chose, beta = oc.continue_or_choose(
        setup, values, logits, arriving, jax.random.PRNGKey(0)
    )
    np.testing.assert_array_equal(option, [0, 2, 2])
    np.testing.assert_array_equal(chose, [False, True, True])
    np.testing.assert_allclose(beta, [0.0, 1.0, 0.0], atol=1e-6)


def test_deep_rollout_restarts_options_with_each_episode():
    """CartPole capped at 3 steps: every env's episode ends at steps 2, 5, 8, …, and the step
    after each starts without an arriving option, choosing one; the other steps see the option
    of the step before arrive, across the two rollouts too."""
    cfg = compose(["agent=option_critic", "agent.network=deep", "agent.num_steps=7"]).agent
    env = envs.make(EnvConfig("CartPole-v1", num_envs=2, max_episode_steps=3))
    setup = oc.make_option_critic(cfg, env).train_step.args[0]
    state = oc.deep_init(setup, jax.random.PRNGKey(0))

    @jax.jit
    def rollout(carry, key):
        step = lambda c, k: oc.deep_rollout_step(setup, state.params, c, k)
        return jax.lax.scan(step, carry, jax.random.split(key, 7))

    carry, first = rollout((env.reset(jax.random.PRNGKey(1)), state.option), jax.random.key(2))
    _, second = rollout(carry, jax.random.key(3))
    for steps, starts in ((first, [0, 3, 6]), (second, [2, 5])):
        fresh = np.isin(np.arange(7), starts)
        np.testing.assert_array_equal(np.asarray(steps.arrived), ~fresh[:, None].repeat(2, 1))
        assert np.asarray(steps.chose)[fresh].all()
        ends = np.isin(np.arange(7), np.array(starts) - 1)
        np.testing.assert_array_equal(np.asarray(steps.truncated), ends[:, None].repeat(2, 1))


def test_evaluation_runs_each_option_until_it_ends():
    """Env 0's option 0 goes on (β ≈ 0) although option 1 is greedy in Q_Ω; env 1's option 0
    ends (β ≈ 1) and the greedy option 1 takes over; env 2 has none yet and takes option 1.
    Each acts greedily in its policy: option 0 prefers action 0, option 1 action 1."""
    cfg = oc.OptionCriticConfig(network="deep", num_options=2)
    outputs = oc.OptionOutputs(
        option_values=jnp.tile(jnp.array([[0.0, 1.0]]), (3, 1)),
        termination_logits=jnp.array([[-50.0, 0.0], [50.0, 0.0], [0.0, 0.0]]),
        policy_logits=jnp.tile(jnp.array([[[1.0, 0.0], [0.0, 1.0]]]), (3, 1, 1)),
    )

    class Net:  # the network's outputs, whatever the observation
        def apply(self, params, obs):
            return outputs

    setup = oc.DeepSetup(cfg, Net(), None, None, 3, 2)
    state = oc.DeepState(None, None, None, None, None)
    running = jnp.array([0, 0, oc.NO_OPTION], jnp.int32)
    action, option = oc.deep_evaluation_step(setup, state, None, running, jax.random.key(0))
    np.testing.assert_array_equal(option, [0, 1, 1])
    np.testing.assert_array_equal(action, [0, 1, 1])


def test_learning_rates_fall_to_zero_at_lr_decay_steps():
    """16 envs × 8 steps = 128 env steps per update: with lr_decay_steps 1,280 the factor is
    1 − 128u/1280 after u updates, 0 from the 10th on; 1 throughout without decay."""
    cfg = oc.OptionCriticConfig(network="deep", lr_decay_steps=1280)
    setup = oc.DeepSetup(cfg, None, None, None, 16, 2)
    scales = [float(oc.learning_rate_scale(setup, jnp.int32(u))) for u in (0, 5, 10, 20)]
    np.testing.assert_allclose(scales, [1.0, 0.5, 0.0, 0.0], atol=1e-7)
    constant = setup._replace(cfg=oc.OptionCriticConfig(network="deep"))
    assert float(oc.learning_rate_scale(constant, jnp.int32(10**6))) == 1.0


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["agent.network=tabular"], "agent.network='tabular' is not one of: linear, deep"),
        (["agent.num_options=0"], "agent.num_options=0 must be >= 1"),
        (["agent.deliberation_cost=-0.5"], "agent.deliberation_cost=-0.5 must be >= 0"),
        (["agent.temperature=0"], "agent.temperature=0.0 must be > 0"),
        (["agent.target_update_period=0"], "agent.target_update_period=0 must be >= 1"),
        (["agent.lr_decay_steps=-1"], "agent.lr_decay_steps=-1 must be >= 0"),
    ],
)
def test_deep_bad_settings_are_refused(overrides: list[str], message: str):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        compose(["agent=option_critic", "agent.network=deep", *overrides])


def test_deep_refuses_box_actions_through_the_cli():
    """Intra-option softmax policies need Discrete actions: one line, exit 2, nothing run."""
    out = cli("agent=option_critic", "agent.network=deep", "env=Pendulum-v1", timeout=120)
    assert out.returncode == 2, out.stderr
    [line] = error_lines(out.stderr)
    assert line.startswith("error: agent 'option_critic' needs a Discrete action space"), line


def test_every_hyperparameter_reaches_the_deep_program():
    """tests/jaxrl/test_hyper.py traces the linear agent; this is the same check on the deep
    one: each of HYPERPARAMETERS, passed as grid data, is an input its chunk's results use."""
    cls = oc.OptionCriticConfig
    grid = [
        f"grid.agent.{key}=[{getattr(cls(network='deep'), key)}]" for key in cls.HYPERPARAMETERS
    ]
    overrides = ["agent=option_critic", "agent.network=deep", "agent.hidden_sizes=[8]"]
    trainer = Trainer(compose([*overrides, "env=CartPole-v1", *grid, "eval.episodes=2"]))
    carry = jax.eval_shape(trainer.init, trainer.run_keys(), trainer.hyper)
    chunk = jax.make_jaxpr(trainer.chunk)(carry, trainer.hyper, jnp.int32(1), True)
    _, used = pe.dce_jaxpr(chunk.jaxpr, [True] * len(chunk.jaxpr.outvars))
    first = len(jax.tree.leaves(carry))
    names = sorted(trainer.hyper)
    assert sorted(n for i, n in enumerate(names) if not used[first + i]) == []


@pytest.mark.slow
def test_deep_option_critic_learns_cartpole(tmp_path):
    """The deep defaults (4 options, 16 envs × 8-step rollouts, critic lr 3e-3, intra-option lr
    5e-4, ξ 1, target copied every 5 updates) with the learning rates falling to 0 at the
    250k-step budget, 8 seeds in one program, evaluated with their options running.
    Thresholds: the median seed at 475 (the issue's), and a mean of 425, what one seed failing
    outright would still leave (7 × 500 + 9 over 8 is 438); the seeds measured:
    benchmarks/results/learning_tests.md."""
    result = jaxrl.train(
        "agent=option_critic",
        "agent.network=deep",
        "env=CartPole-v1",
        "num_seeds=8",
        "budget.env_steps=250000",
        "agent.lr_decay_steps=250000",
        "eval.every=400",
        "log.progress=false",
        "log.tensorboard=false",
        run_dir=tmp_path,
    )
    assert result.status == "completed"
    assert_mean_at_least(result.summary, 425)
    finals = seed_values(result.summary)
    assert np.median(finals) >= 475, f"per seed {finals.tolist()}"
