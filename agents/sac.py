"""Soft Actor-Critic (Haarnoja et al. 2018, "SAC v2": automatic entropy tuning, no value network).

* Twin soft Q-networks and their Polyak targets (τ = `tau`); the target is
  c·r + γ·(1 − terminated)·(minᵢ Qᵢ'(s', a') − α·log π(a'|s')), a' ~ π(·|s'), c =
  `reward_scale` (1 by default; Brax's `sac.train` calls it `reward_scaling`, and its per-env
  settings use 5–30: with α tuned to a fixed entropy, the reward's scale sets how much return
  weighs against entropy). Only termination
  stops the bootstrap: a truncated step bootstraps from its episode's last observation, which the
  driver (`jaxrl.offpolicy`) stores as `next_obs`.
* A tanh-Gaussian actor (`jaxrl.distributions.TanhGaussian`, log-density with the tanh log-det)
  trained on E[α·log π(ã|s) − minᵢ Qᵢ(s, ã)], ã reparameterised.
* A learned log α with loss −log α·(log π + H̄) (Stable-Baselines3's form), H̄ = `target_entropy`,
  −|A| by default.

The policy is a distribution over the normalised box [−1, 1]^|A|, rescaled to the env's Box only
when acting (as in Stable-Baselines3), so entropies and H̄ mean the same for any bounds. One
update: critic step (α of the step's start), actor step against the updated critics, α step on
the actor's log-probabilities, target update. Networks, Box check and one-step target are
`jaxrl.continuous`'s.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from agents.configs import SACConfig
from jaxrl import optimizers
from jaxrl.continuous import (
    ActionScale,
    Critics,
    GaussianActor,
    StateActionCritic,
    bootstrapped_return,
    box_actions,
    critic_loss,
)
from jaxrl.datatypes import Agent, Array, EnvSpec, Key, Metrics, PyTree, Transition
from jaxrl.distributions import TanhGaussian
from jaxrl.env import Env
from jaxrl.offpolicy import (
    Learner,
    annealing_budget,
    make_off_policy,
    num_updates,
    soft_update,
)

LOG_STD_BOUNDS = (-20.0, 2.0)  # those of the SAC reference code


class SACState(NamedTuple):
    """The learner's state; `actor_params` is the policy (`Learner.params`)."""

    actor_params: PyTree
    critic_params: PyTree  # leaves [2, ...]
    target_critic_params: PyTree
    log_alpha: Array  # float32 scalar
    actor_opt_state: optax.OptState
    critic_opt_state: optax.OptState
    alpha_opt_state: optax.OptState


def soft_target(
    reward: Array,
    terminated: Array,
    next_q: Array,
    next_log_prob: Array,
    alpha: Array,
    gamma: float,
) -> Array:
    """r + γ·(1 − terminated)·(minᵢ Qᵢ'(s', a') − α·log π(a'|s')); next_q: [critics, batch]."""
    return bootstrapped_return(
        reward, terminated, next_q.min(axis=0) - alpha * next_log_prob, gamma
    )


def actor_loss(alpha: Array, log_prob: Array, q: Array) -> Array:
    """E[α·log π(ã|s) − minᵢ Qᵢ(s, ã)]; q: [critics, batch]."""
    return jnp.mean(alpha * log_prob - q.min(axis=0))


def alpha_loss(log_alpha: Array, log_prob: Array, target_entropy: float) -> Array:
    """−log α·E[log π + H̄]: α grows while the entropy −E[log π] is below H̄."""
    return -log_alpha * jnp.mean(jax.lax.stop_gradient(log_prob) + target_entropy)


class SACNetworks(NamedTuple):
    """SAC's modules and the maps from the actor's outputs to actions and log-densities."""

    actor: GaussianActor
    critics: Critics
    scale: ActionScale

    def policy(self, params: PyTree, obs: Array) -> TanhGaussian:
        """π(·|s) over the normalised box [−1, 1]^|A|."""
        mean, log_std = self.actor.apply(params, obs)
        unit = jnp.ones(mean.shape[-1], jnp.float32)
        return TanhGaussian(mean, log_std, -unit, unit)

    def sample(self, params: PyTree, obs: Array, key: Key) -> tuple[Array, Array]:
        """A normalised action ã ~ π(·|s) (reparameterised) and log π(ã|s)."""
        return self.draw(self.policy(params, obs), key)

    @staticmethod
    def draw(policy: TanhGaussian, key: Key) -> tuple[Array, Array]:
        """`sample` from a policy already computed (the actor step also logs its mean and σ)."""
        raw = policy.sample(key)
        return policy.env_action(raw), policy.log_prob(raw)


def sac_networks(cfg: SACConfig, spec: EnvSpec) -> SACNetworks:
    """The actor, twin critics and action scaling for `spec` (refusing non-Box action spaces)."""
    scale = box_actions(spec, cfg.name)
    actor = GaussianActor(
        spec.action_space.shape[0], cfg.hidden_sizes, cfg.activation, *LOG_STD_BOUNDS
    )
    return SACNetworks(
        actor, Critics(StateActionCritic(cfg.hidden_sizes, cfg.activation), 2), scale
    )


def sac_target(
    cfg: SACConfig, nets: SACNetworks, state: SACState, batch: Transition, key: Key
) -> Array:
    """The critics' regression target for a batch (with normalised actions), a' ~ π(·|s') drawn
    with `key`, α of `state`."""
    next_action, next_log_prob = nets.sample(state.actor_params, batch.next_obs, key)
    next_q = nets.critics(state.target_critic_params, batch.next_obs, next_action)
    alpha = jnp.exp(state.log_alpha)
    reward = cfg.reward_scale * batch.reward
    return soft_target(reward, batch.terminated, next_q, next_log_prob, alpha, cfg.gamma)


class SACOptimizers(NamedTuple):
    actor: optax.GradientTransformation
    critic: optax.GradientTransformation
    alpha: optax.GradientTransformation


def sac_optimizers(cfg: SACConfig, num_envs: int, total_env_steps: float | None) -> SACOptimizers:
    """Adam for actor, critics and α; with `anneal_lr` each rate falls to 0 over the run's
    updates (all three step on every update), as Stable-Baselines3's schedule of all three."""
    rates = (cfg.actor_lr, cfg.critic_lr, cfg.alpha_lr)
    if cfg.anneal_lr:
        horizon = num_updates(cfg, num_envs, annealing_budget(total_env_steps))
        rates = tuple(optimizers.linear_to_zero(rate, horizon) for rate in rates)
    return SACOptimizers(*(optax.adam(rate) for rate in rates))


def init(
    cfg: SACConfig, nets: SACNetworks, txs: SACOptimizers, obs: Array, action: Array, key: Key
) -> SACState:
    """Fresh parameters from example (unbatched) `obs` and `action`; log α = log init_alpha."""
    actor_key, critic_key = jax.random.split(key)
    actor_params = nets.actor.init(actor_key, obs)
    critic_params = nets.critics.init(critic_key, obs, action)
    log_alpha = jnp.log(jnp.asarray(cfg.init_alpha, jnp.float32))
    return SACState(
        actor_params,
        critic_params,
        critic_params,
        log_alpha,
        txs.actor.init(actor_params),
        txs.critic.init(critic_params),
        txs.alpha.init(log_alpha),
    )


def act(nets: SACNetworks, state: SACState, obs: Array, key: Key, deterministic: bool) -> Array:
    """Env actions: the squashed mean (evaluation) or a sample of π(·|s)."""
    if deterministic:
        dist = nets.policy(state.actor_params, obs)
        return nets.scale.to_env(dist.env_action(dist.mode()))
    return nets.scale.to_env(nets.sample(state.actor_params, obs, key)[0])


def update(
    cfg: SACConfig,
    nets: SACNetworks,
    txs: SACOptimizers,
    target_entropy: float,
    state: SACState,
    batch: Transition,
    key: Key,
) -> tuple[SACState, Metrics]:
    """One SAC update on a minibatch with env-scaled actions: critic step (α of the step's
    start), actor step against the updated critics, α step, target update."""
    critics = nets.critics
    next_key, pi_key = jax.random.split(key)
    batch = batch._replace(action=nets.scale.from_env(batch.action))
    alpha = jnp.exp(state.log_alpha)
    target = jax.lax.stop_gradient(sac_target(cfg, nets, state, batch, next_key))

    def loss_of_critics(params: PyTree) -> tuple[Array, Array]:
        q = critics(params, batch.obs, batch.action)
        return critic_loss(q, target), q

    (q_loss, q), grads = jax.value_and_grad(loss_of_critics, has_aux=True)(state.critic_params)
    updates, critic_opt_state = txs.critic.update(grads, state.critic_opt_state)
    critic_params = optax.apply_updates(state.critic_params, updates)

    def loss_of_actor(params: PyTree) -> tuple[Array, tuple[Array, TanhGaussian]]:
        policy = nets.policy(params, batch.obs)
        new_action, log_prob = nets.draw(policy, pi_key)
        q_new = critics(critic_params, batch.obs, new_action)
        return actor_loss(alpha, log_prob, q_new), (log_prob, policy)

    (pi_loss, (log_prob, policy)), grads = jax.value_and_grad(loss_of_actor, has_aux=True)(
        state.actor_params
    )
    updates, actor_opt_state = txs.actor.update(grads, state.actor_opt_state)
    actor_params = optax.apply_updates(state.actor_params, updates)

    a_loss, grad = jax.value_and_grad(alpha_loss)(state.log_alpha, log_prob, target_entropy)
    log_alpha, alpha_opt_state = state.log_alpha, state.alpha_opt_state
    if cfg.learn_alpha:
        updates, alpha_opt_state = txs.alpha.update(grad, alpha_opt_state)
        log_alpha = optax.apply_updates(log_alpha, updates)

    new_state = SACState(
        actor_params,
        critic_params,
        soft_update(state.target_critic_params, critic_params, cfg.tau),
        log_alpha,
        actor_opt_state,
        critic_opt_state,
        alpha_opt_state,
    )
    return new_state, {
        "critic_loss": q_loss,
        "actor_loss": pi_loss,
        "alpha_loss": a_loss,
        "alpha": alpha,
        "entropy": -log_prob.mean(),
        "q_mean": q.mean(),
        # What the entropy alone hides: a wide Gaussian around saturated means samples both
        # ends of the box, while the noise-free action tanh(mean) sits at one of them.
        "policy_log_std": policy.log_std.mean(),
        "policy_mean_abs": jnp.abs(policy.mean).mean(),
    }


def make_sac_learner(
    cfg: SACConfig, spec: EnvSpec, total_env_steps: float | None = None
) -> Learner:
    """SAC's learner for `spec` (a bounded flat Box, else ConfigError): the functions above bound
    to its networks and optimisers; `total_env_steps` (the run's budget) is the annealing
    horizon with `anneal_lr`."""
    nets = sac_networks(cfg, spec)
    txs = sac_optimizers(cfg, spec.num_envs, total_env_steps)
    size = spec.action_space.shape[0]
    target_entropy = -float(size) if cfg.target_entropy is None else cfg.target_entropy
    obs0 = jnp.zeros(spec.observation_space.shape, jnp.float32)
    return Learner(
        init=functools.partial(init, cfg, nets, txs, obs0, jnp.zeros(size, jnp.float32)),
        explore=lambda state, obs, key, env_steps: act(nets, state, obs, key, False),
        act=functools.partial(act, nets),
        update=functools.partial(update, cfg, nets, txs, target_entropy),
        params=lambda state: state.actor_params,
        action_value=lambda state, obs, action: nets.critics(
            state.critic_params, obs, nets.scale.from_env(action)
        ).min(axis=0),
    )


def make_sac(cfg: SACConfig, env: Env, total_env_steps: float) -> Agent:
    """SAC on `env`'s batch through the off-policy driver; `total_env_steps` is the run's
    budget (the annealing horizon with `anneal_lr`)."""
    return make_off_policy(cfg, env, make_sac_learner(cfg, env.spec, total_env_steps))
