"""The deterministic actor-critic learner of TD3 (Fujimoto et al. 2018), DDPG (Lillicrap et al.
2016) and ERL's gradient learner: one learner, TD3's three changes to DDPG each a config key.

* twin critics, the target bootstrapping from the smaller of the two (`twin_critics`);
* target policy smoothing: the target action is μ'(s') + clip(N(0, σ²), −c, c)
  (`target_noise` σ, `target_noise_clip` c);
* delayed actor and target updates: the actor and both targets move every `policy_delay`-th
  critic update.

`DDPG_KEYS` turns the three off. The actor is an MLP with a tanh output in normalised action
units (`jaxrl.continuous`), or with `inverting_gradients` an unsquashed output kept in [−1, 1]
by Hausknecht & Stone's inverting gradients and clipped where it acts (PA-DDPG's actor).
Exploration adds Gaussian noise (`exploration_noise`) to μ(s) and clips to the Box; the first
`learning_starts` steps are uniformly random (the driver's `jaxrl.offpolicy`). Targets are
Polyak averages (τ = `tau`), and bootstrap with (1 − terminated) only: a truncated step
bootstraps from its episode's last observation, which the driver stores as `next_obs`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from jaxrl import optimizers
from jaxrl.agent_config import DeterministicConfig
from jaxrl.continuous import (
    ActionScale,
    Critics,
    StateActionCritic,
    Torso,
    bootstrapped_return,
    box_actions,
    critic_loss,
    inverted_gradients,
)
from jaxrl.datatypes import Array, EnvSpec, Key, Metrics, PyTree, Transition
from jaxrl.networks import Dense, layer_init
from jaxrl.offpolicy import Learner, annealing_budget, num_updates, soft_update
from jaxrl.parallel import cond_over_runs


class DeterministicActor(nn.Module):
    """μ(s) in normalised units: a tanh over the last layer when `squash`; else unsquashed, its
    last layer starting near zero (N(0, 1e-4) weights, as Hausknecht & Stone's) so that actions
    start mid-range, and kept in bounds by inverting gradients."""

    action_size: int
    hidden_sizes: Sequence[int]
    activation: str = "relu"
    layer_norm: bool = False
    squash: bool = True
    # `networks.layer_init`'s scheme; the unsquashed head keeps its own
    init_scheme: str = "lecun_normal"

    @nn.compact
    def __call__(self, obs: Array) -> Array:
        obs = obs.astype(jnp.float32)
        x = Torso(self.hidden_sizes, self.activation, self.layer_norm, self.init_scheme)(obs)
        if self.squash:
            return jnp.tanh(Dense(self.action_size, **layer_init(self.init_scheme, x.shape[-1]))(x))
        return Dense(self.action_size, kernel_init=nn.initializers.normal(1e-4))(x)


class DeterministicState(NamedTuple):
    """The learner's state. `actor_params` is the policy (what `Learner.params` returns, what
    evaluation acts with); ERL copies actor parameters in and out through this field
    (`state._replace(actor_params=p)`), the target actor staying the learner's own."""

    actor_params: PyTree
    critic_params: PyTree  # leaves [critics, ...]
    target_actor_params: PyTree
    target_critic_params: PyTree
    actor_opt_state: optax.OptState
    critic_opt_state: optax.OptState
    updates: Array  # int32: critic updates so far (the actor moves every policy_delay-th)


class DeterministicNetworks(NamedTuple):
    actor: DeterministicActor
    critics: Critics
    scale: ActionScale
    actor_tx: optax.GradientTransformation
    critic_tx: optax.GradientTransformation


def deterministic_networks(
    cfg: DeterministicConfig, spec: EnvSpec, total_env_steps: float | None = None
) -> DeterministicNetworks:
    """The actor, critics, action scaling and optimisers for `spec` (refusing non-Box actions);
    `total_env_steps`, the run's budget, is the horizon `anneal_lr` needs."""
    scale = box_actions(spec, cfg.name)
    actor = DeterministicActor(
        spec.action_space.shape[0],
        cfg.hidden_sizes,
        cfg.activation,
        cfg.layer_norm,
        squash=not cfg.inverting_gradients,
        init_scheme=cfg.layer_init,
    )
    q = StateActionCritic(cfg.hidden_sizes, cfg.activation, cfg.layer_norm, cfg.layer_init)
    critics = Critics(q, 2 if cfg.twin_critics else 1)

    def adam(learning_rate: float) -> optax.GradientTransformation:
        # max_grad_norm is no grid key (never traced), so 0 keeps the optimiser state plain Adam's.
        if not cfg.max_grad_norm:
            return optax.adam(learning_rate)
        return optax.chain(optax.clip_by_global_norm(cfg.max_grad_norm), optax.adam(learning_rate))

    actor_lr, critic_lr = cfg.actor_lr, cfg.critic_lr
    if cfg.anneal_lr:
        budget = annealing_budget(total_env_steps)
        actor_lr, critic_lr = annealed_rates(cfg, num_updates(cfg, spec.num_envs, budget))
    return DeterministicNetworks(actor, critics, scale, adam(actor_lr), adam(critic_lr))


def annealed_rates(
    cfg: DeterministicConfig, critic_updates: int
) -> tuple[optax.Schedule, optax.Schedule]:
    """The actor's and critics' learning rates falling to 0 over `critic_updates`, each over its
    own optimiser's steps (the actor steps once per `policy_delay`): TD3's, DDPG's, HyAR's."""
    return (
        optimizers.linear_to_zero(cfg.actor_lr, critic_updates // cfg.policy_delay),
        optimizers.linear_to_zero(cfg.critic_lr, critic_updates),
    )


def policy_action(nets: DeterministicNetworks, params: PyTree, obs: Array) -> Array:
    """μ(s) in the normalised box: a tanh actor's output, an unsquashed one's clipped."""
    action = nets.actor.apply(params, obs)
    return action if nets.actor.squash else jnp.clip(action, -1.0, 1.0)


def smoothed_action(target_action: Array, noise: Array, noise_clip: float) -> Array:
    """Target policy smoothing: μ'(s') + clip(ε, −c, c), kept in the normalised box [−1, 1]."""
    return jnp.clip(target_action + jnp.clip(noise, -noise_clip, noise_clip), -1.0, 1.0)


def critic_target(
    cfg: DeterministicConfig,
    nets: DeterministicNetworks,
    state: DeterministicState,
    batch: Transition,
    noise: Array,
) -> Array:
    """The critics' regression target for a batch with normalised actions: r + γ·(1 −
    terminated)·minᵢ Qᵢ'(s', smoothed μ'(s')); `noise` is the unclipped smoothing noise (σ·ε)."""
    next_action = smoothed_action(
        policy_action(nets, state.target_actor_params, batch.next_obs),
        noise,
        cfg.target_noise_clip,
    )
    next_q = nets.critics(state.target_critic_params, batch.next_obs, next_action)
    return bootstrapped_return(batch.reward, batch.terminated, next_q.min(axis=0), cfg.gamma)


def init(nets: DeterministicNetworks, obs: Array, action: Array, key: Key) -> DeterministicState:
    """Fresh parameters from example (unbatched) `obs` and `action`; targets start equal."""
    actor_key, critic_key = jax.random.split(key)
    actor_params = nets.actor.init(actor_key, obs)
    critic_params = nets.critics.init(critic_key, obs, action)
    return DeterministicState(
        actor_params,
        critic_params,
        actor_params,
        critic_params,
        nets.actor_tx.init(actor_params),
        nets.critic_tx.init(critic_params),
        jnp.zeros((), jnp.int32),
    )


def noisy_action(
    cfg: DeterministicConfig, nets: DeterministicNetworks, params: PyTree, obs: Array, key: Key
) -> Array:
    """μ(s) plus Gaussian exploration noise, clipped to the box, in env units."""
    mu = policy_action(nets, params, obs)
    noise = cfg.exploration_noise * jax.random.normal(key, mu.shape)
    return nets.scale.to_env(jnp.clip(mu + noise, -1.0, 1.0))


def act(
    cfg: DeterministicConfig,
    nets: DeterministicNetworks,
    state: DeterministicState,
    obs: Array,
    key: Key,
    deterministic: bool,
) -> Array:
    """μ(s) in env units (evaluation), or with exploration noise."""
    if deterministic:
        return nets.scale.to_env(policy_action(nets, state.actor_params, obs))
    return noisy_action(cfg, nets, state.actor_params, obs, key)


def actor_step(
    cfg: DeterministicConfig,
    nets: DeterministicNetworks,
    state: DeterministicState,
    critic_params: PyTree,
    obs: Array,
) -> tuple[PyTree, optax.OptState, PyTree, PyTree]:
    """One actor step on −Q₁(s, μ(s)) against `critic_params`, then Polyak updates of both
    targets: (actor params, actor optimiser state, target actor, target critics). An unsquashed
    actor steps on a surrogate with that loss's gradient through μ(s), inverted near the bounds:
    −mean Σ_i sg(inverted ∂Q₁/∂μ_i)·μ_i(s)."""

    def actor_loss(params: PyTree) -> Array:
        action = nets.actor.apply(params, obs)
        if nets.actor.squash:
            return -nets.critics.first(critic_params, obs, action).mean()
        q_of = lambda a: nets.critics.first(critic_params, obs, a).sum()
        ascent = inverted_gradients(jax.grad(q_of)(action), action)
        return -jnp.sum(jax.lax.stop_gradient(ascent) * action, axis=-1).mean()

    grads = jax.grad(actor_loss)(state.actor_params)
    updates, opt_state = nets.actor_tx.update(grads, state.actor_opt_state)
    actor_params = optax.apply_updates(state.actor_params, updates)
    return (
        actor_params,
        opt_state,
        soft_update(state.target_actor_params, actor_params, cfg.tau),
        soft_update(state.target_critic_params, critic_params, cfg.tau),
    )


def update(
    cfg: DeterministicConfig,
    nets: DeterministicNetworks,
    state: DeterministicState,
    batch: Transition,
    key: Key,
) -> tuple[DeterministicState, Metrics]:
    """One update on a minibatch with env-scaled actions: a critic step on every call, then, on
    every `policy_delay`-th call, `actor_step` with the just-updated critics."""
    batch = batch._replace(action=nets.scale.from_env(batch.action))
    noise = cfg.target_noise * jax.random.normal(key, batch.action.shape)
    target = jax.lax.stop_gradient(critic_target(cfg, nets, state, batch, noise))

    def loss_of_critics(params: PyTree) -> tuple[Array, Array]:
        q = nets.critics(params, batch.obs, batch.action)
        return critic_loss(q, target), q

    (loss, q), grads = jax.value_and_grad(loss_of_critics, has_aux=True)(state.critic_params)
    updates, critic_opt_state = nets.critic_tx.update(grads, state.critic_opt_state)
    critic_params = optax.apply_updates(state.critic_params, updates)
    count = state.updates + 1

    def hold(*_: Any) -> tuple[PyTree, ...]:
        return (
            state.actor_params,
            state.actor_opt_state,
            state.target_actor_params,
            state.target_critic_params,
        )

    actor_params, actor_opt_state, target_actor, target_critic = cond_over_runs(
        count % cfg.policy_delay == 0,
        functools.partial(actor_step, cfg, nets, state),
        hold,
        critic_params,
        batch.obs,
    )
    new_state = DeterministicState(
        actor_params,
        critic_params,
        target_actor,
        target_critic,
        actor_opt_state,
        critic_opt_state,
        count,
    )
    return new_state, {"critic_loss": loss, "q_mean": q.mean()}


def make_deterministic_learner(
    cfg: DeterministicConfig, spec: EnvSpec, total_env_steps: float | None = None
) -> Learner:
    """The learner for `spec`, its functions bound to `cfg` and the networks; `total_env_steps`
    (the run's budget) is the annealing horizon with `anneal_lr`."""
    nets = deterministic_networks(cfg, spec, total_env_steps)
    obs0 = jnp.zeros(spec.observation_space.shape, jnp.float32)
    action0 = jnp.zeros(spec.action_space.shape, jnp.float32)
    return Learner(
        init=functools.partial(init, nets, obs0, action0),
        explore=lambda state, obs, key, env_steps: noisy_action(
            cfg, nets, state.actor_params, obs, key
        ),
        act=functools.partial(act, cfg, nets),
        update=functools.partial(update, cfg, nets),
        params=lambda state: state.actor_params,
        action_value=lambda state, obs, action: nets.critics(
            state.critic_params, obs, nets.scale.from_env(action)
        ).min(axis=0),
    )
