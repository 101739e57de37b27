"""DDPG as TD3's learner with one critic, no smoothing and no delay: its defaults, its critic
target and loss against numbers recomputed from the networks, ERL's layer-norm option, and DDPG
learning Pendulum-v1 on a CPU budget."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from learning import PENDULUM_OFF_POLICY_20K, assert_mean_at_least

import envs
import jaxrl
from agents.ddpg import DDPGConfig
from jaxrl.agent_config import DDPG_KEYS
from jaxrl.cli import compose
from jaxrl.config import EnvConfig
from jaxrl.datatypes import EnvSpec, Transition
from jaxrl.deterministic import deterministic_networks, make_deterministic_learner
from jaxrl.prng import make_key

QUIET = ("log.progress=false", "log.tensorboard=false")


@pytest.fixture(scope="module")
def spec() -> EnvSpec:
    return envs.make(EnvConfig("Pendulum-v1")).spec  # Box [-2, 2], 3-D observations


def test_ddpg_defaults_are_td3_without_its_three_changes():
    cfg = compose(["agent=ddpg", "env=Pendulum-v1"]).agent
    assert isinstance(cfg, DDPGConfig) and cfg.name == "ddpg"
    assert (cfg.twin_critics, cfg.policy_delay, cfg.target_noise) == (False, 1, 0.0)
    assert all(getattr(cfg, key) == value for key, value in DDPG_KEYS.items())  # ERL's DDPG too
    assert (cfg.tau, cfg.actor_lr, cfg.critic_lr, cfg.layer_norm) == (0.005, 3e-4, 3e-4, False)


def test_one_critic_unsmoothed_target_and_an_actor_step_every_update(spec):
    """The critic loss of an update is mean((Q(s, a) − y)²) with y = r + γ·(1 − terminated)·
    Q'(s', μ'(s')), no noise on μ'; the actor and both targets move on every update."""
    cfg = DDPGConfig(hidden_sizes=(16,), gamma=0.9)
    nets, learner = deterministic_networks(cfg, spec), make_deterministic_learner(cfg, spec)
    state0 = learner.init(make_key(0))
    assert jax.tree.leaves(state0.critic_params)[0].shape[0] == 1
    k1, k2, k3 = jax.random.split(make_key(1), 3)
    action = jax.random.uniform(k2, (6, 1), minval=-2.0, maxval=2.0)
    batch = Transition(
        jax.random.normal(k1, (6, 3)),
        action,
        jnp.arange(6.0),
        jnp.array([False, True, False, False, True, False]),
        jnp.array([False, False, True, False, False, False]),
        jax.random.normal(k3, (6, 3)),
    )
    critic = lambda params, obs, a: nets.critics.net.apply(
        jax.tree.map(lambda p: p[0], params), obs, a
    )
    next_q = critic(
        state0.target_critic_params,
        batch.next_obs,
        nets.actor.apply(state0.target_actor_params, batch.next_obs),
    )
    y = np.arange(6.0) + 0.9 * (1 - np.asarray(batch.terminated)) * np.asarray(next_q)
    q = critic(state0.critic_params, batch.obs, action / 2.0)  # the critic sees [-1, 1] actions
    expected_loss = np.mean((np.asarray(q) - y) ** 2)

    update = jax.jit(learner.update)
    state1, metrics = update(state0, batch, make_key(2))
    np.testing.assert_allclose(float(metrics["critic_loss"]), expected_loss, rtol=1e-5)
    state2, _ = update(state1, batch, make_key(3))
    for before, after in ((state0, state1), (state1, state2)):
        for field in ("actor_params", "target_actor_params", "target_critic_params"):
            a, b = jax.tree.leaves(getattr(before, field)), jax.tree.leaves(getattr(after, field))
            assert not all(np.array_equal(x, z) for x, z in zip(a, b, strict=True)), field


def test_layer_norm_normalises_every_hidden_layer_of_actor_and_critic(spec):
    """ERL's DDPG: LayerNorm after each hidden Dense, before the activation. With its initial
    scale 1 and bias 0, each hidden pre-activation of the critic has mean 0 and variance 1."""
    cfg = DDPGConfig(hidden_sizes=(32, 32), layer_norm=True)
    state = make_deterministic_learner(cfg, spec).init(make_key(0))
    assert set(state.actor_params["params"]["Torso_0"]) == {
        "Dense_0", "LayerNorm_0", "Dense_1", "LayerNorm_1"
    }  # fmt: skip
    assert set(state.critic_params["params"]["Torso_0"]) == set(
        state.actor_params["params"]["Torso_0"]
    )
    nets = deterministic_networks(cfg, spec)
    obs, action = jax.random.normal(make_key(1), (5, 3)), jnp.zeros((5, 1))
    params = jax.tree.map(lambda p: p[0], state.critic_params)
    _, inter = nets.critics.net.apply(
        params, obs, action, capture_intermediates=lambda m, _: "LayerNorm" in type(m).__name__
    )
    normalised = inter["intermediates"]["Torso_0"]["LayerNorm_0"]["__call__"][0]
    np.testing.assert_allclose(normalised.mean(-1), 0.0, atol=1e-5)
    np.testing.assert_allclose(normalised.var(-1), 1.0, rtol=1e-3)


def test_pytorch_layer_init_reaches_actor_and_critic(spec):
    """`layer_init=pytorch` through the learner's config: the Pendulum critic's first layer
    (3 features + 1 action in) starts uniform in ±1/√4 = ±0.5, biases too; the actor's head
    (32 in) in ±1/√32. Flax's default leaves biases at 0."""
    for scheme in ("pytorch", "lecun_normal"):
        cfg = DDPGConfig(hidden_sizes=(32, 32), layer_init=scheme)
        state = make_deterministic_learner(cfg, spec).init(make_key(0))
        first = state.critic_params["params"]["Torso_0"]["Dense_0"]
        head = state.actor_params["params"]["Dense_0"]
        for layer, bound in ((first, 0.5), (head, 1 / np.sqrt(32))):
            kernel, bias = np.asarray(layer["kernel"]), np.asarray(layer["bias"])
            if scheme == "pytorch":
                assert np.abs(kernel).max() <= bound and 0 < np.abs(bias).max() <= bound
            else:
                assert not bias.any()
        if scheme == "pytorch":
            assert np.abs(first["kernel"]).max() > 0.45  # 128 draws fill ±0.5


@pytest.mark.slow
def test_ddpg_learns_pendulum_in_20k_steps(tmp_path):
    """DDPG with 64-64 networks, Adam 1e-3 and 1,000 random warm-up steps (the rest: DDPG's
    defaults), 2 seeds in one program: the mean final return (10 deterministic episodes) after
    20k env steps reaches −250, the same bar as TD3 and SAC, well below both seeds measured
    (benchmarks/results/learning_tests.md)."""
    result = jaxrl.train(
        "agent=ddpg",
        *PENDULUM_OFF_POLICY_20K,
        *QUIET,
        run_dir=tmp_path,
    )
    assert result.status == "completed"
    assert_mean_at_least(result.summary, -250)
