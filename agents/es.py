"""OpenAI-style Evolution Strategies (Salimans et al. 2017).

One generation, under one `jit`: antithetic Gaussian perturbations of a flat parameter vector,
each member's fitness = mean return over `episodes_per_member` episodes, centered-rank (or
z-score) fitness shaping, the gradient estimate g = Σ_pairs (f₊ − f₋) ε / (pop · σ), and an Adam
step on −g with coupled L2 weight decay.

Common random numbers: a pair's noise ε is regenerated from (generation key, pair index)
wherever it is needed (evaluation and gradient), in chunks, so the population × parameters matrix
never exists as a whole; both members of a pair also start their episodes from the same env seeds.

Devices: pairs are sharded over a 1-D mesh with `shard_map` (over every process's devices in a
distributed run); only fitness scalars (and the tiny observation statistics) are gathered, and
every device then computes the same update, as the original workers did from a shared noise
table.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax.flatten_util import ravel_pytree
from jax.sharding import PartitionSpec as P

from agents.configs import ESConfig
from jaxrl import normalize, optimizers, parallel
from jaxrl.datatypes import Agent, Array, Key, Metrics, PyTree
from jaxrl.env import Env, random_actions
from jaxrl.networks import MLP, deterministic_action, policy_output_size
from jaxrl.normalize import RunningStats
from jaxrl.rollout import run_episodes

POPULATION_AXIS = "pop"


class ESState(NamedTuple):
    theta: Array  # float32[P], the search distribution's mean
    opt_state: optax.OptState
    obs_stats: RunningStats
    vbn_reference: Array  # [R, *obs]: raw observations; a placeholder row when VBN is off
    generation: Array  # int32


def centered_ranks(x: Array) -> Array:
    """Ranks over the flattened input mapped linearly to [-0.5, 0.5]; ties share their mean rank
    (CartPole populations are full of equal 500s: arbitrary tie-breaking would inject noise)."""
    flat = x.ravel()
    n = flat.size
    ordered = jnp.sort(flat)
    lower = jnp.searchsorted(ordered, flat, side="left")
    upper = jnp.searchsorted(ordered, flat, side="right")
    ranks = (lower + upper - 1).astype(jnp.float32) / 2.0
    return (ranks / (n - 1) - 0.5).reshape(x.shape)


def zscore(x: Array) -> Array:
    return (x - x.mean()) / (x.std() + 1e-8)


def shape_fitness(fitness: Array, method: str) -> Array:
    return centered_ranks(fitness) if method == "centered_ranks" else zscore(fitness)


def pair_noise(key: Key, pair: Array, num_params: int) -> Array:
    """ε of one antithetic pair, regenerated from (generation key, pair index) on demand."""
    return jax.random.normal(jax.random.fold_in(key, pair), (num_params,), jnp.float32)


def noise_weighted_sum(weights: Array, key: Key, num_params: int, chunk: int) -> Array:
    """Σ_i w_i ε_i over all pairs, regenerating ε `chunk` pairs at a time: memory stays
    O(chunk × params) however large the population."""
    n_pairs = weights.shape[0]
    n_chunks = math.ceil(n_pairs / chunk)
    padded = jnp.zeros((n_chunks * chunk,), jnp.float32).at[:n_pairs].set(weights)

    def body(acc: Array, c: Array):
        pairs = c * chunk + jnp.arange(chunk)
        eps = jax.vmap(lambda p: pair_noise(key, p, num_params))(pairs)
        return acc + jax.lax.dynamic_slice_in_dim(padded, c * chunk, chunk) @ eps, None

    total, _ = jax.lax.scan(body, jnp.zeros((num_params,), jnp.float32), jnp.arange(n_chunks))
    return total


def es_gradient(
    fitness: Array, key: Key, sigma: Array, method: str, num_params: int, chunk: int
) -> Array:
    """g = Σ_pairs (u₊ − u₋) ε / (pop · σ), u the shaped fitness; fitness is [pairs, 2] with
    column 0 the +ε member. An ascent direction: the optimiser is handed −g."""
    shaped = shape_fitness(fitness, method)
    weights = shaped[:, 0] - shaped[:, 1]
    return noise_weighted_sum(weights, key, num_params, chunk) / (fitness.size * sigma)


def learning_rate_at(cfg: ESConfig, generation: Array) -> Array:
    return jnp.maximum(cfg.learning_rate * cfg.lr_decay**generation, cfg.lr_min)


def sigma_at(cfg: ESConfig, generation: Array) -> Array:
    return jnp.maximum(cfg.sigma * cfg.sigma_decay**generation, cfg.sigma_min)


def make_optimizer(cfg: ESConfig) -> optax.GradientTransformation:
    """Adam with coupled L2 (added to the gradient before Adam, as OpenAI ES did) and an
    exponentially decaying learning rate floored at `lr_min`."""
    return optax.chain(
        optimizers.add_decayed_weights(cfg.weight_decay),
        optax.scale_by_adam(cfg.adam_b1, cfg.adam_b2, cfg.adam_eps),
        optax.scale_by_learning_rate(partial(learning_rate_at, cfg)),
    )


def largest_divisor_at_most(n: int, limit: int) -> int:
    return max(d for d in range(1, min(n, max(limit, 1)) + 1) if n % d == 0)


class ESSetup(NamedTuple):
    """What a generation's functions share, fixed when the program is traced; `es_setup` builds
    it and the functions below take it as their first argument."""

    cfg: ESConfig
    env: Env
    member_env: Env  # a member's batch: `episodes_per_member` envs
    net: MLP
    unravel: Callable[[Array], PyTree]  # flat parameter vector -> the network's parameters
    num_params: int
    tx: optax.GradientTransformation
    axis: parallel.DataAxis  # antithetic pairs are sharded over it
    local_pairs: int  # this device's share of the pairs
    eval_chunk: int  # pairs evaluated together
    grad_chunk: int  # pairs whose noise is regenerated together for the gradient


def es_setup(cfg: ESConfig, env: Env) -> ESSetup:
    """The setup for `cfg` on `env`; an action space ES cannot act in raises ConfigError here."""
    spec = env.spec
    net = MLP(cfg.hidden_sizes, policy_output_size(spec.action_space, "es"), cfg.activation)
    obs_shape = spec.observation_space.shape
    # Only the parameter structure is needed here: shapes, not an (eager, slow) initialisation.
    shapes = jax.eval_shape(net.init, jax.random.PRNGKey(0), jnp.zeros((1, *obs_shape)))
    flat_template, unravel = ravel_pytree(
        jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
    )
    num_params = flat_template.size
    pop = cfg.population_size
    n_pairs = pop // 2
    pairs = f"the {n_pairs} antithetic pairs of agent.population_size={pop}"
    axis = parallel.DataAxis(parallel.mesh_for(n_pairs, POPULATION_AXIS, pairs), POPULATION_AXIS)
    local_pairs = n_pairs // axis.size
    # Evaluation holds ε plus two perturbed copies per pair; the gradient one ε per pair.
    eval_bytes = cfg.eval_chunk_megabytes * 2**20
    return ESSetup(
        cfg=cfg,
        env=env,
        member_env=env.with_num_envs(cfg.episodes_per_member),
        net=net,
        unravel=unravel,
        num_params=num_params,
        tx=make_optimizer(cfg),
        axis=axis,
        local_pairs=local_pairs,
        eval_chunk=largest_divisor_at_most(local_pairs, int(eval_bytes // (3 * 4 * num_params))),
        grad_chunk=max(1, min(n_pairs, int(cfg.chunk_megabytes * 2**20 // (4 * num_params)))),
    )


def member_policy(setup: ESSetup, theta: Array, state: ESState) -> Callable[[Array, Key], Array]:
    """The deterministic policy of one parameter vector, under the state's normalisers."""
    cfg, net = setup.cfg, setup.net
    params = setup.unravel(theta)

    def prepare(obs: Array) -> Array:
        if cfg.obs_normalization:
            return normalize.normalize(state.obs_stats, obs, cfg.obs_clip)
        return obs

    vbn_stats = None
    if cfg.virtual_batch_norm:
        vbn_stats = net.apply(params, prepare(state.vbn_reference), method=MLP.reference_stats)

    def policy(obs: Array, key: Key) -> Array:
        del key
        return deterministic_action(
            net.apply(params, prepare(obs), vbn_stats), setup.env.spec.action_space
        )

    return policy


def evaluate_pair(
    setup: ESSetup, state: ESState, sigma: Array, noise_key: Key, env_key: Key, pair: Array
) -> tuple[Array, Array, Array, RunningStats]:
    """Both members of one antithetic pair, each over its episodes: (mean return, env steps
    counted, loop steps computed, observation statistics), each with a leading [2] for ±ε."""
    eps = pair_noise(noise_key, pair, setup.num_params)
    # Both signs see the same episodes. A host env is given the key once per sign, so that it
    # builds one pool per member rather than sharing one; a compiled env's reset is drawn once
    # for both (the same numbers, one draw less to run and to compile).
    pair_env_key = jax.random.fold_in(env_key, pair)
    per_sign = setup.member_env.spec.family == "host"
    if per_sign:
        pair_env_key = jnp.stack([pair_env_key, pair_env_key])  # raw or typed keys alike

    def member(sign: Array, member_env_key: Key):
        theta = state.theta + sign * sigma * eps
        episodes = run_episodes(
            setup.member_env, member_policy(setup, theta, state), member_env_key
        )
        return (
            episodes.returns.mean(),
            episodes.lengths.sum(),
            episodes.steps_computed,
            episodes.obs_stats,
        )

    signs = jnp.array([1.0, -1.0], jnp.float32)
    return jax.vmap(member, in_axes=(0, 0 if per_sign else None))(signs, pair_env_key)


def evaluate_local(
    setup: ESSetup, state: ESState, sigma: Array, noise_key: Key, env_key: Key
) -> tuple[Array, Array, Array, RunningStats]:
    """This device's pairs, `eval_chunk` at a time; returns (fitness [local, 2], env steps
    counted, loop steps computed, merged observation statistics)."""
    local_pairs, eval_chunk = setup.local_pairs, setup.eval_chunk
    first = setup.axis.index() * local_pairs
    chunks = (first + jnp.arange(local_pairs)).reshape(-1, eval_chunk)

    def chunk_fn(pairs: Array):
        fitness, counted, computed, stats = jax.vmap(
            partial(evaluate_pair, setup, state, sigma, noise_key, env_key)
        )(pairs)
        # A batched while_loop runs until the chunk's slowest member ends: that is the compute.
        return fitness, counted, computed.max() * 2 * eval_chunk, stats

    fitness, counted, computed, stats = jax.lax.map(chunk_fn, chunks)
    stats = jax.tree.map(lambda x: x.reshape(local_pairs, 2, *x.shape[3:]), stats)
    return (
        fitness.reshape(local_pairs, 2),
        counted.sum(),
        computed.sum(),
        normalize.merge(stats, (0, 1)),
    )


def generation(setup: ESSetup, state: ESState, key: Key) -> tuple[ESState, Metrics]:
    """One generation on this device's pairs; only fitness scalars (and obs statistics, a few
    floats) leave the device, and every device then computes the same update."""
    cfg, axis = setup.cfg, setup.axis
    noise_key, env_key = jax.random.split(key)
    sigma = sigma_at(cfg, state.generation)
    fitness, counted, computed, stats = evaluate_local(setup, state, sigma, noise_key, env_key)
    fitness = axis.all_gather(fitness, tiled=True)
    counted = axis.psum(counted)
    computed = axis.psum(computed)
    stats = normalize.merge(axis.all_gather(stats))

    g = es_gradient(
        fitness, noise_key, sigma, cfg.fitness_shaping, setup.num_params, setup.grad_chunk
    )
    updates, opt_state = setup.tx.update(-g, state.opt_state, state.theta)
    theta = optax.apply_updates(state.theta, updates)
    obs_stats = (
        normalize.combine(state.obs_stats, stats) if cfg.obs_normalization else state.obs_stats
    )
    new_state = ESState(theta, opt_state, obs_stats, state.vbn_reference, state.generation + 1)
    metrics = {
        "fitness_mean": fitness.mean(),
        "fitness_max": fitness.max(),
        "fitness_min": fitness.min(),
        "fitness_std": fitness.std(),
        "env_steps": counted,
        "env_steps_computed": computed,
        "grad_norm": jnp.linalg.norm(g),
        "param_norm": jnp.linalg.norm(theta),
        "sigma": sigma,
        "learning_rate": learning_rate_at(cfg, state.generation),
    }
    return new_state, metrics


def init(setup: ESSetup, key: Key) -> ESState:
    cfg = setup.cfg
    obs_shape = setup.env.spec.observation_space.shape
    param_key, ref_key = jax.random.split(key)
    theta, _ = ravel_pytree(setup.net.init(param_key, jnp.zeros((1, *obs_shape))))
    # Without VBN an unused placeholder row (orbax needs arrays of size > 0).
    reference = jnp.zeros((1, *obs_shape), jnp.float32)
    if cfg.virtual_batch_norm:
        reference = collect_reference(setup.env.with_num_envs(cfg.vbn_reference_size), ref_key)
    return ESState(
        theta=theta,
        opt_state=setup.tx.init(theta),
        obs_stats=normalize.init(obs_shape),
        vbn_reference=reference,
        generation=jnp.zeros((), jnp.int32),
    )


def act(setup: ESSetup, state: ESState, obs: Array, key: Key, deterministic: bool = True) -> Array:
    del deterministic  # the ES policy is deterministic by construction
    return member_policy(setup, state.theta, state)(obs, key)


def train_step(
    sharded_generation: Callable[[ESState, Key], tuple[ESState, Metrics]],
    state: ESState,
    env_state: PyTree,
    key: Key,
) -> tuple[ESState, PyTree, Metrics]:
    """One generation; the loop's env state passes through (members run episodes of their own)."""
    state, metrics = sharded_generation(state, key)
    return state, env_state, metrics


def make_es(cfg: ESConfig, env: Env) -> Agent:
    """An `Agent` running ES on `env`: the functions above bound to their setup, the generation
    sharded over the population axis."""
    setup = es_setup(cfg, env)
    # Episode loops start from replicated zeros and become per-device inside the while_loop;
    # every output is computed from all-gathered values, so it is replicated.
    sharded_generation = setup.axis.shard_map(
        partial(generation, setup), in_specs=(P(), P()), out_specs=(P(), P())
    )
    return Agent(
        init=partial(init, setup),
        act=partial(act, setup),
        train_step=partial(train_step, sharded_generation),
        params=lambda state: state.theta,
    )


def collect_reference(env: Env, key: Key, steps: int = 50) -> Array:
    """VBN reference batch, chosen once: each env's observation after `steps` random actions
    (episodes auto-reset), so the batch spans early and later states rather than only starts."""
    reset_key, loop_key = jax.random.split(key)
    env_state, ts = env.reset(reset_key)

    def body(carry, k):
        env_state, _ = carry
        action_key, step_key = jax.random.split(k)
        env_state, ts = env.step(env_state, random_actions(env.spec, action_key), step_key)
        return (env_state, ts.obs), None

    (_, obs), _ = jax.lax.scan(body, (env_state, ts.obs), jax.random.split(loop_key, steps))
    return obs
