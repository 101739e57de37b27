"""The shared on-policy path: GAE, losses and distributions against hand-computed numbers, the
episodic rollout's step accounting, bad input, and 4 CPU devices against 1."""

from __future__ import annotations

import functools
import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import envs
from agents.a2c import A2CConfig, a2c_loss
from agents.ppo import PPOConfig, make_ppo, ppo_loss
from agents.reinforce import REINFORCEConfig, make_reinforce, reinforce_loss
from jaxrl.cli import compose
from jaxrl.config import ConfigError, EnvConfig
from jaxrl.datatypes import Box, Discrete
from jaxrl.distributions import Categorical, DiagGaussian, TanhGaussian
from jaxrl.networks import ActorCritic, action_head
from jaxrl.onpolicy import (
    Algorithm,
    Sample,
    gae,
    init,
    learning_rate,
    minibatch_loss,
    model,
    on_policy_setup,
    rollout,
    samples_of,
    shuffled_minibatches,
)

REPO = Path(__file__).resolve().parents[2]


def test_gae_truncated_bootstraps_and_terminated_does_not():
    # t=1 is truncated (bootstrap from V(final_obs) = 2.0), t=2 terminated (no bootstrap),
    # t=3 ends the rollout mid-episode (bootstrap from V of the next observation).
    rewards = jnp.array([1.0, 1.0, 1.0, 1.0])
    values = jnp.array([0.5, 0.6, 0.7, 0.8])
    next_values = jnp.array([0.6, 2.0, 0.9, 1.0])
    terminated = jnp.array([False, False, True, False])
    truncated = jnp.array([False, True, False, False])
    adv, ret = gae(rewards, values, next_values, terminated, truncated, gamma=0.9, lam=0.8)
    d0 = 1 + 0.9 * 0.6 - 0.5  # 1.04
    d1 = 1 + 0.9 * 2.0 - 0.6  # 2.2: bootstrapped from the final observation
    d2 = 1 - 0.7  # 0.3: terminal, nothing after it
    d3 = 1 + 0.9 * 1.0 - 0.8  # 1.1
    expected = np.array([d0 + 0.9 * 0.8 * d1, d1, d2, d3])
    np.testing.assert_allclose(adv, expected, rtol=1e-6)
    np.testing.assert_allclose(ret, expected + np.array(values), rtol=1e-6)


def test_gae_lambda_one_is_the_bootstrapped_discounted_return():
    rewards = jnp.array([[1.0], [2.0], [3.0]])
    values = jnp.array([[0.0], [1.0], [2.0]])
    next_values = jnp.array([[1.0], [2.0], [10.0]])  # V of the observation after the rollout: 10
    flags = jnp.zeros((3, 1), bool)
    _, ret = gae(rewards, values, next_values, flags, flags, gamma=0.5, lam=1.0)
    expected = [1 + 0.5 * 2 + 0.25 * 3 + 0.125 * 10, 2 + 0.5 * 3 + 0.25 * 10, 3 + 0.5 * 10]
    np.testing.assert_allclose(ret[:, 0], expected, rtol=1e-6)


def test_shuffled_minibatches_cover_every_step_once():
    data = jnp.arange(8 * 3).reshape(8, 3)  # [T, envs]
    mbs = shuffled_minibatches(data, jax.random.PRNGKey(0), 4)
    assert mbs.shape == (4, 2, 3)
    assert sorted(np.asarray(mbs).ravel().tolist()) == list(range(24))
    # every env column is shuffled with the same time indices
    np.testing.assert_array_equal(mbs[..., 1] - mbs[..., 0], 1)


def _categorical_sample(advantage: float, value: float = 0.5) -> tuple[Categorical, Sample]:
    dist = Categorical(jnp.array([0.0, math.log(3.0)]))  # probabilities 0.25, 0.75
    sample = Sample(
        obs=jnp.zeros(2),
        raw_action=jnp.array(1),
        log_prob=jnp.log(0.5),  # the acting policy gave the action probability 0.5
        value=jnp.array(0.0),
        advantage=jnp.array(advantage),
        target=jnp.array(1.0),
    )
    return dist, sample


ENTROPY = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))


@pytest.mark.parametrize("advantage, policy_loss", [(2.0, -2.4), (-1.0, 1.5)])
def test_ppo_loss_by_hand(advantage, policy_loss):
    cfg = PPOConfig(clip_eps=0.2, vf_coef=0.5, ent_coef=0.01, clip_value=True)
    dist, sample = _categorical_sample(advantage)
    loss, m = ppo_loss(cfg, dist, jnp.array(0.5), sample)
    # ratio = 0.75 / 0.5 = 1.5; A>0: min(1.5A, 1.2A) = 1.2A; A<0: min(-1.5, -1.2) = -1.5.
    assert m["policy_loss"] == pytest.approx(policy_loss, rel=1e-6)
    # value 0.5 clipped to the old 0 ± 0.2 = 0.2: max((0.5-1)², (0.2-1)²) / 2 = 0.32
    assert m["value_loss"] == pytest.approx(0.32, rel=1e-6)
    assert m["entropy"] == pytest.approx(ENTROPY, rel=1e-6)
    assert m["clip_fraction"] == 1.0
    assert loss == pytest.approx(policy_loss + 0.5 * 0.32 - 0.01 * ENTROPY, rel=1e-6)
    unclipped = PPOConfig(clip_value=False)
    _, m = ppo_loss(unclipped, dist, jnp.array(0.5), sample)
    assert m["value_loss"] == pytest.approx(0.125, rel=1e-6)


def test_a2c_and_reinforce_losses_by_hand():
    dist, sample = _categorical_sample(2.0)
    loss, m = a2c_loss(A2CConfig(vf_coef=0.5, ent_coef=0.01), dist, jnp.array(0.5), sample)
    assert m["policy_loss"] == pytest.approx(-math.log(0.75) * 2.0, rel=1e-6)
    assert loss == pytest.approx(-math.log(0.75) * 2 + 0.5 * 0.125 - 0.01 * ENTROPY, rel=1e-6)
    learned = REINFORCEConfig(baseline="learned", vf_coef=0.5, ent_coef=0.0)
    loss, _ = reinforce_loss(learned, dist, jnp.array(0.5), sample)
    assert loss == pytest.approx(-math.log(0.75) * 2 + 0.5 * 0.125, rel=1e-6)
    mean = REINFORCEConfig(baseline="mean", ent_coef=0.0)
    loss, _ = reinforce_loss(mean, dist, jnp.array(0.5), sample)
    assert loss == pytest.approx(-math.log(0.75) * 2, rel=1e-6)


def test_gaussian_log_prob_and_entropy_match_scipy():
    mean, log_std = jnp.array([0.3, -1.0]), jnp.array([-0.5, 0.2])
    dist = DiagGaussian(mean, log_std, jnp.full(2, -jnp.inf), jnp.full(2, jnp.inf))
    x = jnp.array([0.1, 0.7])
    scale = np.exp(np.asarray(log_std))
    assert dist.log_prob(x) == pytest.approx(stats.norm.logpdf(x, mean, scale).sum(), rel=1e-5)
    assert dist.entropy() == pytest.approx(stats.norm.entropy(mean, scale).sum(), rel=1e-5)
    bounded = DiagGaussian(mean, log_std, jnp.full(2, -0.5), jnp.full(2, 0.5))
    np.testing.assert_allclose(bounded.env_action(jnp.array([-2.0, 0.2])), [-0.5, 0.2])


def test_tanh_gaussian_log_det_matches_numerical_density():
    """exp(log π) of the squashed sample equals dF/da of its exact CDF on [-2, 2]."""
    mu, sigma, low, high = 0.3, math.exp(-0.5), -2.0, 2.0
    dist = TanhGaussian(
        jnp.array([mu]), jnp.array([math.log(sigma)]), jnp.array([low]), jnp.array([high])
    )
    a = np.linspace(-1.9, 1.9, 39)
    u = np.arctanh(a / 2.0)
    cdf = lambda x: stats.norm.cdf((np.arctanh(x / 2.0) - mu) / sigma)
    h = 1e-4
    numerical = (cdf(a + h) - cdf(a - h)) / (2 * h)
    density = np.exp(np.asarray(jax.vmap(lambda v: dist.log_prob(v[None]))(jnp.asarray(u))))
    np.testing.assert_allclose(density, numerical, rtol=2e-3, atol=1e-6)
    np.testing.assert_allclose(dist.env_action(jnp.asarray(u[:, None]))[:, 0], a, atol=1e-5)
    # stable far in the tails, where tanh saturates in float32
    assert np.isfinite(dist.log_prob(jnp.array([30.0])))


def test_action_head_refuses_what_cannot_work():
    with pytest.raises(ConfigError, match="squash_actions=true applies to Box"):
        action_head(Discrete(2), squash=True, agent="ppo")
    unbounded = Box(np.full(1, -np.inf), np.full(1, np.inf), (1,))
    with pytest.raises(ConfigError, match="needs a bounded Box"):
        action_head(unbounded, squash=True, agent="reinforce")
    grid = Box(np.zeros((2, 2)), np.ones((2, 2)), (2, 2))
    with pytest.raises(ConfigError, match="flat"):
        action_head(grid, squash=False, agent="ppo")


def test_nature_cnn_actor_critic_shapes():
    net = ActorCritic(6, continuous=False, torso="nature_cnn", shared_torso=True)
    frames = jax.ShapeDtypeStruct((3, 84, 84, 4), jnp.uint8)
    params = jax.eval_shape(net.init, jax.random.PRNGKey(0), frames)  # shapes only: no compile
    assert params["params"]["torso"]["Dense_0"]["kernel"].shape == (7 * 7 * 64, 512)
    (logits,), value = jax.eval_shape(net.apply, params, frames)
    assert logits.shape == (3, 6) and value.shape == (3,)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["agent=ppo", "agent.num_minibatches=3"], "must divide agent.num_steps=128"),
        (["agent=ppo", "agent.clip_eps=0"], "clip_eps"),
        (["agent=a2c", "agent.gamma=1.5"], "gamma"),
        (["agent=reinforce", "agent.baseline=critic"], "learned, mean, none"),
    ],
)
def test_bad_hyperparameters_are_config_errors(overrides, message):
    with pytest.raises(ConfigError, match=message):
        compose(overrides)


def test_unsupported_heads_fail_before_compiling():
    cartpole = envs.make(EnvConfig(id="CartPole-v1"))
    with pytest.raises(ConfigError, match="discrete actions"):
        make_reinforce(REINFORCEConfig(squash_actions=True), cartpole, 1e4)
    with pytest.raises(ConfigError, match="nature_cnn needs image observations"):
        make_ppo(PPOConfig(torso="nature_cnn"), cartpole, 1e4)


def test_episodic_rollout_counts_exactly_one_episode_per_env():
    env = envs.make(EnvConfig(id="CartPole-v1", num_envs=3, max_episode_steps=40))
    agent = make_reinforce(REINFORCEConfig(), env, 1e4)
    state = agent.init(jax.random.PRNGKey(0))
    env_state = env.reset(jax.random.PRNGKey(1))
    step = jax.jit(agent.train_step)
    for i in range(3):
        state, env_state, m = step(state, env_state, jax.random.PRNGKey(i))
        assert int(m["episodes"]) == 3
        # every env waits at a fresh episode start, so the next iteration begins one
        assert np.all(np.asarray(env_state[0].time) == 0)
        assert int(m["env_steps"]) == pytest.approx(float(m["episode_return"]) * 3, abs=1e-3)
        assert int(m["env_steps_computed"]) == 40 * 3


DEVICE_SCRIPT = textwrap.dedent(
    """
    import json
    import jax, numpy as np
    import envs
    from agents.ppo import PPOConfig, make_ppo
    from jaxrl.config import EnvConfig

    results = {"devices": jax.device_count()}
    for env_id in ("CartPole-v1", "Pendulum-v1"):  # categorical and Gaussian heads
        env = envs.make(EnvConfig(id=env_id, num_envs=4))
        cfg = PPOConfig(num_steps=8, num_minibatches=2, update_epochs=2, hidden_sizes=(16,))
        agent = make_ppo(cfg, env, total_env_steps=1e3)

        def run(key, agent=agent, env=env):
            init_key, env_key, loop_key = jax.random.split(key, 3)

            def iteration(carry, k):
                state, env_state, metrics = agent.train_step(*carry, k)
                return (state, env_state), metrics["loss"]

            carry = (agent.init(init_key), env.reset(env_key))
            (state, env_state), loss = jax.lax.scan(iteration, carry, jax.random.split(loop_key, 3))
            return agent.params(state), loss, env_state[1].obs

        keys = jax.random.split(jax.random.PRNGKey(0), 2)  # two seeds per program, vmapped
        out = jax.jit(jax.vmap(run))(keys)
        results[env_id] = [np.asarray(x).tolist() for x in out]
    print(json.dumps(results))
    """
)


def _start_on_devices(count: int) -> subprocess.Popen:
    devices = f"--xla_force_host_platform_device_count={count}"
    # JAX_PLATFORMS=cpu: the forced host devices are CPU devices, also on a machine with a GPU.
    env = {
        **os.environ,
        "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} {devices}",
        "JAX_PLATFORMS": "cpu",
    }
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    return subprocess.Popen(
        [sys.executable, "-c", DEVICE_SCRIPT],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )


def _result(proc: subprocess.Popen) -> dict:
    try:  # multi-device CPU programs have hung here; fail, never hang
        stdout, stderr = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    assert proc.returncode == 0, stderr
    return json.loads(stdout.strip().splitlines()[-1])


def test_four_devices_match_one():
    """Env batch and minibatches sharded over 4 devices, two vmapped seeds per device: the same
    trajectories (observations), losses and parameters as on one device."""
    procs = [_start_on_devices(1), _start_on_devices(4)]  # concurrently: each is mostly compile
    one, four = (_result(p) for p in procs)
    assert (one["devices"], four["devices"]) == (1, 4)
    for env_id in ("CartPole-v1", "Pendulum-v1"):
        params, loss, obs = four[env_id]
        np.testing.assert_allclose(obs, one[env_id][2], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(loss, one[env_id][1], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(params, one[env_id][0], rtol=1e-4, atol=1e-5)


def test_values_after_the_rollout_are_those_it_acted_with():
    """With separate torsos the rollout runs the actor alone and V(s) of its steps comes from one
    pass after it (`PolicyModel.step_value`): the same values and advantages as a rollout that
    keeps V(s) step by step (float rounding of a batched product aside). A shared torso keeps
    them from the rollout."""
    env = envs.make(EnvConfig("CartPole-v1", num_envs=3))
    cfg = PPOConfig(num_steps=16)
    algorithm = Algorithm(lambda d, v, s: ppo_loss(cfg, d, v, s), cfg.num_steps, gae_lambda=0.95)
    after = on_policy_setup(cfg, env, algorithm, 1e4)
    during = after._replace(policy=after.policy._replace(step_value=None))
    state = init(after, jax.random.PRNGKey(0))
    env_state = env.reset(jax.random.PRNGKey(1))

    def samples(setup):
        _, ro, _, _ = rollout(setup, state, env_state, jax.random.PRNGKey(2))
        return ro.value, samples_of(setup, state, ro, state.return_stats)

    (none, late), (kept, early) = (
        jax.jit(functools.partial(samples, s))() for s in (after, during)
    )
    assert none is None and kept.shape == (16, 3)
    np.testing.assert_allclose(late.value, kept, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(late.advantage, early.advantage, rtol=1e-5, atol=1e-5)
    assert float(jnp.abs(kept).max()) > 1e-3  # values, not zeros
    shared = on_policy_setup(PPOConfig(shared_torso=True), env, algorithm, 1e4)
    assert shared.policy.step_value is None


def test_learning_rate_anneals_linearly_to_zero_at_the_budget():
    """`learning_rate` alone: 2.5e-4 at the start, 3/4 of it after a quarter of a 1,000-step
    budget, 0 at and after the budget; constant without annealing."""
    env = envs.make(EnvConfig("CartPole-v1", num_envs=4))
    setup = on_policy_setup(
        PPOConfig(), env, Algorithm(lambda d, v, s: ppo_loss(PPOConfig(), d, v, s), 128), 1000.0
    )
    rates = [float(learning_rate(setup, jnp.float32(s))) for s in (0, 250, 1000, 1500)]
    np.testing.assert_allclose(rates, [2.5e-4, 1.875e-4, 0.0, 0.0], rtol=1e-6)
    flat = setup._replace(cfg=PPOConfig(anneal_lr=False))
    assert float(learning_rate(flat, jnp.float32(900))) == pytest.approx(2.5e-4)


def test_minibatch_loss_is_the_valid_samples_share_of_the_global_mean():
    """`minibatch_loss` alone on A2C's loss: the sum of the valid samples' losses (each recomputed
    from the network's distribution and value) over the global count; invalid ones add nothing."""
    cfg = A2CConfig(hidden_sizes=(8,))
    env = envs.make(EnvConfig("CartPole-v1", num_envs=2))
    algorithm = Algorithm(lambda d, v, s: a2c_loss(cfg, d, v, s), 4)
    setup = on_policy_setup(cfg, env, algorithm, 1e4)
    params = init(setup, jax.random.key(0)).params
    k1, k2 = jax.random.split(jax.random.key(1))
    obs = jax.random.normal(k1, (4, 4))
    batch = Sample(
        obs,
        jnp.array([0, 1, 1, 0]),
        jnp.zeros(4),
        jnp.zeros(4),
        jax.random.normal(k2, (4,)),
        jnp.array([1.0, -1.0, 0.5, 2.0]),
    )
    valid = jnp.array([True, True, False, True])
    loss, _ = minibatch_loss(setup, params, batch, valid, jnp.float32(5.0))
    samples = [jax.tree.map(lambda x, i=i: x[i], batch) for i in range(4)]
    per_sample = [float(a2c_loss(cfg, *model(setup, params, s.obs), s)[0]) for s in samples]
    expected = (per_sample[0] + per_sample[1] + per_sample[3]) / 5.0
    np.testing.assert_allclose(float(loss), expected, rtol=1e-5)
