"""HyAR-TD3 against hand-computed numbers (the VAE's loss terms, nearest-embedding decoding, the
latent range and its affine maps, which sampled latents are relabelled and to what), termination
vs truncation, acting within the parameter bounds, the warm-up's stored actions, the VAE's
pre-training and periodic schedule, TD3's annealed learning rates, refusals, a grid of runs, and
HyAR learning Platform-v0."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hybrid_helpers import PLATFORM_HIGH, PLATFORM_LOW, check_platform_grid
from learning import assert_mean_at_least
from trees import tree_equal

import envs
import jaxrl
from agents.hyar import (
    HyARAction,
    HyARConfig,
    LatentRange,
    VAEFit,
    act,
    env_action,
    episode_vae_steps_due,
    exploration_sigma,
    inverting_gradients_at_bounds,
    latent_range,
    make_hyar,
    make_learner,
    make_setup,
    nearest_choice,
    random_action,
    relabel,
    td3_updates,
    to_actor_range,
    to_encoder_range,
    train_vae,
    vae_loss,
    vae_pass,
    vae_step,
)
from jaxrl import replay
from jaxrl.cli import compose
from jaxrl.config import ConfigError, EnvConfig
from jaxrl.datatypes import Transition
from jaxrl.offpolicy import exploring_policy, init, off_policy_setup, sample_batch
from jaxrl.parallel import RUN_AXIS
from jaxrl.prng import make_key

QUIET = ("log.progress=false", "log.tensorboard=false")
# Choice embeddings e_k = tanh(E_k) of the tiny VAE: nearest to z_k decides the choice.
TABLE = np.array([[0.5, 0.0], [-0.5, 0.0], [0.0, 0.8]], np.float32)
# Two-dimensional z_k and z_x, one-unit VAE layers: numbers small enough to follow by hand.
TINY = {
    "hidden_sizes": (4,),
    "vae_hidden_size": 1,
    "discrete_latent_size": 2,
    "parameter_latent_size": 2,
}

# 40-step iterations, the warm-up the first: the VAE pre-trains after it, TD3 updates from the
# second on; no periodic VAE step.
FORTY_STEP_ITERATIONS = {
    **TINY,
    "learning_starts": 40,
    "iteration_steps": 40,
    "batch_size": 8,
    "vae_pretrain_steps": 2,
    "vae_every": 20,
    "vae_train_after": 1_000,
    "range_samples": 16,
}


@pytest.fixture(scope="module")
def platform() -> envs.Env:
    return envs.make(EnvConfig("Platform-v0"), num_envs=4)  # 9 features; 3 choices, 1 each


def dense(kernel, bias) -> dict:
    return {"kernel": jnp.asarray(kernel, jnp.float32), "bias": jnp.asarray(bias, jnp.float32)}


def tiny_vae(obs_size: int = 9) -> dict:
    """A VAE of one unit per layer whose every step can be followed by hand:
    encoder: h = relu(1 + e_k[0])·relu(2x), μ = (h, 0.5h + 0.5), log σ = (−5 → clipped −4, 0.1);
    decoder: v = relu(z₁ + z₂), decoded x = tanh(v), predicted s' − s = tanh(0.5v) per feature."""
    identity = dense([[1.0]], [0.0])
    condition = np.zeros((obs_size + 2, 1))
    condition[obs_size] = 1.0  # e_k's first coordinate
    return {
        "params": {
            "embeddings": jnp.arctanh(jnp.asarray(TABLE)),
            "encoder_condition": dense(condition, [1.0]),
            "encoder_parameters": dense([[2.0]], [0.0]),
            "encoder_hidden_0": identity,
            "encoder_hidden_1": identity,
            "latent_mean": dense([[1.0, 0.5]], [0.0, 0.5]),
            "latent_log_std": dense([[0.0, 0.0]], [-5.0, 0.1]),
            "decoder_condition": dense(np.zeros((obs_size + 2, 1)), [1.0]),
            "decoder_latent": dense([[1.0], [1.0]], [0.0]),
            "decoder_hidden_0": identity,
            "decoder_hidden_1": identity,
            "parameter_head": identity,
            "dynamics_hidden": identity,
            "dynamics_head": dense(np.full((1, obs_size), 0.5), np.zeros(obs_size)),
        }
    }


def constant_actor(setup, latent) -> dict:
    """μ(s) = `latent` whatever s: every weight zero, the head's bias atanh(latent)."""
    params = setup.nets.actor.init(make_key(0), jnp.zeros(9))
    params = jax.tree.map(jnp.zeros_like, params)
    head = params["params"]["DeterministicActor_0"]["Dense_0"]
    head["bias"] = jnp.arctanh(jnp.asarray(latent, jnp.float32))
    return params


def tiny(platform, **overrides):
    cfg = HyARConfig(**TINY, **overrides)
    setup = make_setup(cfg, platform.spec)
    state = jax.jit(make_learner(setup, platform.spec).init)(make_key(0))
    return setup, state._replace(vae_params=tiny_vae(), pretrained=jnp.array(True))


def transitions(obs, choice, parameters, latent, valid, next_obs, terminated=None) -> Transition:
    """Stored transitions: `HyARAction`s with reward 1 and the given end flags."""
    n = len(choice)
    action = HyARAction(
        jnp.asarray(choice, jnp.int32),
        jnp.asarray(parameters, jnp.float32),
        jnp.asarray(latent, jnp.float32),
        jnp.asarray(valid, bool),
    )
    flags = jnp.zeros(n, bool) if terminated is None else jnp.asarray(terminated, bool)
    return Transition(
        jnp.asarray(obs, jnp.float32), action, jnp.ones(n), flags, jnp.zeros(n, bool), next_obs
    )


def dense_layers(params) -> list[tuple[np.ndarray, np.ndarray]]:
    """Every (kernel, bias) pair in a parameter tree; a critic ensemble's carry a leading axis."""
    found = []

    def visit(tree):
        if isinstance(tree, dict) and "kernel" in tree:
            found.append((np.asarray(tree["kernel"]), np.asarray(tree["bias"])))
        elif isinstance(tree, dict | tuple | list):
            for child in tree.values() if isinstance(tree, dict) else tree:
                visit(child)

    visit(params)
    return found


def test_pytorch_layer_init_starts_every_layer_as_nn_linear(platform):
    """`layer_init=pytorch`: every dense layer of the actor, the two critics and the VAE starts as
    PyTorch's nn.Linear does, weights and biases uniform in ±1/√fan_in (fan_in: the kernel's
    rows), so their standard deviation is 1/√(3·fan_in). Flax's default (`lecun_normal`):
    biases 0 and weights of standard deviation 1/√fan_in."""
    for scheme, spread in (("pytorch", 1 / np.sqrt(3)), ("lecun_normal", 1.0)):
        cfg = HyARConfig(layer_init=scheme, hidden_sizes=(64, 64), vae_hidden_size=64)
        setup = make_setup(cfg, platform.spec)
        state = jax.jit(make_learner(setup, platform.spec).init)(make_key(0))
        params = (state.td3.actor_params, state.td3.critic_params, state.vae_params)
        layers = dense_layers(params)
        assert len(layers) == 3 + 3 + 13  # the actor, the critics (stacked), the VAE
        for kernel, bias in layers:
            fan_in = kernel.shape[-2]
            bound = 1 / np.sqrt(fan_in)
            if kernel.size >= 2_000:  # enough draws for the spread within 10%
                np.testing.assert_allclose(kernel.std(), spread * bound, rtol=0.1)
            if scheme == "pytorch":
                assert np.abs(kernel).max() <= bound and np.abs(bias).max() <= bound
                assert np.abs(bias).max() > 0
            else:
                assert not bias.any()


def test_vae_loss_terms_by_hand(platform):
    """The tiny VAE on three stored steps, ε fixed: each term recomputed from the layer rules in
    `tiny_vae`, and the loss 1·dynamics + 2·reconstruction + 0.5·KL."""
    setup, state = tiny(platform)
    choice, x = np.array([0, 1, 2]), np.array([[0.2], [0.7], [0.0]], np.float32)
    obs = np.asarray(jax.random.uniform(make_key(1), (3, 9)))
    next_obs = obs + np.linspace(-0.3, 0.3, 27, dtype=np.float32).reshape(3, 9)
    eps = np.array([[0.5, -1.0], [2.0, 0.3], [-0.4, 0.0]], np.float32)
    batch = transitions(obs, choice, x, np.zeros((3, 4)), [True] * 3, jnp.asarray(next_obs))

    h = np.maximum(1 + TABLE[choice, 0], 0) * np.maximum(2 * x[:, 0], 0)
    mean = np.stack([h, 0.5 * h + 0.5], axis=1)
    log_std = np.array([-4.0, 0.1])
    z = mean + np.exp(log_std) * eps
    v = np.maximum(z.sum(axis=1, keepdims=True), 0)
    dynamics = np.mean((np.tanh(0.5 * v) - (next_obs - obs)) ** 2)
    reconstruction = np.mean((np.tanh(v) - x) ** 2)
    kl = -0.5 * np.mean(1 + 2 * log_std - mean**2 - np.exp(2 * log_std))

    terms, latent = jax.jit(functools.partial(vae_pass, setup))(state.vae_params, batch, eps)
    np.testing.assert_allclose(latent, z, rtol=1e-5)
    np.testing.assert_allclose(terms.dynamics, dynamics, rtol=1e-5)
    np.testing.assert_allclose(terms.reconstruction, reconstruction, rtol=1e-5)
    np.testing.assert_allclose(terms.kl, kl, rtol=1e-5)
    loss = jax.jit(functools.partial(vae_loss, setup))(state.vae_params, batch, eps)
    np.testing.assert_allclose(loss, dynamics + 2 * reconstruction + 0.5 * kl, rtol=1e-5)


def test_the_choice_is_the_nearest_embedding_and_the_parameters_its_decoding(platform):
    """e = (0.5, 0), (−0.5, 0), (0, 0.8). z_k = (0.4, 0.1): squared distances 0.02, 0.82, 0.65
    → choice 0; (−0.1, 0.5): 0.61, 0.41, 0.10 → 2; (−0.3, −0.2): 0.68, 0.08, 1.09 → 1. Acting
    decodes z_x = (0.3, 0.2) mapped onto the range [(−2, 0), (2, 1)]: z = (0.6, 0.6), v = 1.2,
    x = tanh(1.2) into the chosen choice's slice of the Box, every other parameter mid-range."""
    embeddings = jnp.asarray(TABLE)
    latents = jnp.array([[0.4, 0.1], [-0.1, 0.5], [-0.3, -0.2]])
    np.testing.assert_array_equal(nearest_choice(embeddings, latents), [0, 2, 1])

    setup, state = tiny(platform)
    state = state._replace(latent_range=LatentRange(jnp.array([-2.0, 0.0]), jnp.array([2.0, 1.0])))
    center, half = (PLATFORM_HIGH + PLATFORM_LOW) / 2, (PLATFORM_HIGH - PLATFORM_LOW) / 2
    obs = jnp.zeros((2, 9))
    evaluate = jax.jit(lambda state: act(setup, state, obs, make_key(1), True))
    for z_k, want in (([0.4, 0.1], 0), ([-0.1, 0.5], 2), ([-0.3, -0.2], 1)):
        td3 = state.td3._replace(actor_params=constant_actor(setup, [*z_k, 0.3, 0.2]))
        choice, parameters = evaluate(state._replace(td3=td3))
        expected = center.copy()
        expected[want] = center[want] + half[want] * np.tanh(1.2)
        np.testing.assert_array_equal(choice, [want, want])
        np.testing.assert_allclose(parameters, [expected, expected], rtol=1e-5)


def test_latent_range_is_the_percentiles_of_encoder_samples_and_maps_affinely():
    """100 samples 0..99 (shuffled) and, in the second dimension, −0.5·(0..99): at 2% the range
    is sorted position 2 to 97, i.e. [2, 97] and [−48.5, −1]; at 0% the min and max. Actor
    latents −1, 0, 1 map to low, centre, high, and back."""
    values = np.asarray(jax.random.permutation(make_key(0), 100), np.float32)
    samples = jnp.stack([values, -0.5 * values], axis=1)
    bounds = latent_range(samples, 2.0)
    np.testing.assert_allclose(bounds.low, [2.0, -48.5])
    np.testing.assert_allclose(bounds.high, [97.0, -1.0])
    whole = latent_range(samples, 0.0)
    np.testing.assert_allclose(whole.low, [0.0, -49.5])
    np.testing.assert_allclose(whole.high, [99.0, 0.0])

    actor = jnp.array([[-1.0, -1.0], [0.0, 0.0], [1.0, 1.0], [0.5, -0.5]])
    mapped = to_encoder_range(bounds, actor)
    np.testing.assert_allclose(
        mapped, [[2, -48.5], [49.5, -24.75], [97, -1], [73.25, -36.625]], rtol=1e-6
    )
    np.testing.assert_allclose(to_actor_range(bounds, mapped), actor, atol=1e-6)
    collapsed = LatentRange(jnp.array([0.3]), jnp.array([0.3]))  # one value: still finite
    assert np.isfinite(to_actor_range(collapsed, jnp.array([0.3, 1.0]))).all()


def test_the_actor_output_passes_inverted_gradients():
    """Under the loss −Σ c·a, a = (0.5, −0.5, 0.9, −0.9), c = (2, 2, −2, −2): the ascent
    direction c is scaled by (1 − a)/2 where it raises a and by (a + 1)/2 where it lowers it,
    (0.5, 1.5, −1.9, −0.1); the loss's gradient is minus that. Forward, the identity."""
    a, c = jnp.array([0.5, -0.5, 0.9, -0.9]), jnp.array([2.0, 2.0, -2.0, -2.0])
    np.testing.assert_array_equal(inverting_gradients_at_bounds(a), a)
    grads = jax.grad(lambda x: -jnp.sum(c * inverting_gradients_at_bounds(x)))(a)
    np.testing.assert_allclose(grads, [-0.5, -1.5, 1.9, 0.1], rtol=1e-6)


def relabel_batch(valid=(True, True, True, False)) -> Transition:
    """Four stored steps for the tiny VAE, range [(−2, 0), (2, 1)], z_x = (0.3, 0.2) in all:
    decoded at z = (0.6, 0.6), v = 1.2, the predicted s' − s is tanh(0.6) per feature.
    0: z_k decodes to its choice 0, s' − s as predicted: kept.
    1: choice 1 but z_k decodes to 0: z_k relabelled; s' − s as predicted: z_x kept.
    2: z_k decodes to its choice 2; s' − s = 0, a squared error of tanh(0.6)² = 0.288 > 5·0.01:
       z_x relabelled.
    3: as 0 but from the warm-up (no latent): both relabelled."""
    obs = jax.random.uniform(make_key(5), (4, 9))
    delta = jnp.full((4, 9), np.tanh(0.6)).at[2].set(0.0)
    z_k = [[0.4, 0.1], [0.4, 0.1], [-0.1, 0.5], [0.4, 0.1]]
    latent = np.concatenate([np.array(z_k), np.tile([0.3, 0.2], (4, 1))], axis=1)
    x = [[0.1], [0.6], [0.25], [0.1]]
    return transitions(obs, [0, 1, 2, 0], x, latent, valid, obs + delta)


def test_relabelling_replaces_stale_latents_by_hand(platform):
    """Relabelled z_k is its choice's embedding (noise 0 here); relabelled z_x is the encoder's
    sample (μ + σε with μ = (h, 0.5h + 0.5), h = relu(1 + e_k[0])·2x) mapped back into actor
    units through the range and clipped; ε is the relabelling key's. Rates 2/4 and 2/4."""
    setup, state = tiny(platform, relabel_noise=0.0)
    bounds = LatentRange(jnp.array([-2.0, 0.0]), jnp.array([2.0, 1.0]))
    state = state._replace(latent_range=bounds, fit=VAEFit(*jnp.array([0.01, 0.0, 0.0])))
    batch = relabel_batch()
    key = make_key(7)
    out = jax.jit(functools.partial(relabel, setup))(state, batch, key)
    np.testing.assert_array_equal(out.discrete, [False, True, False, True])
    np.testing.assert_array_equal(out.parameter, [False, False, True, True])

    stored = np.asarray(batch.action.latent)
    choice, x = np.array([0, 1, 2, 0]), np.array([0.1, 0.6, 0.25, 0.1])
    h = np.maximum(1 + TABLE[choice, 0], 0) * 2 * x
    mean = np.stack([h, 0.5 * h + 0.5], axis=1)
    eps = np.asarray(jax.random.normal(jax.random.split(key)[1], (4, 2)))
    encoded = mean + np.exp([-4.0, 0.1]) * eps
    encoded_actor = np.clip((encoded - [0.0, 0.5]) / [2.0, 0.5], -1, 1)
    want = stored.copy()
    want[[1, 3], :2] = TABLE[[1, 0]]
    want[[2, 3], 2:] = encoded_actor[[2, 3]]
    np.testing.assert_allclose(out.latent, want, rtol=1e-5, atol=1e-6)

    # A looser threshold (100 × 0.01 > 0.288) keeps sample 2's z_x; a loud relabelling noise is
    # clipped to ±target_noise_clip (0.5) around the embedding, then to [−1, 1].
    setup, _ = tiny(platform, relabel_threshold=100.0, relabel_noise=1e3)
    out = jax.jit(functools.partial(relabel, setup))(state, batch, key)
    np.testing.assert_array_equal(out.parameter, [False, False, False, True])
    relabelled, embedding = np.asarray(out.latent)[[1, 3], :2], TABLE[[1, 0]]
    lower, upper = np.clip(embedding - 0.5, -1, 1), np.clip(embedding + 0.5, -1, 1)
    assert (np.isclose(relabelled, lower) | np.isclose(relabelled, upper)).all()

    # Checked as the reference checks it, unmapped: z = (0.3, 0.2), v = 0.5, a predicted s' − s
    # of tanh(0.25) = 0.245 per feature; against tanh(0.6) = 0.537 (samples 0, 1) the error is
    # 0.085, against 0 (sample 2) 0.060, both above 5·0.01: every z_x is relabelled alike.
    setup, _ = tiny(platform, relabel_noise=0.0, relabel_check_range="actor")
    out = jax.jit(functools.partial(relabel, setup))(state, batch, key)
    np.testing.assert_array_equal(out.parameter, [True, True, True, True])
    np.testing.assert_allclose(np.asarray(out.latent)[:, 2:], encoded_actor, rtol=1e-5, atol=1e-6)


def test_an_update_relabels_and_ignores_truncation_but_not_termination(platform):
    """The driver stores a truncated step's true successor, so the update treats it as a step
    inside the episode; a terminated one changes it. The update's relabelling rates are the
    batch's; before the VAE's pre-training an update changes nothing."""
    setup, state = tiny(platform)
    state = state._replace(
        latent_range=LatentRange(jnp.array([-2.0, 0.0]), jnp.array([2.0, 1.0])),
        fit=VAEFit(*jnp.array([0.01, 0.0, 0.0])),
    )
    update = jax.jit(make_learner(setup, platform.spec).update)
    plain = relabel_batch()
    truncated = plain._replace(truncated=jnp.ones(4, bool))
    terminated = plain._replace(terminated=jnp.ones(4, bool))
    plain_state, metrics = update(state, plain, make_key(3))
    assert tree_equal(update(state, truncated, make_key(3))[0], plain_state)
    ended_state = update(state, terminated, make_key(3))[0]
    assert not tree_equal(ended_state.td3.critic_params, plain_state.td3.critic_params)
    assert not tree_equal(plain_state.td3.critic_params, state.td3.critic_params)
    assert metrics["discrete_relabel_rate"] == 0.5 and metrics["parameter_relabel_rate"] == 0.5
    assert {"critic_loss", "q_mean"} <= set(metrics)

    waiting = state._replace(pretrained=jnp.array(False))
    assert tree_equal(update(waiting, plain, make_key(3))[0].td3, state.td3)


@pytest.mark.parametrize("env_id", ["Platform-v0", "Goal-v0"])
def test_acting_keeps_parameters_within_their_bounds_and_their_slice(env_id):
    """Fresh networks on observations far out of range, evaluating and exploring: each
    parameter within the Box, the chosen choice's own slice filled, every other parameter
    mid-range. Goal-v0's choice 0 owns two parameters, the others one each."""
    env = envs.make(EnvConfig(env_id), num_envs=1)
    space = env.spec.action_space
    cfg = HyARConfig(hidden_sizes=(16,), vae_hidden_size=16)
    setup = make_setup(cfg, env.spec)
    state = jax.jit(make_learner(setup, env.spec).init)(make_key(0))
    state = state._replace(pretrained=jnp.array(True))
    low, high = space.parameters.low, space.parameters.high
    obs = 100.0 * jax.random.normal(make_key(1), (2_000, env.spec.observation_space.shape[0]))

    @jax.jit
    def draws(key):
        evaluated = act(setup, state, obs, key, True)
        explored = act(setup, state, obs, key, False)
        return evaluated, explored, env_action(setup, random_action(setup, key, 2_000))

    for choice, parameters in draws(make_key(2)):
        parameters = np.asarray(parameters)
        assert ((parameters >= low) & (parameters <= high)).all()
        others = np.asarray(setup.owners)[np.asarray(choice)] == 0
        center = np.broadcast_to((low + high) / 2, parameters.shape)
        np.testing.assert_array_equal(parameters[others], center[others])


def test_exploration_noise_falls_linearly_after_the_warm_up():
    """σ = 1 until the warm-up's end (11,000 steps), 0.1 from 3,000 steps later, linear between:
    1 − 0.9·1,500/3,000 = 0.55 halfway."""
    cfg = HyARConfig()
    steps = jnp.array([0, 11_000, 12_500, 14_000, 50_000])
    sigma = exploration_sigma(cfg, steps, jnp.int32(0))
    np.testing.assert_allclose(sigma, [1.0, 1.0, 0.55, 0.1, 0.1], rtol=1e-6)


def test_with_episode_schedules_sigma_falls_over_episodes_not_env_steps():
    """`schedule_unit=episodes`: σ counts the episodes since the pre-training, 1 − 0.9·250/1,000
    = 0.775 after 250 of the 1,000, whatever the env steps; 0.1 from the 1,000th."""
    cfg = HyARConfig(schedule_unit="episodes")
    episodes = jnp.array([0, 250, 500, 1_000, 5_000])
    sigma = exploration_sigma(cfg, jnp.int32(50_000), episodes)
    np.testing.assert_allclose(sigma, [1.0, 0.775, 0.55, 0.1, 0.1], rtol=1e-6)


def test_episode_vae_steps_are_due_every_tenth_episode_from_the_thousandth():
    """The reference's `t % 10 == 0 and t >= 1000` as episode t ends: none by episode 999, one
    at 1,000, still one at 1,009, two at 1,010, 101 at 2,000; from the start, every tenth."""
    cfg = HyARConfig(schedule_unit="episodes")
    episodes = jnp.array([0, 999, 1_000, 1_009, 1_010, 2_000])
    np.testing.assert_array_equal(episode_vae_steps_due(cfg, episodes), [0, 0, 1, 1, 2, 101])
    early = dataclasses.replace(cfg, vae_train_after_episodes=0)
    np.testing.assert_array_equal(episode_vae_steps_due(early, jnp.array([9, 10, 25])), [0, 1, 2])


def test_the_warm_up_stores_random_actions_without_latents(platform):
    """The buffer holds `HyARAction`s. Before `learning_starts`, and after it until the VAE is
    pre-trained, the collecting policy draws uniform choices and parameters marked invalid;
    after the pre-training it stores valid latents in [−1, 1] and what they decode to."""
    cfg = HyARConfig(
        hidden_sizes=(8,), vae_hidden_size=8, learning_starts=500, iteration_steps=6_000
    )
    env = platform.with_num_envs(6_000)
    setup = make_setup(cfg, env.spec)
    learner = make_learner(setup, env.spec)
    driver = off_policy_setup(cfg, env, learner)
    state = init(driver, make_key(0))
    action = state.buffer.data.action
    assert action.choice.shape == (cfg.buffer_size,) and action.choice.dtype == jnp.int32
    assert action.parameters.shape == (cfg.buffer_size, 1)
    assert action.latent.shape == (cfg.buffer_size, 12) and action.valid.dtype == bool

    obs = jnp.zeros((6_000, 9))
    collect = jax.jit(lambda ls, steps: exploring_policy(driver, ls, steps)(obs, make_key(1)))
    for steps, pretrained in ((0, False), (600, False)):
        warm = collect(state.learner._replace(pretrained=jnp.array(pretrained)), jnp.int32(steps))
        assert not warm.valid.any()
        np.testing.assert_allclose(np.bincount(np.asarray(warm.choice)) / 6_000, 1 / 3, atol=0.03)
        assert (np.abs(warm.parameters) <= 1).all()
        np.testing.assert_allclose(np.mean(warm.parameters), 0.0, atol=0.03)
    explored = collect(state.learner._replace(pretrained=jnp.array(True)), jnp.int32(600))
    assert explored.valid.all() and (np.abs(explored.latent) <= 1).all()


def test_the_vae_pretrains_once_then_steps_every_vae_every_env_steps(platform):
    """Adam's step count tells the VAE steps apart: none before the warm-up's end, then
    `vae_pretrain_steps` once (and the range measured), none until `vae_train_after` more env
    steps, then iteration_steps / vae_every per iteration."""
    cfg = HyARConfig(
        **TINY,
        learning_starts=200,
        iteration_steps=100,
        vae_every=25,
        vae_pretrain_steps=30,
        vae_train_after=300,
        range_samples=50,
    )
    setup = make_setup(cfg, platform.spec)
    state = make_learner(setup, platform.spec).init(make_key(0))
    buffer = replay.init(jax.tree.map(lambda x: x[0], fake_steps(setup, 1)), 1_000)
    buffer = replay.add(buffer, fake_steps(setup, 250))
    count = lambda s: int(s.vae_opt_state[0].count)
    train = jax.jit(lambda s, steps, key: train_vae(setup, s, buffer, steps, key))

    early = train(state, jnp.int32(100), make_key(1))
    assert count(early) == 0 and not early.pretrained
    assert tree_equal(early.latent_range, state.latent_range)
    pretrained = train(state, jnp.int32(200), make_key(1))
    assert count(pretrained) == 30 and pretrained.pretrained
    assert not tree_equal(pretrained.latent_range, state.latent_range)
    assert pretrained.fit.dynamics > 0
    assert count(train(pretrained, jnp.int32(400), make_key(2))) == 30
    assert count(train(pretrained, jnp.int32(500), make_key(2))) == 34


@pytest.mark.parametrize("moments", [True, False])
def test_without_adam_moments_every_vae_step_is_adams_first(platform, moments):
    """Two VAE steps on the same batch and noise. Adam's first step from fresh moments moves
    each parameter by −lr·g/(|g| + 1e−8), about lr·sign(g) (the reference's, which builds a new
    Adam at every step): so is the second without moments; with them the second is not (its
    moments remember the first step's gradient)."""
    setup, state = tiny(platform, vae_adam_moments=moments)
    buffer = replay.init(jax.tree.map(lambda x: x[0], fake_steps(setup, 1)), 100)
    buffer = replay.add(buffer, fake_steps(setup, 100))
    key = make_key(5)
    sample_key, noise_key = jax.random.split(key)  # vae_step's batch and noise
    batch = replay.sample(buffer, sample_key, setup.cfg.vae_batch_size)
    noise = jax.random.normal(noise_key, (setup.cfg.vae_batch_size, setup.vae.latent_size))
    grad = jax.jit(jax.grad(functools.partial(vae_loss, setup)))
    step = jax.jit(lambda s: vae_step(setup, s, buffer, key))
    first, second = step(state), step(step(state))

    def sign_step(params):
        g = grad(params, batch, noise)
        return jax.tree.map(lambda p, g: p - setup.cfg.vae_lr * g / (jnp.abs(g) + 1e-8), params, g)

    def close(params, want) -> list[bool]:
        pairs = zip(jax.tree.leaves(params), jax.tree.leaves(want), strict=True)
        return [np.allclose(x, y, rtol=1e-6, atol=1e-9) for x, y in pairs]

    assert all(close(first.vae_params, sign_step(state.vae_params)))
    assert all(close(second.vae_params, sign_step(first.vae_params))) != moments
    assert int(second.vae_opt_state[0].count) == (2 if moments else 1)


def test_td3_on_its_own_steps_draws_the_newest_after_the_warm_up(platform):
    """With `td3_buffer_size` = 3 and a warm-up of 4 env steps, TD3 first learns once a
    minibatch (4) of its own steps is held, at step 8, and draws only from steps 5..10 at
    step 10 (6 of its own) within the newest 3, steps 8..10; at step 6 from its 2, steps 5..6."""
    cfg = HyARConfig(
        hidden_sizes=(8,),
        vae_hidden_size=8,
        learning_starts=4,
        batch_size=4,
        buffer_size=16,
        td3_buffer_size=3,
    )
    env = platform.with_num_envs(1)
    setup = make_setup(cfg, env.spec)
    driver = off_policy_setup(cfg, env, make_learner(setup, env.spec), own_steps_window=3)
    assert driver.learn_after == 8
    steps = fake_steps(setup, 10)._replace(reward=jnp.arange(1.0, 11))  # reward: the step
    many = driver._replace(cfg=dataclasses.replace(cfg, batch_size=600, buffer_size=600))
    for env_steps, drawn in ((10, {8.0, 9.0, 10.0}), (6, {5.0, 6.0})):
        written = jax.tree.map(lambda x, n=env_steps: x[:n], steps)
        buffer = replay.add(init(driver, make_key(0)).buffer, written)
        batch = sample_batch(many, buffer, make_key(env_steps), jnp.int32(env_steps))
        assert set(np.asarray(batch.reward).tolist()) == drawn


def test_episode_starts_add_updates_and_episode_schedules_count_each_runs_episodes(platform):
    """Two seeds in one program, whose episodes end at different steps (`cond_over_runs`).
    After the warm-up TD3 updates once per env step and, with `update_at_episode_start`, once
    more after each step that ended an episode (the reference's update as each episode starts):
    in the second 40-step iteration, 40 updates plus the episodes ended. With
    `schedule_unit=episodes` each seed counts the episodes ended after the VAE's pre-training
    (the second and third iterations', not the warm-up's) and takes one VAE step per 3 of them
    from the 2nd on: Adam's count is the 2 pre-training steps plus ⌊episodes / 3⌋."""
    cfg = HyARConfig(
        **FORTY_STEP_ITERATIONS,
        update_at_episode_start=True,
        schedule_unit="episodes",
        vae_train_after_episodes=2,
        vae_every_episodes=3,
    )
    env = platform.with_num_envs(1)
    agent = make_hyar(cfg, env, total_env_steps=1e6)

    def three_iterations(key):
        init_key, env_key, iterations_key = jax.random.split(key, 3)

        def iteration(carry, iteration_key):
            state, env_state, metrics = agent.train_step(*carry, iteration_key)
            return (state, env_state), (state.learner.td3.updates, metrics["episodes"])

        start = (agent.init(init_key), env.reset(env_key))
        (state, _), (updates, ended) = jax.lax.scan(
            iteration, start, jax.random.split(iterations_key, 3)
        )
        learner = state.learner
        return updates, ended, learner.episodes, learner.vae_opt_state[0].count

    run = jax.jit(jax.vmap(three_iterations, axis_name=RUN_AXIS))
    updates, ended, counted, vae_steps = jax.device_get(run(jax.random.split(make_key(3), 2)))
    assert (updates[:, 0] == 0).all()  # [seed, iteration]: TD3 waits for the pre-training
    assert (ended[:, 1] > 0).all()
    np.testing.assert_array_equal(updates[:, 1], 40 + ended[:, 1])
    assert counted[0] != counted[1] and (counted >= 3).all()
    np.testing.assert_array_equal(counted, ended[:, 1] + ended[:, 2])
    np.testing.assert_array_equal(vae_steps, 2 + counted // 3)


@pytest.mark.parametrize("anneal", [True, False])
def test_annealed_learning_rates_reach_zero_with_the_budgets_last_update(platform, anneal):
    """With `anneal_lr` TD3's learning rates fall linearly to 0 over its updates in the budget:
    120 env steps in 40-step iterations, the VAE pre-training after the first, leave 80 critic
    updates (40 actor steps), whichever step in that iteration the warm-up ends at; after them
    a fourth iteration's updates move neither network. Without it both still move."""
    for learning_starts in (30, 40):
        schedule = HyARConfig(
            learning_starts=learning_starts, iteration_steps=40, batch_size=8, vae_every=20
        )
        assert td3_updates(schedule, 1, 120) == 80
    cfg = HyARConfig(**FORTY_STEP_ITERATIONS, anneal_lr=anneal)
    env = platform.with_num_envs(1)
    agent = make_hyar(cfg, env, total_env_steps=120)

    train_step = jax.jit(agent.train_step)
    init_key, env_key, *keys = jax.random.split(make_key(4), 6)
    state, env_state = agent.init(init_key), env.reset(env_key)
    for iteration_key in keys[:3]:
        state, env_state, _ = train_step(state, env_state, iteration_key)
    at_budget = state.learner.td3
    after = train_step(state, env_state, keys[3])[0].learner.td3
    assert int(at_budget.updates) == 80 and int(after.updates) == 120
    for network in ("actor_params", "critic_params"):
        unchanged = tree_equal(getattr(at_budget, network), getattr(after, network))
        assert unchanged == anneal, network


def fake_steps(setup, n: int) -> Transition:
    """`n` stored steps with random observations and warm-up actions."""
    obs = jax.random.normal(make_key(11), (n, 9))
    action = random_action(setup, make_key(12), n)
    return Transition(obs, action, jnp.ones(n), jnp.zeros(n, bool), jnp.zeros(n, bool), obs * 0.9)


@pytest.mark.parametrize(
    "override, message",
    [
        ("agent.parameter_latent_size=0", "agent.parameter_latent_size=0 must be >= 1"),
        ("agent.discrete_latent_size=-2", "agent.discrete_latent_size=-2 must be >= 1"),
        ("agent.vae_every=300", "agent.vae_every=300 must divide agent.iteration_steps=1000"),
        ("agent.range_percent=50", r"agent.range_percent=50.0 must be in \[0, 50\)"),
        ("agent.learning_starts=0", "agent.learning_starts=0 must be >= 1"),
        (
            "agent.schedule_unit=iterations",
            "agent.schedule_unit='iterations' is not one of: env_steps, episodes",
        ),
        ("agent.vae_every_episodes=0", "agent.vae_every_episodes=0 must be >= 1"),
        (
            "agent.layer_init=torch",
            "agent.layer_init='torch' is not one of: lecun_normal, pytorch",
        ),
        ("agent.relabel_threshold=-1", "agent.relabel_threshold=-1.0 must be >= 0"),
        (
            "agent.relabel_check_range=latent",
            "agent.relabel_check_range='latent' is not one of: encoder, actor",
        ),
        (
            "agent.td3_buffer_size=300000",
            r"agent.td3_buffer_size=300000 must be in \[0, agent.buffer_size=200000\]",
        ),
        (
            "agent.anneal_lr=true agent.update_at_episode_start=true",
            "agent.anneal_lr=true needs agent.update_at_episode_start=false",
        ),
    ],
)
def test_bad_settings_are_config_errors(override, message):
    with pytest.raises(ConfigError, match=message):
        compose(["agent=hyar", "env=Platform-v0", *override.split()])


def test_a_grid_trains_every_point_and_seed_and_loads_as_env_actions(tmp_path):
    """2 VAE learning rates × 2 seeds in one program on a tiny budget (warm-up, pre-training,
    TD3 and a periodic VAE step): every run's parameters differ, and a loaded policy gives
    Platform's `(choice, parameters)`."""
    result = jaxrl.train(
        "agent=hyar",
        "env=Platform-v0",
        "agent.hidden_sizes=[16]",
        "agent.vae_hidden_size=16",
        "agent.batch_size=16",
        "agent.learning_starts=200",
        "agent.iteration_steps=200",
        "agent.vae_pretrain_steps=20",
        "agent.vae_train_after=0",
        "agent.vae_every=100",
        "agent.range_samples=100",
        "budget.env_steps=600",
        "eval.every=3",
        "eval.episodes=2",
        "num_seeds=2",
        *QUIET,
        grid={"agent": {"vae_lr": [1e-2, 1e-4]}},
        run_dir=tmp_path,
    )
    check_platform_grid(result, tmp_path, "vae_lr", [1e-2, 1e-4], 600)


@pytest.mark.slow
def test_hyar_learns_platform(hyar_platform_run):
    """HyAR at its Platform preset but for 64-unit networks and a 2,000-step warm-up (learning.
    HYAR_PLATFORM; the reference's 256 units and ~11,000 random steps cost this CPU too much), 4
    seeds in one program, 30k env steps: the mean over seeds of the final evaluation return (1 is
    the goal, random play gets 0.16, the first platform ends at 0.24, the second at 0.42) reaches
    0.35: past the first platform, well below the mean of every run measured so far
    (benchmarks/results/learning_tests.md). notebooks/06_hybrid_actions.ipynb is handed the
    same run."""
    result = hyar_platform_run
    assert result.status == "completed"
    assert result.summary["env_steps"] == 30_000
    assert_mean_at_least(result.summary, 0.35)
