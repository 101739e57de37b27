"""P-DQN / MP-DQN against hand-computed numbers (the max-over-choices target, termination vs
truncation, the Q loss, the actor loss and its gradient, the multi-pass Q), parameter scaling and
exploration within the bounds, the hybrid actions the driver stores and draws, the CLI's refusal
of non-hybrid envs, a grid of runs, and P-DQN learning Platform-v0 on a CPU budget."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hybrid_helpers import PLATFORM_HIGH, PLATFORM_LOW, check_platform_grid
from learning import assert_mean_at_least
from trees import tree_equal

import envs
import jaxrl
from agents.pdqn import (
    PDQNConfig,
    act,
    actor_loss,
    explore,
    make_learner,
    make_pdqn,
    make_setup,
    q_loss,
    q_values,
    td_target,
)
from jaxrl.cli import compose
from jaxrl.config import ConfigError, EnvConfig
from jaxrl.continuous import inverted_gradients
from jaxrl.datatypes import Box, Transition
from jaxrl.offpolicy import exploring_policy, init, num_updates, off_policy_setup
from jaxrl.prng import make_key

QUIET = ("log.progress=false", "log.tensorboard=false")


@pytest.fixture(scope="module")
def platform() -> envs.Env:
    return envs.make(EnvConfig("Platform-v0"), num_envs=4)  # 9 features; 3 choices, 1 each


def one_unit(q_hidden_kernel: np.ndarray, hidden_bias: float, head_kernel, head_bias) -> dict:
    """Parameters of a network with one hidden unit (`hidden_sizes=(1,)`)."""
    return {
        "params": {
            "Torso_0": {
                "Dense_0": {
                    "kernel": jnp.asarray(q_hidden_kernel, jnp.float32)[:, None],
                    "bias": jnp.array([hidden_bias], jnp.float32),
                }
            },
            "Dense_0": {
                "kernel": jnp.asarray(head_kernel, jnp.float32)[None, :],
                "bias": jnp.asarray(head_bias, jnp.float32),
            },
        }
    }


def constant_q(values: list[float], inputs: int = 9 + 3) -> dict:
    """Q(s, x) = `values` whatever s and x."""
    return one_unit(np.zeros(inputs), 0.0, np.zeros(len(values)), values)


def linear_q(values: list[float], obs_size: int = 9, num_parameters: int = 3) -> dict:
    """Q_k(s, x) = values[k]·(10 + Σ_p x_p): one ReLU unit 10 + Σ x, active for x in [−1, 1]."""
    kernel = np.concatenate([np.zeros(obs_size), np.ones(num_parameters)])
    return one_unit(kernel, 10.0, values, np.zeros(len(values)))


def constant_actor(biases: list[float], obs_size: int = 9) -> dict:
    """x(s) = tanh(biases) whatever s."""
    return one_unit(np.zeros(obs_size), 0.0, np.zeros(len(biases)), biases)


def batch_of(obs: jax.Array, choice, parameters, reward, terminated, truncated) -> Transition:
    """Transitions as the driver stores them: (choice, parameters in env units)."""
    action = (jnp.asarray(choice, jnp.int32), jnp.asarray(parameters, jnp.float32))
    flags = lambda x: jnp.asarray(x, bool)
    return Transition(
        obs, action, jnp.asarray(reward, jnp.float32), flags(terminated), flags(truncated), obs
    )


def test_td_target_is_the_target_max_over_choices_and_stops_only_at_termination(platform):
    """Target Q' = (1, 5, 2) everywhere, online Q = (100, 0, 0) (must not be used): y = r + 0.9·5
    for the plain and the truncated row, y = r for the terminated one."""
    cfg = PDQNConfig(hidden_sizes=(1,), gamma=0.9)
    setup = make_setup(cfg, platform.spec)
    state = make_learner(cfg, platform.spec).init(make_key(0))
    state = state._replace(
        q_params=constant_q([100.0, 0, 0]), target_q_params=constant_q([1, 5, 2])
    )
    obs = jax.random.normal(make_key(1), (3, 9))
    reward, terminated = jnp.array([1.0, 2.0, 3.0]), jnp.array([False, True, False])
    target = td_target(setup, state, reward, terminated, obs)
    np.testing.assert_allclose(target, [1 + 0.9 * 5, 2.0, 3 + 0.9 * 5], rtol=1e-6)

    # The stored choice's Q (online: 0, 1, 2 at choices 0, 2, 1 below) against it:
    # errors 0 − 5.5, 2 − 2, 1 − 7.5: mean square (30.25 + 0 + 42.25) / 3.
    setup_q = state._replace(q_params=constant_q([0.0, 1.0, 2.0])).q_params
    batch = batch_of(obs, [0, 2, 1], np.zeros((3, 3)), reward, terminated, [False] * 3)
    loss, q_taken = q_loss(setup, setup_q, batch, target)
    np.testing.assert_allclose(q_taken, [0.0, 2.0, 1.0])
    np.testing.assert_allclose(loss, (5.5**2 + 0.0 + 6.5**2) / 3, rtol=1e-6)


@pytest.mark.parametrize("multi_pass", [False, True])
def test_twin_q_networks_take_the_smaller_max_learn_both_and_act_on_the_first(platform, multi_pass):
    """HyAR's PDQN-TD3: target networks Q'₁ = (1, 5, 2) and Q'₂ = (3, 4, 0) give
    min(max Q'₁, max Q'₂) = min(5, 4) = 4, so y = r + 0.9·4 but where terminated. Online Q₁ =
    (0, 1, 2), Q₂ = (1, 1, 1) at the stored choices 0, 2, 1: the loss is the sum of both mean
    squares. Acting follows Q₁ alone: with Q₁ = (0, 0, 9) and Q₂ = (9, 0, 0) the choice is 2. The
    same with MP-DQN's passes (these Q-networks ignore the parameters)."""
    cfg = PDQNConfig(hidden_sizes=(1,), gamma=0.9, twin_q=True, multi_pass=multi_pass)
    setup = make_setup(cfg, platform.spec)
    state = make_learner(cfg, platform.spec).init(make_key(0))
    twin = lambda a, b: jax.tree.map(lambda x, y: jnp.stack([x, y]), a, b)
    assert jax.tree.map(jnp.shape, state.q_params) == jax.tree.map(
        lambda x: (2, *x.shape), constant_q([0.0, 0, 0])
    )
    state = state._replace(target_q_params=twin(constant_q([1, 5, 2]), constant_q([3, 4, 0])))
    obs = jax.random.normal(make_key(1), (3, 9))
    reward, terminated = jnp.array([1.0, 2.0, 3.0]), jnp.array([False, True, False])
    target = td_target(setup, state, reward, terminated, obs)
    np.testing.assert_allclose(target, [1 + 0.9 * 4, 2.0, 3 + 0.9 * 4], rtol=1e-6)

    online = twin(constant_q([0.0, 1.0, 2.0]), constant_q([1.0, 1.0, 1.0]))
    batch = batch_of(obs, [0, 2, 1], np.zeros((3, 3)), reward, terminated, [False] * 3)
    loss, q_taken = q_loss(setup, online, batch, target)
    np.testing.assert_allclose(q_taken, [0.0, 2.0, 1.0])  # the first network's
    first = (4.6**2 + 0.0 + 5.6**2) / 3  # errors 0 − 4.6, 2 − 2, 1 − 6.6
    second = (3.6**2 + 1.0 + 5.6**2) / 3  # errors 1 − 4.6, 1 − 2, 1 − 6.6
    np.testing.assert_allclose(loss, first + second, rtol=1e-6)

    state = state._replace(q_params=twin(constant_q([0.0, 0, 9]), constant_q([9.0, 0, 0])))
    choice, _ = act(setup, state, obs, make_key(2), True)
    np.testing.assert_array_equal(choice, [2, 2, 2])


def test_reward_scale_multiplies_the_reward_in_the_target_only(platform):
    """MP-DQN's Goal setting: y = r/50 + 0.9·5 with the target Q' = (1, 5, 2)."""
    cfg = PDQNConfig(hidden_sizes=(1,), gamma=0.9, reward_scale=1 / 50)
    setup = make_setup(cfg, platform.spec)
    state = make_learner(cfg, platform.spec).init(make_key(0))
    state = state._replace(target_q_params=constant_q([1, 5, 2]))
    obs = jax.random.normal(make_key(1), (2, 9))
    target = td_target(setup, state, jnp.array([50.0, -5.0]), jnp.array([False, True]), obs)
    np.testing.assert_allclose(target, [1 + 0.9 * 5, -0.1], rtol=1e-6)


def test_the_goal_parameter_prior_starts_x_at_mp_dqns_hand_made_policy():
    """x(s) at initialisation (last layer ~N(0, 1e-4)) is the prior's bias + weights · s, in
    [−1, 1] units: kick-to x = −0.375 + 0.5·s10 + 0.0625·s14, kick-to y = 5/6·s11 + 1/9·s15,
    the shots ±0.8573 whatever s."""
    goal = envs.make(EnvConfig("Goal-v0"), num_envs=1)
    setup = make_setup(PDQNConfig(parameter_prior=True), goal.spec)
    params = setup.actor.init(make_key(0), jnp.zeros(17))
    obs = np.zeros(17, np.float32)
    obs[[10, 11, 14, 15, 16]] = [0.2, -0.4, 1.0, 0.5, 0.3]
    x = setup.actor.apply(params, jnp.asarray(obs))
    expected = [-0.375 + 0.1 + 0.0625, 5 / 6 * -0.4 + 0.5 / 9, 0.857347, -0.857347]
    np.testing.assert_allclose(x, expected, atol=5e-3)
    plain = make_setup(PDQNConfig(), goal.spec)
    np.testing.assert_allclose(plain.actor.apply(params, jnp.asarray(obs)), 0.0, atol=5e-3)


def test_a_parameter_prior_on_an_env_without_one_is_refused(platform):
    with pytest.raises(ConfigError, match=r"env 'Platform-v0' has no hand-made parameter policy"):
        make_setup(PDQNConfig(parameter_prior=True), platform.spec)


def test_an_update_ignores_truncation_but_not_termination(platform):
    """The driver stores a truncated step's true successor, so the update treats it exactly as
    a step inside the episode; a terminated one changes the update."""
    cfg = PDQNConfig(hidden_sizes=(16,))
    learner = make_learner(cfg, platform.spec)
    state = learner.init(make_key(0))
    obs = jax.random.uniform(make_key(1), (8, 9))
    parameters = jax.random.uniform(make_key(2), (8, 3)) * PLATFORM_HIGH
    choice = jnp.arange(8) % 3
    plain = batch_of(obs, choice, parameters, jnp.ones(8), [False] * 8, [False] * 8)
    truncated = plain._replace(truncated=jnp.ones(8, bool))
    terminated = plain._replace(terminated=jnp.ones(8, bool))
    after = jax.jit(learner.update)
    plain_state, metrics = after(state, plain, make_key(3))
    assert tree_equal(after(state, truncated, make_key(3))[0], plain_state)
    assert not tree_equal(after(state, terminated, make_key(3))[0].q_params, plain_state.q_params)
    assert set(metrics) == {"loss", "q_mean", "actor_loss"}


@pytest.mark.parametrize("multi_pass", [False, True])
def test_actor_loss_and_its_gradient_by_hand(platform, multi_pass):
    """Q_k = c_k·(10 + Σ_p x_p) with c = (1, 2, 3), x = tanh(b), b = (0.5, −0.2, 0.1).
    P-DQN: Σ_k Q_k = 6·(10 + Σ_p x_p), so the loss is −6·(10 + Σ x) and ∂/∂b_p = −6·(1 − x_p²).
    MP-DQN: pass k sees x_k alone, Q_k = c_k·(10 + x_k): the loss is −Σ_k c_k·(10 + x_k) and
    ∂/∂b_p = −c_p·(1 − x_p²)."""
    cfg = PDQNConfig(hidden_sizes=(1,), multi_pass=multi_pass, inverting_gradients=False)
    setup = make_setup(cfg, platform.spec)
    c, b = np.array([1.0, 2.0, 3.0]), np.array([0.5, -0.2, 0.1])
    x = np.tanh(b)
    obs = jax.random.normal(make_key(0), (5, 9))
    loss, grads = jax.value_and_grad(actor_loss, argnums=1)(
        setup, constant_actor(b.tolist()), linear_q(c.tolist()), obs
    )
    if multi_pass:
        want_loss, want_grad = -np.sum(c * (10 + x)), -c * (1 - x**2)
    else:
        want_loss, want_grad = -6 * (10 + x.sum()), -6 * (1 - x**2)
    np.testing.assert_allclose(loss, want_loss, rtol=1e-6)
    np.testing.assert_allclose(grads["params"]["Dense_0"]["bias"], want_grad, rtol=1e-5)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_inverting_gradients_by_hand(platform, sign):
    """Q_k = c_k·(10 + Σ_p x_p) and an unsquashed x = b. c = (1, 2, 3): ∂ΣQ/∂x_p = 6 > 0,
    scaled by (1 − x_p)/2, so b = (0.5, −0.2, 1.5) gives (1.5, 3.6, −1.5): the parameter beyond
    the bound is pushed back. c = −(1, 2, 3): −6 scaled by (x_p + 1)/2, so b = (0.5, −0.2, −1.5)
    gives (−4.5, −2.4, 1.5). The surrogate's gradient on b is minus that; its value is
    −Σ_p inverted_p·x_p."""
    cfg = PDQNConfig(hidden_sizes=(1,), inverting_gradients=True)
    setup = make_setup(cfg, platform.spec)
    c = sign * np.array([1.0, 2.0, 3.0])
    b = np.array([0.5, -0.2, 1.5 * sign])
    inverted = np.array([1.5, 3.6, -1.5]) if sign > 0 else np.array([-4.5, -2.4, 1.5])
    np.testing.assert_allclose(inverted_gradients(jnp.full(3, 6.0 * sign), b), inverted)
    obs = jax.random.normal(make_key(0), (5, 9))
    loss, grads = jax.value_and_grad(actor_loss, argnums=1)(
        setup, constant_actor(b.tolist()), linear_q(c.tolist()), obs
    )
    np.testing.assert_allclose(loss, -np.sum(inverted * b), rtol=1e-5)
    np.testing.assert_allclose(grads["params"]["Dense_0"]["bias"], -inverted, rtol=1e-5)


def test_multi_pass_q_is_each_choices_q_with_the_other_parameters_zeroed():
    """Goal-v0's layout (choice 0 owns parameters 0–1, choice 1 parameter 2, choice 2 parameter
    3): MP-DQN's Q_k is one pass of the network on x with every other choice's parameters zeroed,
    so it ignores them; P-DQN's Q_k sees them all."""
    spec = envs.make(EnvConfig("Goal-v0")).spec
    obs = jax.random.normal(make_key(0), (6, 17))
    x = jax.random.uniform(make_key(1), (6, 4), minval=-1, maxval=1)
    owners = np.array([[1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]], np.float32)
    multi = make_setup(PDQNConfig(hidden_sizes=(32, 16), multi_pass=True), spec)
    single = make_setup(PDQNConfig(hidden_sizes=(32, 16)), spec)
    np.testing.assert_array_equal(multi.owners, owners)
    params = multi.q_net.init(make_key(2), obs[0], x[0])

    q = q_values(multi, params, obs, x)
    assert q.shape == (6, 3)
    for k in range(3):
        one_pass = multi.q_net.apply(params, obs, x * owners[k])[:, k]
        np.testing.assert_allclose(q[:, k], one_pass, rtol=1e-5, atol=1e-6)
    # Moving choice 1's parameter moves Q_1 only under MP-DQN, every Q_k under P-DQN.
    moved = x.at[:, 2].add(0.5)
    changed = lambda setup: np.abs(
        q_values(setup, params, obs, moved) - q_values(setup, params, obs, x)
    ).max(axis=0)
    assert changed(multi)[0] == 0 and changed(multi)[2] == 0 and changed(multi)[1] > 1e-4
    assert (changed(single) > 1e-4).all()


@pytest.mark.parametrize("inverting_gradients", [False, True])
def test_parameters_are_scaled_into_the_bounds(platform, inverting_gradients):
    """An actor output of ±100 puts the parameters exactly on the Box's bounds (tanh, or the
    clip of the unsquashed actor), 0 mid-range; the greedy choice is the argmax of Q."""
    cfg = PDQNConfig(hidden_sizes=(1,), inverting_gradients=inverting_gradients)
    setup = make_setup(cfg, platform.spec)
    state = make_learner(cfg, platform.spec).init(make_key(0))
    obs = jnp.zeros((2, 9))
    for biases, want in (
        ([100.0, -100.0, 100.0], [30.0, 0.0, 430.0]),
        ([0.0, 0.0, 0.0], [15.0, 360.0, 215.0]),
    ):
        state = state._replace(actor_params=constant_actor(biases), q_params=constant_q([0, 3, 1]))
        choice, parameters = act(setup, state, obs, make_key(1), True)
        np.testing.assert_array_equal(choice, [1, 1])
        np.testing.assert_allclose(parameters, [want, want], rtol=1e-6)


def test_exploration_is_epsilon_greedy_with_noise_on_the_chosen_parameters_only(platform):
    """ε = 0: the greedy choice, noise (σ = 0.5 of the half-range) on its parameter alone,
    clipped to the bounds; ε = 1: uniform choices."""
    cfg = PDQNConfig(hidden_sizes=(1,), exploration_noise=0.5)
    setup = make_setup(cfg, platform.spec)
    state = make_learner(cfg, platform.spec).init(make_key(0))
    state = state._replace(
        actor_params=constant_actor([0.0, 0.0, 0.0]), q_params=constant_q([0, 3, 1])
    )
    obs = jnp.zeros((20_000, 9))
    choice, parameters = explore(setup, state, obs, make_key(1), jnp.float32(0.0))
    np.testing.assert_array_equal(choice, 1)
    np.testing.assert_array_equal(
        parameters[:, [0, 2]], np.broadcast_to([15.0, 215.0], (20_000, 2))
    )
    hop = np.asarray(parameters[:, 1])
    assert hop.min() == 0.0 and hop.max() == 720.0  # clipped: 2 σ reach the bounds
    np.testing.assert_allclose(np.median(hop), 360.0, atol=5.0)
    np.testing.assert_allclose(np.mean(np.abs(hop - 360.0) < 180.0), 0.6827, atol=0.01)  # ±σ

    choice, _ = explore(setup, state, obs, make_key(2), jnp.float32(1.0))
    np.testing.assert_allclose(
        np.bincount(np.asarray(choice), minlength=3) / 20_000, 1 / 3, atol=0.015
    )


def test_the_driver_stores_hybrid_actions_and_warms_up_uniformly(platform):
    """The buffer holds `(choice int32, parameters float32[3])` per transition; before
    `learning_starts` the collecting policy draws a uniform choice with parameters uniform in
    the bounds, after it the learner's exploration."""
    cfg = PDQNConfig(learning_starts=500, iteration_steps=30_000, buffer_size=30_000)
    env = platform.with_num_envs(30_000)
    learner = make_learner(cfg, env.spec)
    setup = off_policy_setup(cfg, env, learner)
    state = init(setup, make_key(0))
    choice, parameters = state.buffer.data.action
    assert choice.shape == (cfg.buffer_size,) and choice.dtype == jnp.int32
    assert parameters.shape == (cfg.buffer_size, 3) and parameters.dtype == jnp.float32

    obs = jnp.zeros((30_000, 9))
    warm = exploring_policy(setup, state.learner, jnp.int32(0))(obs, make_key(1))
    np.testing.assert_allclose(np.bincount(np.asarray(warm[0])) / 30_000, 1 / 3, atol=0.015)
    assert (warm[1] >= PLATFORM_LOW).all() and (warm[1] <= PLATFORM_HIGH).all()
    np.testing.assert_allclose(warm[1].mean(axis=0), PLATFORM_HIGH / 2, rtol=0.02)
    explored = exploring_policy(setup, state.learner, jnp.int32(500))(obs, make_key(1))
    want = learner.explore(state.learner, obs, jax.random.split(make_key(1))[0], jnp.int32(500))
    assert tree_equal(explored, want)


def test_anneal_lr_brings_both_learning_rates_to_zero_at_the_budgets_last_update(platform):
    """4 envs, one update per batched step once 16 steps are taken (the 4th round): a 64-step
    budget is 16 rounds, 13 of them learning, the horizon. The second iteration (updates 6 to
    13) still moves both networks; past the budget updates leave them as they are."""
    cfg = PDQNConfig(
        anneal_lr=True,
        learning_starts=16,
        batch_size=8,
        buffer_size=100,
        iteration_steps=32,
        hidden_sizes=(8,),
    )
    assert num_updates(cfg, 4, 64) == 13
    agent = make_pdqn(cfg, platform, total_env_steps=64)
    step = jax.jit(agent.train_step)
    state, env_state = step(agent.init(make_key(0)), platform.reset(make_key(1)), make_key(2))[:2]
    last, env_state, _ = step(state, env_state, make_key(3))
    later, _, _ = step(last, env_state, make_key(4))
    for params in ("q_params", "actor_params"):
        assert not tree_equal(getattr(last.learner, params), getattr(state.learner, params))
        assert tree_equal(getattr(later.learner, params), getattr(last.learner, params))


@pytest.mark.parametrize(
    "override, message",
    [
        ("agent.q_tau=0", r"agent.q_tau=0.0 must be in \(0, 1\]"),
        ("agent.eps_end=2", r"agent.eps_end=2.0 must be in \[0, 1\]"),
        ("agent.exploration_noise=-1", "agent.exploration_noise=-1.0 must be >= 0"),
        ("agent.actor_lr=0", "agent.actor_lr=0.0 must be > 0"),
        ("agent.reward_scale=0", "agent.reward_scale=0.0 must be > 0"),
    ],
)
def test_bad_hyperparameters_are_config_errors(override, message):
    with pytest.raises(ConfigError, match=message):
        compose(["agent=pdqn", "env=Platform-v0", override])


def test_unbounded_parameters_are_refused(platform):
    space = platform.spec.action_space
    inf = np.full(3, np.inf, np.float32)
    unbounded = dataclasses.replace(space, parameters=Box(-inf, inf, (3,)))
    spec = dataclasses.replace(platform.spec, action_space=unbounded)
    with pytest.raises(ConfigError, match=r"agent 'pdqn' needs bounded parameters"):
        make_setup(PDQNConfig(), spec)


def test_a_grid_trains_every_point_and_seed_and_loads_as_env_actions(tmp_path):
    """2 actor learning rates × 2 seeds in one program (MP-DQN, a tiny budget): every run's
    parameters differ, and a loaded policy gives Platform's `(choice, parameters)`."""
    result = jaxrl.train(
        "agent=pdqn",
        "env=Platform-v0",
        "agent.multi_pass=true",
        "agent.hidden_sizes=[16]",
        "agent.batch_size=16",
        "agent.learning_starts=100",
        "agent.iteration_steps=200",
        "budget.env_steps=400",
        "eval.every=2",
        "eval.episodes=2",
        "num_seeds=2",
        *QUIET,
        grid={"agent": {"actor_lr": [1e-2, 1e-4]}},
        run_dir=tmp_path,
    )
    check_platform_grid(result, tmp_path, "actor_lr", [1e-2, 1e-4], 400)


@pytest.mark.slow
def test_pdqn_learns_platform_in_10k_steps(tmp_path):
    """P-DQN at its defaults (the MP-DQN reference's Platform settings, inverting gradients), 3
    seeds in one program, 10k env steps (~2,000 episodes; the reference trains 20,000): the
    mean over seeds of the final evaluation return (20 greedy episodes; 1 is the goal, a random
    policy gets 0.15, the second gap is at 0.72) reaches 0.6, which needs two seeds past the
    second gap. A learned seed's greedy policy swings between success and failure from one
    evaluation to the next (benchmarks/results/pdqn_platform.md), so one seed caught low is
    allowed (the seeds measured: benchmarks/results/learning_tests.md)."""
    result = jaxrl.train(
        "agent=pdqn",
        "env=Platform-v0",
        "num_seeds=3",
        "budget.env_steps=10000",
        "eval.every=5",
        "eval.episodes=20",
        *QUIET,
        run_dir=tmp_path,
    )
    assert result.status == "completed"
    assert result.summary["env_steps"] == 10_000
    assert_mean_at_least(result.summary, 0.6)
