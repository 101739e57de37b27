"""The on-policy machinery PPO, A2C and REINFORCE share; they differ only in their per-sample loss.

One iteration (`train_step`) is: a `lax.scan` rollout of the persistent env batch storing the
true successor (`final_obs`) of every step; running observation / discounted-return statistics
(Welford, merged over devices); GAE(λ) advantages in which truncated steps bootstrap from
V(final_obs) and terminated ones from nothing (λ = 1 gives n-step / Monte-Carlo returns); then
`epochs` passes over `minibatches` shuffled minibatches, one optimiser step each.

A policy is `actor_critic_model` (`ActorCritic`: a distribution and V(s) per observation) unless
the algorithm brings its own `PolicyModel`: other heads, and memory each env carries from step
to step of the rollout (PPOC's running option), reset where an episode ends and stored with the
steps for the loss.

Devices: the env batch is sharded over a 1-D mesh with `shard_map`. Each device keeps its slice of
envs, draws per-env random keys from the same global split, and the same minibatch time indices,
so the result does not depend on the device count. A loss is a local sum divided by the *global*
number of samples, its gradient summed over devices (`psum`): that is the gradient of the global
mean, not N times it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from jax.flatten_util import ravel_pytree
from jax.sharding import PartitionSpec as P

from jaxrl import normalize, optimizers, parallel, speedups
from jaxrl.agent_config import OnPolicyConfig
from jaxrl.config import require
from jaxrl.datatypes import Agent, Array, Key, PyTree, Transition
from jaxrl.distributions import Distribution
from jaxrl.env import Env
from jaxrl.networks import ActionHead, ActorCritic, action_head, resolve_torso
from jaxrl.normalize import RunningStats

ENV_AXIS = "envs"
STD_EPS = 1e-8


class Sample(NamedTuple):
    """One (time, env) entry of the update batch, as a loss sees it."""

    obs: Array
    raw_action: Array  # the distribution's sample (before clipping / squashing)
    log_prob: Array  # under the policy that acted
    value: Array  # V(obs) under the critic that acted
    advantage: Array
    target: Array  # value target: advantage + value
    record: PyTree = None  # what the policy kept of the step (`Acting.record`)


# (distribution, value, sample) -> (per-sample loss, per-sample metrics); a `PolicyModel` may
# give the loss other leading arguments (`PolicyModel.loss_inputs`).
SampleLoss = Callable[..., tuple[Array, dict[str, Array]]]


def policy_gradient_loss(
    dist: Distribution, value: Array, sample: Sample, vf_coef: float, ent_coef: float
) -> tuple[Array, dict[str, Array]]:
    """Per-sample −log π(a|s)·advantage + vf_coef·½(V − target)² − ent_coef·entropy; the
    advantage is data (no gradient flows into it). A2C's loss, and REINFORCE's (vf_coef 0 without
    a learned baseline)."""
    chex.assert_rank([value, sample.advantage, sample.target], 0)  # one sample: vmap batches it
    policy_loss = -dist.log_prob(sample.raw_action) * sample.advantage
    value_loss = 0.5 * (value - sample.target) ** 2
    entropy = dist.entropy()
    loss = policy_loss + vf_coef * value_loss - ent_coef * entropy
    return loss, {"policy_loss": policy_loss, "value_loss": value_loss, "entropy": entropy}


def clipped_surrogate(log_ratio: Array, advantage: Array, clip_eps: float) -> Array:
    """PPO's pessimistic objective as a loss: −min(ρA, clip(ρ, 1 ± ε)A), ρ = exp(log_ratio)."""
    ratio = jnp.exp(log_ratio)
    clipped = jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps)
    return -jnp.minimum(ratio * advantage, clipped * advantage)


def clipped_value_loss(value: Array, sample: Sample, clip_eps: float, clip_value: bool) -> Array:
    """½ (value − target)², with `clip_value` the larger of it and the loss of the value moved at
    most ±clip_eps from the one that acted (the PPO2 baselines' value clipping)."""
    loss = (value - sample.target) ** 2
    if clip_value:
        clipped = sample.value + jnp.clip(value - sample.value, -clip_eps, clip_eps)
        loss = jnp.maximum(loss, (clipped - sample.target) ** 2)
    return 0.5 * loss


def ratio_metrics(log_ratio: Array, clip_eps: float) -> dict[str, Array]:
    """How far an update moved the policy: the approximate KL (the low-variance k3 estimator)
    and whether the ratio left the clip range."""
    ratio = jnp.exp(log_ratio)
    return {
        "approx_kl": (ratio - 1.0) - log_ratio,
        "clip_fraction": (jnp.abs(ratio - 1.0) > clip_eps).astype(jnp.float32),
    }


class Acting(NamedTuple):
    """One env's step as its policy took it (`PolicyModel.act`)."""

    raw_action: Array  # the distribution's sample (before clipping / squashing)
    log_prob: Array
    env_action: Array
    value: Array  # what the step's advantage is measured against: V(s) (PPOC: Q_Ω(s, ω))
    memory: PyTree  # what the env carries to its next step (None: nothing)
    record: PyTree  # kept with the step for the loss, the bootstrap and the metrics (None)


class PolicyModel(NamedTuple):
    """The network and how its outputs act, bootstrap and reach the loss, for one observation.
    `actor_critic_model` is PPO's, A2C's and REINFORCE's; an algorithm with other heads or with
    memory (PPOC's running option) brings its own (`Algorithm.model`)."""

    net: nn.Module  # init(key, obs) / apply(params, obs) -> outputs, for one obs or a batch
    act: Callable[[PyTree, PyTree, Key], Acting]  # (outputs, memory, key): one env's step
    # (outputs at a step's successor, the step's record) -> the successor's value
    successor_value: Callable[[PyTree, PyTree], Array]
    # (outputs, sample) -> the loss's arguments before the sample
    loss_inputs: Callable[[PyTree, Sample | None], tuple]
    # (outputs, key, deterministic) -> an env action, without memory (evaluation, jaxrl.load)
    action: Callable[[PyTree, Key, bool], Array]
    state_value: Callable[[PyTree], Array]  # V(s), for `Agent.state_value`
    initial_memory: PyTree = None  # one env's memory at the start of an episode
    # (records [T, envs]) -> {name: (numerator, denominator)} [T, envs]: each metric is the
    # ratio of their sums over the rollout's valid steps
    metrics: Callable[[PyTree], dict[str, tuple[Array, Array]]] | None = None
    # (outputs, memory, key) -> (deterministic env action, memory): evaluation with the memory
    # (`Agent.act_with_memory`); None: evaluations use `action` alone
    evaluate: Callable[[PyTree, PyTree, Key], tuple[Array, PyTree]] | None = None
    # (outputs at a step's observation, the step's record) -> `Acting.value` again: the values
    # are then computed after the rollout in one batched pass, and the rollout's per-step
    # network runs the actor alone (XLA drops the unused critic). None: kept from the rollout.
    step_value: Callable[[PyTree, PyTree], Array] | None = None


def actor_critic_model(net: ActorCritic, head: ActionHead) -> PolicyModel:
    """`ActorCritic`'s outputs as a policy without memory: a distribution and V(s)."""

    def act(outputs: tuple[tuple[Array, ...], Array], memory: None, key: Key) -> Acting:
        policy_outputs, value = outputs
        dist = head.distribution(policy_outputs)
        raw = dist.sample(key)
        return Acting(raw, dist.log_prob(raw), dist.env_action(raw), value, None, None)

    def action(outputs: tuple[tuple[Array, ...], Array], key: Key, deterministic: bool) -> Array:
        dist = head.distribution(outputs[0])
        return dist.env_action(dist.mode() if deterministic else dist.sample(key))

    return PolicyModel(
        net=net,
        act=act,
        successor_value=lambda outputs, record: outputs[1],
        loss_inputs=lambda outputs, sample: (head.distribution(outputs[0]), outputs[1]),
        action=action,
        state_value=lambda outputs: outputs[1],
        # A shared torso's critic is one layer on the actor's features: dropping it from the
        # rollout saves nothing and the pass after it would run the torso again.
        step_value=None if net.shared_torso else lambda outputs, record: outputs[1],
    )


class Algorithm(NamedTuple):
    """What makes an on-policy agent itself."""

    loss: SampleLoss
    num_steps: int | None  # rollout length per env; None: every env runs one whole episode
    gae_lambda: float = 1.0
    epochs: int = 1
    minibatches: int = 1
    critic: bool = True  # False: no value function, advantages are plain returns
    mean_baseline: bool = False  # subtract the batch mean of the returns (critic-free baseline)
    model: PolicyModel | None = None  # None: `actor_critic_model` of the config's `ActorCritic`


class OnPolicyState(NamedTuple):
    params: PyTree
    opt_state: optax.OptState  # of the flat parameter vector, or of the tree (`OnPolicySetup`)
    obs_stats: RunningStats
    return_stats: RunningStats  # of the discounted return, for reward scaling
    discounted_return: Array  # float32[num_envs], running per env; sharded with the env batch
    env_steps: Array  # float32: steps consumed so far, for learning-rate annealing
    memory: PyTree = None  # the policy's per-env memory [num_envs, ...]; sharded with the envs


class Rollout(NamedTuple):
    """[T, envs] arrays of one rollout."""

    transition: Transition
    raw_action: Array
    log_prob: Array
    value: Array | None  # None where `PolicyModel.step_value` computes it after the rollout
    valid: Array | None  # bool: the step counted; None outside episodic mode, where all do
    discounted_return: Array  # the running discounted return after each step
    episode_return: Array  # of the episode that ended at the step; used where `episode_done`
    episode_done: Array
    record: PyTree = None  # the policy's `Acting.record` of each step


def gae(
    rewards: Array,
    values: Array,
    next_values: Array,
    terminated: Array,
    truncated: Array,
    gamma: float,
    lam: float,
) -> tuple[Array, Array]:
    """GAE(λ) over time-major [T, ...] arrays; returns (advantages, value targets).

    `next_values[t]` is V of the true successor of step t (the final observation where the
    episode ended). Terminated steps do not bootstrap; truncated ones do, from V(final_obs); both
    cut the λ-recursion, since the next stored step belongs to a new episode. The last step
    bootstraps from V of the observation after the rollout. λ = 1 gives n-step returns.
    """
    chex.assert_equal_shape([rewards, values, next_values, terminated, truncated])
    terminated = terminated.astype(jnp.float32)
    done = jnp.maximum(terminated, truncated.astype(jnp.float32))
    deltas = rewards + gamma * (1.0 - terminated) * next_values - values

    def backward(next_advantage: Array, x: tuple[Array, Array]) -> tuple[Array, Array]:
        delta, not_done = x
        advantage = delta + gamma * lam * not_done * next_advantage
        return advantage, advantage

    _, advantages = jax.lax.scan(
        backward, jnp.zeros_like(values[0]), (deltas, 1.0 - done), reverse=True
    )
    return advantages, advantages + values


def shuffled_minibatches(tree: PyTree, key: Key, num_minibatches: int) -> PyTree:
    """[T, envs, ...] leaves -> [M, T/M, envs, ...]: the same random time indices for every env,
    so every device draws the same minibatches from its own envs."""
    steps = jax.tree.leaves(tree)[0].shape[0]
    perm = jax.random.permutation(key, steps)
    return jax.tree.map(
        lambda x: x[perm].reshape(num_minibatches, steps // num_minibatches, *x.shape[1:]), tree
    )


def masked_stats(
    axis: parallel.DataAxis, x: Array, valid: Array | None, batch_ndim: int
) -> RunningStats:
    """Welford statistics of the valid entries of x ([*batch, *features], valid [*batch] or None
    for all), merged over the device axis."""
    axes = tuple(range(batch_ndim))
    if valid is None:
        count = jnp.asarray(math.prod(x.shape[:batch_ndim]), jnp.float32)
        mean = x.mean(axes)
        m2 = ((x - mean) ** 2).sum(axes)
    else:
        w = valid.reshape(valid.shape + (1,) * (x.ndim - valid.ndim)).astype(jnp.float32)
        count = valid.sum().astype(jnp.float32)
        mean = (w * x).sum(axes) / jnp.maximum(count, 1.0)
        m2 = (w * (x - mean) ** 2).sum(axes)
    return normalize.merge(axis.all_gather(RunningStats(count, mean, m2)))


def global_mean(axis: parallel.DataAxis, x: Array, valid: Array | None) -> Array:
    """Mean over the valid entries of x on all devices (every entry where `valid` is None)."""
    if valid is None:
        return axis.psum(x.sum()) / axis.psum(x.size)
    w = valid.astype(jnp.float32)
    return axis.psum((w * x).sum()) / jnp.maximum(axis.psum(w.sum()), 1.0)


class OnPolicySetup(NamedTuple):
    """What one on-policy agent's functions share, fixed when the program is traced: its config
    and algorithm, the env, the policy (network and how it acts), the device axis and the batch
    sizes. `make_on_policy` builds it; the functions below take it as their first argument."""

    cfg: OnPolicyConfig
    algorithm: Algorithm
    env: Env
    single_env: Env  # the env with one env per batch (vmapped per env); `env` for host pools
    policy: PolicyModel
    tx: optax.GradientTransformation
    flat_optimizer: bool  # tx works on the parameters as one flat vector (`jaxrl.speedups`)
    axis: parallel.DataAxis
    num_envs: int
    local_envs: int  # this device's share of the env batch
    num_steps: int  # rollout length per env (an episode cap in episodic mode)
    episodic: bool  # every env runs one whole episode per iteration (REINFORCE)
    normalize_obs: bool
    total_env_steps: float  # the learning-rate annealing horizon


def on_policy_setup(
    cfg: OnPolicyConfig, env: Env, algorithm: Algorithm, total_env_steps: float
) -> OnPolicySetup:
    """The setup for `algorithm` on `env`'s batch; bad combinations raise ConfigError here."""
    spec = env.spec
    obs_shape = spec.observation_space.shape
    head = action_head(spec.action_space, cfg.squash_actions, cfg.name)
    torso = resolve_torso(cfg.torso, obs_shape, cfg.name)
    policy = algorithm.model or actor_critic_model(
        ActorCritic(
            head.size,
            head.continuous,
            cfg.hidden_sizes,
            cfg.activation,
            torso,
            cfg.shared_torso,
            cfg.log_std_init,
        ),
        head,
    )
    num_envs = spec.num_envs
    episodic = algorithm.num_steps is None
    num_steps = spec.max_episode_steps if episodic else algorithm.num_steps
    # A minibatch is num_steps/minibatches time steps of every env, so it splits over devices
    # with the env batch; configs check this too, with their own key names.
    require(
        num_steps % algorithm.minibatches == 0,
        f"{algorithm.minibatches} minibatches must divide the rollout length {num_steps}",
    )
    # Host envs are one handle for the whole pool: no per-env steps, no sharding.
    batch = f"the env.num_envs={num_envs} envs" if spec.vmappable else f"{spec.name}'s one pool"
    axis = parallel.DataAxis(
        parallel.data_mesh(num_envs if spec.vmappable else 1, ENV_AXIS, batch), ENV_AXIS
    )
    # With the speed-ups on, the optimiser works on the parameters as one flat vector: clipping
    # and Adam are then a few fused ops instead of a few per weight array, which is most of a
    # small network's update on CPU, where every op costs a dispatch.
    tx = optax.chain(
        optimizers.clip_by_global_norm(cfg.max_grad_norm),
        optax.scale_by_adam(eps=cfg.adam_eps),
    )
    return OnPolicySetup(
        cfg=cfg,
        algorithm=algorithm,
        env=env,
        single_env=env.with_num_envs(1) if spec.vmappable else env,
        policy=policy,
        tx=tx,
        flat_optimizer=speedups.enabled(),
        axis=axis,
        num_envs=num_envs,
        local_envs=num_envs // axis.size,
        num_steps=num_steps,
        episodic=episodic,
        normalize_obs=cfg.obs_normalization and torso == "mlp",
        total_env_steps=total_env_steps,
    )


def model(
    setup: OnPolicySetup, params: PyTree, obs: Array, sample: Sample | None = None
) -> tuple[Any, ...]:
    """The loss's leading arguments for one observation that is already normalised (the
    distribution and value for `actor_critic_model`)."""
    return setup.policy.loss_inputs(setup.policy.net.apply(params, obs), sample)


def normalized(setup: OnPolicySetup, obs_stats: RunningStats, obs: Array) -> Array:
    if not setup.normalize_obs:
        return obs
    return normalize.normalize(obs_stats, obs, setup.cfg.obs_clip)


def forward(setup: OnPolicySetup, params: PyTree, obs_stats: RunningStats, obs: Array) -> PyTree:
    """The network's outputs for one raw observation."""
    return setup.policy.net.apply(params, normalized(setup, obs_stats, obs))


def local_keys(setup: OnPolicySetup, key: Key, *shape: int) -> Array:
    """This device's slice of keys [num_envs, *shape] for the whole batch: every env draws from
    the same global split whatever the device count."""
    first = setup.axis.index() * setup.local_envs
    keys = jax.random.split(key, (setup.num_envs, *shape))
    return jax.lax.dynamic_slice_in_dim(keys, first, setup.local_envs)


def env_step(
    setup: OnPolicySetup, env_state: PyTree, action: Array, keys: Array
) -> tuple[PyTree, Any]:
    """One step of this device's envs, each with its own key (a host pool: one call, one key)."""
    if not setup.env.spec.vmappable:
        return setup.env.step(env_state, action, keys[0])

    def one(state, a, k):
        state, ts = setup.single_env.step(jax.tree.map(lambda x: x[None], state), a[None], k)
        return jax.tree.map(lambda x: x[0], (state, ts))

    return jax.vmap(one)(env_state, action, keys)


def rollout(
    setup: OnPolicySetup, state: OnPolicyState, env_state: PyTree, key: Key
) -> tuple[PyTree, Rollout, Array]:
    """`num_steps` steps of every env; returns the env state, the steps, the running discounted
    returns and the policy's memory. In episodic mode an env whose episode ended waits at its
    next start, its later steps marked invalid."""
    episodic, vmappable, policy = setup.episodic, setup.env.spec.vmappable, setup.policy
    vector_state, last_ts = env_state
    if episodic and not vmappable:
        # A host pool cannot hold a finished env at its next start while the others run on,
        # so every episodic iteration begins from fresh episodes (same-pool reset).
        key, reset_key = jax.random.split(key)
        vector_state, last_ts = setup.env.reset(reset_key)

    def act_one(obs: Array, memory: PyTree, k: Key) -> Acting:
        return policy.act(forward(setup, state.params, state.obs_stats, obs), memory, k)

    def body(carry, keys):
        vector_state, ts, alive, discounted, memory = carry
        acting = jax.vmap(act_one)(ts.obs, memory, keys[:, 0])
        action = acting.env_action
        next_state, next_ts = env_step(setup, vector_state, action, keys[:, 1])
        done = next_ts.terminated | next_ts.truncated
        discounted = discounted * setup.cfg.gamma + next_ts.reward
        step = Rollout(
            Transition(
                ts.obs,
                action,
                next_ts.reward,
                next_ts.terminated,
                next_ts.truncated,
                next_ts.final_obs,
            ),
            acting.raw_action,
            acting.log_prob,
            acting.value if policy.step_value is None else None,
            alive if episodic else None,
            discounted,
            next_ts.info["episode_return"],
            next_ts.info["episode_done"] & alive if episodic else next_ts.info["episode_done"],
            acting.record,
        )
        discounted = jnp.where(done, 0.0, discounted)
        next_memory = jax.tree.map(
            lambda initial, m: jnp.where(per_env(done, m), initial, m),
            policy.initial_memory,
            acting.memory,
        )
        if episodic:  # an env whose episode ended waits at its next start
            keep = lambda new, old: jnp.where(per_env(alive, new), new, old)
            if vmappable:  # a host pool steps on: its episodes restart next iteration
                next_state = jax.tree.map(keep, next_state, vector_state)
            next_ts = jax.tree.map(keep, next_ts, ts)
            next_memory = jax.tree.map(keep, next_memory, memory)
            alive = alive & ~done
        return (next_state, next_ts, alive, discounted, next_memory), step

    alive = jnp.ones((setup.local_envs,), bool)
    carry = (vector_state, last_ts, alive, state.discounted_return, state.memory)
    keys = jnp.moveaxis(local_keys(setup, key, setup.num_steps, 2), 0, 1)
    (vector_state, last_ts, _, discounted, memory), steps = jax.lax.scan(body, carry, keys)
    return (vector_state, last_ts), steps, discounted, memory


def per_env(flags: Array, like: Array) -> Array:
    """Per-env flags [envs] shaped to broadcast against `like` [envs, ...]."""
    return flags.reshape(flags.shape + (1,) * (like.ndim - 1))


def learning_rate(setup: OnPolicySetup, env_steps: Array) -> Array:
    """The learning rate after `env_steps`: constant, or annealed linearly to 0 at the budget."""
    cfg = setup.cfg
    if not cfg.anneal_lr:
        return jnp.asarray(cfg.learning_rate, jnp.float32)
    return optimizers.linear_to_zero(cfg.learning_rate, setup.total_env_steps)(env_steps)


def samples_of(
    setup: OnPolicySetup, state: OnPolicyState, ro: Rollout, return_stats: RunningStats
) -> Sample:
    """The update batch of a rollout: scaled rewards, GAE advantages and value targets, and the
    observations normalised as the rollout saw them."""
    cfg, algorithm = setup.cfg, setup.algorithm
    t = ro.transition
    reward = t.reward
    if cfg.return_normalization:
        reward = jnp.clip(
            reward / jnp.sqrt(return_stats.var + STD_EPS), -cfg.reward_clip, cfg.reward_clip
        )
    if algorithm.critic:
        policy = setup.policy

        def values_of(value: Callable[[PyTree, PyTree], Array], obs: Array) -> Array:
            """[T, envs] values of [T, envs] observations: one batched pass of the network."""
            one = lambda o, record: value(forward(setup, state.params, state.obs_stats, o), record)
            return jax.vmap(jax.vmap(one))(obs, ro.record)

        values = ro.value if policy.step_value is None else values_of(policy.step_value, t.obs)
        next_values = values_of(policy.successor_value, t.next_obs)
    else:
        values = next_values = jnp.zeros_like(reward)
    advantages, targets = gae(
        reward, values, next_values, t.terminated, t.truncated, cfg.gamma, algorithm.gae_lambda
    )
    if algorithm.mean_baseline:
        advantages = advantages - global_mean(setup.axis, advantages, ro.valid)
    # Normalised once here rather than in every minibatch of every epoch: the statistics are
    # those the rollout acted with and do not change during the update.
    obs = normalized(setup, state.obs_stats, t.obs)
    return Sample(obs, ro.raw_action, ro.log_prob, values, advantages, targets, ro.record)


def minibatch_loss(
    setup: OnPolicySetup, params: PyTree, batch: Sample, valid: Array | None, count: Array
) -> tuple[Array, Array]:
    """The minibatch's share of the global mean loss, and its metrics' shares packed in one
    vector (one reduction instead of one per metric)."""
    # The network runs on the whole minibatch (its weight gradients are then the fast
    # `networks.batch_matmul` form), the loss per sample.
    outputs = setup.policy.net.apply(params, batch.obs)
    per_sample, metrics = jax.vmap(
        lambda out, sample: setup.algorithm.loss(*setup.policy.loss_inputs(out, sample), sample)
    )(outputs, batch)
    packed = jax.lax.stop_gradient(jnp.stack([metrics[k] for k in sorted(metrics)], axis=-1))
    if valid is not None:
        w = valid.astype(jnp.float32)
        per_sample, packed = w * per_sample, w[:, None] * packed
    return per_sample.sum() / count, packed.sum(0) / count


def minibatch_step(
    setup: OnPolicySetup,
    lr: Array,
    carry: tuple[PyTree, optax.OptState],
    minibatch: tuple[Sample, Array | None],
) -> tuple[tuple[PyTree, optax.OptState], Array]:
    """One optimiser step on a minibatch ([T/M, envs, ...] leaves); returns the packed metrics
    followed by the loss and the gradient norm."""
    cfg, axis = setup.cfg, setup.axis
    params, opt_state = carry
    batch, valid = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), minibatch)
    if cfg.normalize_advantages:
        mean = global_mean(axis, batch.advantage, valid)
        std = jnp.sqrt(global_mean(axis, (batch.advantage - mean) ** 2, valid))
        batch = batch._replace(advantage=(batch.advantage - mean) / (std + STD_EPS))
    if valid is None:
        count = axis.psum(float(batch.advantage.shape[0]))
    else:
        count = jnp.maximum(axis.psum(valid.sum().astype(jnp.float32)), 1.0)
    (loss, packed), grads = jax.value_and_grad(
        lambda p: minibatch_loss(setup, p, batch, valid, count), has_aux=True
    )(params)
    if setup.flat_optimizer:
        flat_grads, unravel = ravel_pytree(grads)
        flat_grads, loss, packed = axis.psum((flat_grads, loss, packed))
        updates, opt_state = setup.tx.update(flat_grads, opt_state)
        updates, grad_norm = unravel(updates), optax.tree.norm(flat_grads)
    else:
        grads, loss, packed = axis.psum((grads, loss, packed))
        updates, opt_state = setup.tx.update(grads, opt_state)
        grad_norm = optax.tree.norm(grads)
    params = jax.tree.map(lambda p, u: p - lr * u, params, updates)
    return (params, opt_state), jnp.concatenate([packed, jnp.stack([loss, grad_norm])])


def update(
    setup: OnPolicySetup,
    state: OnPolicyState,
    samples: Sample,
    valid: Array | None,
    key: Key,
    lr: Array,
) -> tuple[PyTree, optax.OptState, dict[str, Array]]:
    """`epochs` passes over shuffled minibatches of the samples; the parameters, optimiser state
    and the mean of each metric over all minibatch steps."""
    algorithm = setup.algorithm
    step = functools.partial(minibatch_step, setup, lr)

    def epoch(carry, epoch_key):
        minibatches = shuffled_minibatches((samples, valid), epoch_key, algorithm.minibatches)
        return jax.lax.scan(step, carry, minibatches)

    # The loss's metric names, in the order `minibatch_loss` packs them.
    one = jax.tree.map(lambda x: x[0, 0], samples)
    metric_names = sorted(
        jax.eval_shape(
            lambda p, b: algorithm.loss(*model(setup, p, b.obs, b), b)[1], state.params, one
        )
    )
    (params, opt_state), packed = jax.lax.scan(
        epoch, (state.params, state.opt_state), jax.random.split(key, algorithm.epochs)
    )
    means = packed.mean((0, 1))
    metrics = dict(zip([*metric_names, "loss", "grad_norm"], means, strict=True))
    return params, opt_state, metrics


def iteration(
    setup: OnPolicySetup, state: OnPolicyState, env_state: PyTree, key: Key
) -> tuple[OnPolicyState, PyTree, dict[str, Array]]:
    """One training iteration on this device's envs: rollout, statistics, advantages, update."""
    cfg, axis = setup.cfg, setup.axis
    rollout_key, update_key = jax.random.split(key)
    env_state, ro, discounted, memory = rollout(setup, state, env_state, rollout_key)
    return_stats = state.return_stats
    if cfg.return_normalization:
        return_stats = normalize.combine(
            return_stats, masked_stats(axis, ro.discounted_return, ro.valid, 2)
        )
    samples = samples_of(setup, state, ro, return_stats)
    lr = learning_rate(setup, state.env_steps)
    params, opt_state, metrics = update(setup, state, samples, ro.valid, update_key, lr)
    obs_stats = state.obs_stats
    if setup.normalize_obs:  # after the update, so the update saw the statistics the rollout used
        obs_stats = normalize.combine(obs_stats, masked_stats(axis, ro.transition.obs, ro.valid, 2))
    local_steps = setup.num_steps * setup.local_envs if ro.valid is None else ro.valid.sum()
    steps = axis.psum(local_steps)
    episodes = axis.psum(ro.episode_done.sum())
    returns = axis.psum(jnp.where(ro.episode_done, ro.episode_return, 0.0).sum())
    new_state = OnPolicyState(
        params, opt_state, obs_stats, return_stats, discounted, state.env_steps + steps, memory
    )
    if setup.policy.metrics is not None:
        for name, (numerator, denominator) in setup.policy.metrics(ro.record).items():
            metrics[name] = ratio_of_sums(axis, numerator, denominator, ro.valid)
    metrics = {
        **metrics,
        "env_steps": steps,
        "env_steps_computed": jnp.asarray(setup.num_steps * setup.num_envs, jnp.int32),
        "episodes": episodes,
        # 0 when no episode ended during the rollout (a NaN would stop the run); the logs leave
        # it out there (`outputs.PER_EPISODE_METRICS`)
        "episode_return": returns / jnp.maximum(episodes, 1),
        "learning_rate": lr,
    }
    return new_state, env_state, metrics


def ratio_of_sums(
    axis: parallel.DataAxis, numerator: Array, denominator: Array, valid: Array | None
) -> Array:
    """Σ numerator / Σ denominator over the valid entries on all devices (0 where the
    denominator sums to less than 1, e.g. no entry counted)."""
    w = 1.0 if valid is None else valid.astype(jnp.float32)
    total, count = axis.psum(((w * numerator).sum(), (w * denominator).sum()))
    return total / jnp.maximum(count, 1.0)


def init(setup: OnPolicySetup, key: Key) -> OnPolicyState:
    """Fresh parameters, optimiser state and statistics; every env's memory at its initial
    value."""
    space = setup.env.spec.observation_space
    params = setup.policy.net.init(key, jnp.zeros(space.shape, space.dtype))
    return OnPolicyState(
        params=params,
        opt_state=setup.tx.init(ravel_pytree(params)[0] if setup.flat_optimizer else params),
        obs_stats=normalize.init(space.shape),
        return_stats=normalize.init(()),
        discounted_return=jnp.zeros((setup.num_envs,), jnp.float32),
        env_steps=jnp.zeros((), jnp.float32),
        memory=initial_memory(setup, setup.num_envs),
    )


def act(
    setup: OnPolicySetup, state: OnPolicyState, obs: Array, key: Key, deterministic: bool = False
) -> Array:
    """Actions for a batch of observations, or for a single one (`jaxrl.load`'s policy)."""

    def one(o: Array, k: Key) -> Array:
        outputs = forward(setup, state.params, state.obs_stats, o)
        return setup.policy.action(outputs, k, deterministic)

    if obs.ndim == len(setup.env.spec.observation_space.shape):
        return one(obs, key)
    return jax.vmap(one)(obs, jax.random.split(key, obs.shape[0]))


def act_with_memory(
    setup: OnPolicySetup, state: OnPolicyState, obs: Array, memory: PyTree, key: Key
) -> tuple[Array, PyTree]:
    """Deterministic actions for a batch of observations and the envs' memory
    (`PolicyModel.evaluate`), and the memory they carry to the next step."""

    def one(o: Array, m: PyTree, k: Key) -> tuple[Array, PyTree]:
        return setup.policy.evaluate(forward(setup, state.params, state.obs_stats, o), m, k)

    return jax.vmap(one)(obs, memory, jax.random.split(key, obs.shape[0]))


def initial_memory(setup: OnPolicySetup, num_envs: int) -> PyTree:
    """The memory of `num_envs` envs at the start of their episodes."""
    return jax.tree.map(
        lambda m: jnp.full((num_envs, *jnp.shape(m)), m), setup.policy.initial_memory
    )


def state_value(setup: OnPolicySetup, state: OnPolicyState, obs: Array) -> Array:
    """V(s) of a batch of raw observations in the env's reward units: the critic learns the
    scaled return where `return_normalization` is on, so its values are scaled back."""
    values = jax.vmap(
        lambda o: setup.policy.state_value(forward(setup, state.params, state.obs_stats, o))
    )(obs)
    if setup.cfg.return_normalization:
        values = values * jnp.sqrt(state.return_stats.var + STD_EPS)
    return values


def flat_params(state: OnPolicyState) -> Array:
    return jnp.concatenate([jnp.ravel(x) for x in jax.tree.leaves(state.params)])


def make_on_policy(
    cfg: OnPolicyConfig, env: Env, algorithm: Algorithm, total_env_steps: float
) -> Agent:
    """An `Agent` running `algorithm` on `env`'s batch: the functions above bound to its setup,
    the iteration sharded over the env axis. `total_env_steps` (the run's budget) sets the
    learning-rate annealing horizon. Bad combinations raise ConfigError here."""
    setup = on_policy_setup(cfg, env, algorithm, total_env_steps)
    env_spec = P(ENV_AXIS) if env.spec.vmappable else P()
    state_spec = OnPolicyState(P(), P(), P(), P(), env_spec, P(), env_spec)
    sharded_iteration = setup.axis.shard_map(
        functools.partial(iteration, setup),
        in_specs=(state_spec, env_spec, P()),
        out_specs=(state_spec, env_spec, P()),
    )
    memory = setup.policy.evaluate is not None  # evaluations carry the policy's memory
    return Agent(
        init=functools.partial(init, setup),
        act=functools.partial(act, setup),
        train_step=sharded_iteration,
        params=flat_params,
        steps_per_iteration=None if setup.episodic else setup.num_steps * setup.num_envs,
        state_value=functools.partial(state_value, setup) if algorithm.critic else None,
        act_with_memory=functools.partial(act_with_memory, setup) if memory else None,
        initial_memory=functools.partial(initial_memory, setup) if memory else None,
    )
