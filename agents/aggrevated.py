"""AggreVaTeD (Sun et al. 2017, "Deeply AggreVaTeD: Differentiable Imitation Learning for
Sequential Prediction"): policy gradient on the expert's cost-to-go.

Iteration n rolls in with the mixture α_n·expert + (1 − α_n)·learner (α_n = `mixture` decayed by
`mixture_schedule`, × 0.9 per iteration by default). Which states the learner then climbs
E_{a∼π(·|s)}[Q̂*(s, a)] at: with `aggregate` (the default wherever the expert has Q*), every state
of every iteration so far, up to `dataset_size` (Ross & Bagnell 2014's AggreVaTe, follow-the-
leader); without, only the iteration's own (the paper's online step, no replay). A roll-in of 50
steps sees one slice of the episodes, and online steps on it forget the rest: on Pendulum the
online learner swings between expert and failure from one iteration to the next, the aggregated
one stays at the expert (benchmarks/results/imitation.md). The expert's scores:

* an expert with a state-action critic (SAC, TD3, DDPG: Q* = min of its twin critics; DQN) scores
  actions the learner draws at the roll-in's states. For Box actions, `action_samples` per
  state, with the paper's likelihood-ratio gradient (`estimator=likelihood_ratio`: loss
  −E[log π(a|s)·Q̂*(s, a)]) or, by default, the reparameterised one (loss −E[Q*(s, a(ε))]/σ_Q,
  a(ε) the tanh-Gaussian sample, σ_Q the batch's standard deviation): the critic's action
  gradient has far less variance than the score function, and on Pendulum only it reached the
  expert (benchmarks/results/imitation.md). For Discrete actions the expectation is exact
  (loss −Σₐ π(a|s)·Q̂*(s, a));
* an expert with a state-value critic (PPO, A2C) scores the learner's own roll-in steps by the
  one-step advantage r + γ·V*(s′) − V*(s) (γ of the expert; no bootstrap past termination).

Q̂* is normalised per minibatch: "baseline" subtracts the mean over the state's scored actions
(the batch mean for the advantage) and divides by the batch's standard deviation; "minmax" maps
the batch to [0, 1] (the original experiment's choice: every weight positive, so it also pulls
toward bad actions). Steps are Adam's with global-norm clipping, or with `natural_gradient` one
natural-gradient step per iteration of KL size `kl_step` (the paper's variant: conjugate
gradient on Fisher-vector products of the KL). An entropy bonus is optional.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from agents.configs import AggreVaTeDConfig
from jaxrl import replay
from jaxrl.config import ConfigError
from jaxrl.datatypes import Agent, Array, Key, Metrics, PyTree
from jaxrl.env import Env
from jaxrl.imitation import (
    ImitationState,
    Method,
    Rollin,
    Setup,
    expert_share,
    kl_divergence,
    load_expert,
    make_imitation,
    minibatch_updates,
    mixture_acts,
)

CG_ITERATIONS = 10  # conjugate-gradient iterations of the natural-gradient step (as TRPO's)
CG_DAMPING = 0.1  # added to the Fisher-vector products: the Fisher of a small batch is singular


def normalized(cfg: AggreVaTeDConfig, score: Array, axis: int | None) -> Array:
    """Q̂* of a minibatch: minus the mean along `axis` (None: the batch's) over the batch's
    standard deviation ("baseline"), or min-max scaled to [0, 1] ("minmax")."""
    score = jax.lax.stop_gradient(score)
    if cfg.normalization == "minmax":
        return (score - score.min()) / jnp.maximum(score.max() - score.min(), 1e-8)
    centred = score - score.mean(axis=axis, keepdims=axis is not None)
    return centred / jnp.maximum(centred.std(), 1e-8)


def action_value_loss(
    cfg: AggreVaTeDConfig, setup: Setup, params: PyTree, obs: Array, key: Key
) -> tuple[Array, Metrics]:
    """−E_{a∼π}[log π(a|s)·Q̂*(s, a)] over `obs` (Box: sampled actions), −Σₐ π(a|s)·Q̂*(s, a)
    (Discrete), minus the entropy bonus."""
    policy, q_star = setup.policy, setup.expert.action_value
    dist = policy.dist(params, obs)
    if policy.scale is None:
        actions = jnp.arange(dist.logits.shape[-1], dtype=jnp.int32)
        q = jax.vmap(lambda a: q_star(obs, jnp.full(obs.shape[:1], a)), out_axes=-1)(actions)
        weight = normalized(cfg, q, axis=-1)
        objective = jnp.sum(jax.nn.softmax(dist.logits) * weight, axis=-1)
    elif cfg.estimator == "reparameterized":
        raw = jax.vmap(dist.sample)(jax.random.split(key, cfg.action_samples))
        q = jax.vmap(lambda r: q_star(obs, policy.env_action(dist, r)))(raw)  # [samples, batch]
        objective = q / jax.lax.stop_gradient(jnp.maximum(q.std(), 1e-8))
    else:
        raw = jax.lax.stop_gradient(
            jax.vmap(dist.sample)(jax.random.split(key, cfg.action_samples))
        )
        q = jax.vmap(lambda r: q_star(obs, policy.env_action(dist, r)))(raw)  # [samples, batch]
        weight = normalized(cfg, q, axis=0)
        objective = dist.log_prob(raw) * weight
    entropy = dist.entropy().mean()
    loss = -objective.mean() - cfg.entropy_coef * entropy
    return loss, {"q_star": q.mean(), "entropy": entropy}


def advantage_loss(
    cfg: AggreVaTeDConfig, setup: Setup, params: PyTree, steps: Rollin, advantage: Array
) -> tuple[Array, Metrics]:
    """−E[log π(a|s)·Â] over the steps the learner acted in, minus the entropy bonus."""
    policy = setup.policy
    dist = policy.dist(params, steps.obs)
    mine = ~steps.expert_acted
    count = jnp.maximum(mine.sum(), 1)
    mean = jnp.where(mine, advantage, 0).sum() / count
    if cfg.normalization == "minmax":
        low = jnp.where(mine, advantage, jnp.inf).min()
        high = jnp.where(mine, advantage, -jnp.inf).max()
        weight = (advantage - low) / jnp.maximum(high - low, 1e-8)
    else:
        std = jnp.sqrt(jnp.where(mine, (advantage - mean) ** 2, 0).sum() / count)
        weight = (advantage - mean) / jnp.maximum(std, 1e-8)
    log_prob = dist.log_prob(policy.raw_action(steps.action))
    objective = jnp.where(mine, log_prob * jax.lax.stop_gradient(weight), 0).sum() / count
    entropy = dist.entropy().mean()
    return -objective - cfg.entropy_coef * entropy, {"advantage": mean, "entropy": entropy}


def natural_gradient_step(
    cfg: AggreVaTeDConfig,
    setup: Setup,
    state: ImitationState,
    obs: Array,
    loss_fn,
) -> tuple[ImitationState, Metrics]:
    """θ ← θ − √(2δ / dᵀFd)·d with F·d = ∇L solved by conjugate gradient, F the Hessian of the
    mean KL(π_θ ‖ π_θ′) over `obs` at θ′ = θ: a step of KL ≈ δ = `kl_step`."""
    policy = setup.policy
    flat, unravel = ravel_pytree(state.params)
    old = jax.lax.stop_gradient(policy.dist(state.params, obs))
    (loss, metrics), grad = jax.value_and_grad(lambda f: loss_fn(unravel(f)), has_aux=True)(flat)
    kl = lambda f: kl_divergence(old, policy.dist(unravel(f), obs)).mean()
    fisher = lambda v: jax.jvp(jax.grad(kl), (flat,), (v,))[1] + CG_DAMPING * v
    direction, _ = jax.scipy.sparse.linalg.cg(fisher, grad, maxiter=CG_ITERATIONS)
    curvature = jnp.maximum(direction @ fisher(direction), 1e-12)
    params = unravel(flat - jnp.sqrt(2 * cfg.kl_step / curvature) * direction)
    return state._replace(params=params), {"loss": loss, **metrics}


def visited_states(setup: Setup, capacity: int) -> replay.ReplayState:
    """The empty store of aggregated roll-in states (no labels: Q* scores them afresh)."""
    space = setup.env.spec.observation_space
    return replay.init(jnp.zeros(space.shape, space.dtype), capacity)


def update(
    cfg: AggreVaTeDConfig,
    aggregate: bool,
    setup: Setup,
    state: ImitationState,
    record: Rollin,
    key: Key,
) -> tuple[ImitationState, Metrics]:
    """Policy-gradient steps on this iteration's roll-in states (with `aggregate`, on every
    state kept so far). `aggregate` is `cfg.aggregate` resolved against the expert, kept out of
    `cfg`: under a grid its hyperparameters are tracers, on which a copy made by
    `dataclasses.replace` would run the config's range checks."""
    steps = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), record)
    num_states = steps.obs.shape[0]
    state = state._replace(labelled_steps=state.labelled_steps + num_states)
    expert = setup.expert
    if expert.action_value is not None:
        scored = steps.obs
        if aggregate:
            dataset = replay.add(state.dataset, steps.obs)
            state = state._replace(dataset=dataset)
            scored, num_states = dataset.data, dataset.size

        def loss_on(params: PyTree, index: Array, k: Key) -> tuple[Array, Metrics]:
            return action_value_loss(cfg, setup, params, scored[index], k)

    else:
        next_value = expert.state_value(steps.next_obs)
        advantage = (
            steps.reward
            + expert.gamma * (1.0 - steps.terminated.astype(jnp.float32)) * next_value
            - expert.state_value(steps.obs)
        )

        def loss_on(params: PyTree, index: Array, k: Key) -> tuple[Array, Metrics]:
            batch = jax.tree.map(lambda x: x[index], steps)
            return advantage_loss(cfg, setup, params, batch, advantage[index])

    if cfg.natural_gradient:
        every_state = jnp.arange(num_states)
        loss_fn = lambda p: loss_on(p, every_state, key)
        state, metrics = natural_gradient_step(cfg, setup, state, steps.obs, loss_fn)
    else:

        def loss_fn(params: PyTree, k: Key) -> tuple[Array, Metrics]:
            index_key, loss_key = jax.random.split(k)
            index = jax.random.randint(index_key, (cfg.batch_size,), 0, num_states)
            return loss_on(params, index, loss_key)

        state, metrics = minibatch_updates(setup, state, loss_fn, key)
    metrics = {**metrics, "mixture": expert_share(cfg, state.iteration)}
    if aggregate:
        metrics["dataset_size"] = state.dataset.size
    return state, metrics


def make_aggrevated(cfg: AggreVaTeDConfig, env: Env) -> Agent:
    """AggreVaTeD with the expert of `cfg`; an expert without a critic is refused."""
    expert = load_expert(cfg, env.spec)
    if expert.action_value is None and expert.state_value is None:
        raise ConfigError(
            f"agent '{cfg.name}' needs an expert with a critic for its cost-to-go: "
            f"agent.expert={cfg.expert} is a '{expert.agent}' run, which has none (experts with "
            f"one: sac, td3, ddpg, dqn, ppo, a2c)"
        )
    if cfg.aggregate and expert.action_value is None:
        raise ConfigError(
            f"agent.aggregate=true scores kept states by the expert's Q*(s, a); agent.expert="
            f"{cfg.expert} is a '{expert.agent}' run with only V*(s), whose advantage scores the "
            f"roll-in's own actions (use agent.aggregate=false, or an expert from sac, td3, ddpg "
            f"or dqn)"
        )
    aggregate = cfg.aggregate
    if aggregate is None:
        aggregate = expert.action_value is not None and not cfg.natural_gradient
    method = Method(
        expert_acts=functools.partial(mixture_acts, cfg),
        update=functools.partial(update, cfg, aggregate),
        dataset=lambda setup: visited_states(setup, cfg.dataset_size) if aggregate else (),
    )
    return make_imitation(cfg, env, method, expert)
