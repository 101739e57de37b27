"""TD3 (Fujimoto et al. 2018) and the deterministic actor-critic learner it shares with DDPG.

TD3 is DDPG with three changes, each a config key here, so that one learner (`make_td3_learner`)
runs both (`agents/ddpg.py` only changes the defaults) and ERL can take either:

* twin critics, the target bootstrapping from the smaller of the two (`twin_critics`);
* target policy smoothing: the target action is μ'(s') + clip(N(0, σ²), −c, c)
  (`target_noise` σ, `target_noise_clip` c);
* delayed actor and target updates: the actor and both targets move every `policy_delay`-th
  critic update.

The actor is an MLP with a tanh output. The learner works in normalised action units, [−1, 1]
per dimension, and rescales to the env's Box only at the boundary (actions it returns, actions it
reads from the buffer), so noise scales (σ, c, exploration) mean the same for any bounds, as in
Stable-Baselines3. Exploration adds Gaussian noise (`exploration_noise`) to μ(s) and clips to
the Box; the first `learning_starts` steps are uniformly random (the driver's `jaxrl.offpolicy`).
Targets are Polyak averages (τ = `tau`), and bootstrap with (1 − terminated) only: a truncated
step bootstraps from its episode's last observation, which the driver stores as `next_obs`.

This module also holds what SAC shares with it: the Q-network, critic ensembles, the Box check
and action scaling, and the TD target.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxrl.config import ConfigError, require
from jaxrl.datatypes import Agent, Array, Box, EnvSpec, Key, Metrics, PyTree, Transition
from jaxrl.env import Env
from jaxrl.networks import Dense, activation
from jaxrl.offpolicy import Learner, OffPolicyConfig, make_off_policy, soft_update


@dataclass(frozen=True)
class TD3Config(OffPolicyConfig):
    """TD3's keys on top of `OffPolicyConfig`; defaults follow Fujimoto et al.'s published code
    (256-256 ReLU, Adam 3e-4, batch 256, τ 0.005, σ 0.2, c 0.5, delay 2, exploration 0.1)."""

    # Values a grid may vary in one program (jaxrl/hyper.py): they change no array shape.
    HYPERPARAMETERS: ClassVar[tuple[str, ...]] = (
        "gamma",
        "actor_lr",
        "critic_lr",
        "tau",
        "target_noise",
        "target_noise_clip",
        "exploration_noise",
    )

    name: str = "td3"
    buffer_size: int = 1_000_000
    learning_starts: int = 10_000
    actor_lr: float = 3e-4
    critic_lr: float = 3e-4
    tau: float = 0.005  # Polyak: target ← τ·online + (1 − τ)·target
    policy_delay: int = 2  # critic updates per actor and target update
    target_noise: float = 0.2  # σ of the target policy smoothing, normalised action units
    target_noise_clip: float = 0.5  # c: the smoothing noise is clipped to [−c, c]
    exploration_noise: float = 0.1  # σ of the Gaussian added to μ(s) when collecting
    twin_critics: bool = True  # False: one critic (DDPG)
    layer_norm: bool = False  # layer norm after every hidden layer (ERL's DDPG uses it)

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.actor_lr > 0, f"agent.actor_lr={self.actor_lr} must be > 0")
        require(self.critic_lr > 0, f"agent.critic_lr={self.critic_lr} must be > 0")
        require(0 < self.tau <= 1, f"agent.tau={self.tau} must be in (0, 1]")
        require(self.policy_delay >= 1, f"agent.policy_delay={self.policy_delay} must be >= 1")
        require(self.target_noise >= 0, f"agent.target_noise={self.target_noise} must be >= 0")
        require(
            self.target_noise_clip >= 0,
            f"agent.target_noise_clip={self.target_noise_clip} must be >= 0",
        )
        require(
            self.exploration_noise >= 0,
            f"agent.exploration_noise={self.exploration_noise} must be >= 0",
        )


# ----------------------------------------------------------------------------------------------
# Pieces TD3, DDPG and SAC share


class ActionScale(NamedTuple):
    """The affine map between normalised actions in [−1, 1] and the env's Box."""

    center: np.ndarray
    half_range: np.ndarray

    def to_env(self, action: Array) -> Array:
        return self.center + self.half_range * action

    def from_env(self, action: Array) -> Array:
        return (action - self.center) / self.half_range


def box_actions(spec: EnvSpec, agent: str) -> ActionScale:
    """The action scaling of a bounded flat Box; any other action space is refused here, before
    anything compiles (a tanh actor needs finite bounds to squash into)."""
    space = spec.action_space
    if not isinstance(space, Box):
        raise ConfigError(
            f"agent '{agent}' needs continuous (Box) actions; env '{spec.name}' has "
            f"{space.n} discrete actions (use a discrete-action agent such as dqn or ppo)"
        )
    if len(space.shape) != 1:
        raise ConfigError(
            f"agent '{agent}' supports flat (1-D) Box actions; env '{spec.name}' has shape "
            f"{space.shape}"
        )
    low, high = np.asarray(space.low, np.float32), np.asarray(space.high, np.float32)
    if not space.bounded or np.any(high <= low):
        raise ConfigError(
            f"agent '{agent}' needs a bounded Box (finite low < high) to squash its tanh "
            f"actions into; env '{spec.name}' has low={low.tolist()} high={high.tolist()}"
        )
    return ActionScale((high + low) / 2.0, (high - low) / 2.0)


class Torso(nn.Module):
    """Dense layers with an activation, optionally layer-normalised before it. Flax's default
    (LeCun normal) initialiser: the orthogonal one is a QR, which must not be vmapped on CPU."""

    hidden_sizes: Sequence[int]
    activation: str = "relu"
    layer_norm: bool = False

    @nn.compact
    def __call__(self, x: Array) -> Array:
        act = activation(self.activation)
        for size in self.hidden_sizes:
            x = Dense(size)(x)
            if self.layer_norm:
                x = nn.LayerNorm()(x)
            x = act(x)
        return x


class DeterministicActor(nn.Module):
    """μ(s) in normalised units: a tanh over the last layer."""

    action_size: int
    hidden_sizes: Sequence[int]
    activation: str = "relu"
    layer_norm: bool = False

    @nn.compact
    def __call__(self, obs: Array) -> Array:
        x = Torso(self.hidden_sizes, self.activation, self.layer_norm)(obs.astype(jnp.float32))
        return jnp.tanh(Dense(self.action_size)(x))


class QNetwork(nn.Module):
    """Q(s, a) from the concatenated observation and (normalised) action."""

    hidden_sizes: Sequence[int]
    activation: str = "relu"
    layer_norm: bool = False

    @nn.compact
    def __call__(self, obs: Array, action: Array) -> Array:
        x = jnp.concatenate([obs.astype(jnp.float32), action], axis=-1)
        x = Torso(self.hidden_sizes, self.activation, self.layer_norm)(x)
        return Dense(1)(x)[..., 0]


@dataclass(frozen=True)
class Critics:
    """An ensemble of `count` Q-networks whose parameters are stacked on a leading axis, so one
    vmapped call evaluates them all: `critics(params, obs, action)` is [count, *batch]."""

    net: QNetwork
    count: int

    def init(self, key: Key, obs: Array, action: Array) -> PyTree:
        return jax.vmap(lambda k: self.net.init(k, obs, action))(jax.random.split(key, self.count))

    def __call__(self, params: PyTree, obs: Array, action: Array) -> Array:
        return jax.vmap(self.net.apply, in_axes=(0, None, None))(params, obs, action)

    def first(self, params: PyTree, obs: Array, action: Array) -> Array:
        """Q₁ alone (TD3's actor follows the first critic)."""
        return self.net.apply(jax.tree.map(lambda p: p[0], params), obs, action)


def td_target(reward: Array, terminated: Array, next_value: Array, gamma: float) -> Array:
    """r + γ·(1 − terminated)·V(s'). Truncation does not enter: a truncated step bootstraps from
    its true successor like any other non-terminal step."""
    return reward + gamma * (1.0 - terminated.astype(jnp.float32)) * next_value


def critic_loss(q: Array, target: Array) -> Array:
    """Σ over critics of the mean squared TD error (q: [critics, batch]), as in TD3's code."""
    return jnp.sum(jnp.mean((q - target) ** 2, axis=-1))


# ----------------------------------------------------------------------------------------------
# TD3 / DDPG


def smoothed_action(target_action: Array, noise: Array, noise_clip: float) -> Array:
    """Target policy smoothing: μ'(s') + clip(ε, −c, c), kept in the normalised box [−1, 1]."""
    return jnp.clip(target_action + jnp.clip(noise, -noise_clip, noise_clip), -1.0, 1.0)


class TD3State(NamedTuple):
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


class TD3Networks(NamedTuple):
    actor: DeterministicActor
    critics: Critics
    scale: ActionScale


def td3_networks(cfg: TD3Config, spec: EnvSpec) -> TD3Networks:
    """The actor, critics and action scaling for `spec` (refusing non-Box action spaces)."""
    scale = box_actions(spec, cfg.name)
    actor = DeterministicActor(
        spec.action_space.shape[0], cfg.hidden_sizes, cfg.activation, cfg.layer_norm
    )
    q = QNetwork(cfg.hidden_sizes, cfg.activation, cfg.layer_norm)
    return TD3Networks(actor, Critics(q, 2 if cfg.twin_critics else 1), scale)


def td3_target(
    cfg: TD3Config, nets: TD3Networks, state: TD3State, batch: Transition, noise: Array
) -> Array:
    """The critics' regression target for a batch with normalised actions: r + γ·(1 −
    terminated)·minᵢ Qᵢ'(s', smoothed μ'(s')); `noise` is the unclipped smoothing noise (σ·ε)."""
    next_action = smoothed_action(
        nets.actor.apply(state.target_actor_params, batch.next_obs), noise, cfg.target_noise_clip
    )
    next_q = nets.critics(state.target_critic_params, batch.next_obs, next_action)
    return td_target(batch.reward, batch.terminated, next_q.min(axis=0), cfg.gamma)


def make_td3_learner(cfg: TD3Config, spec: EnvSpec) -> Learner:
    """TD3's learner (DDPG's with `twin_critics=False, policy_delay=1, target_noise=0`).

    `update` takes a minibatch with env-scaled actions: one critic step on every call, then, on
    every `policy_delay`-th call, one actor step on −Q₁(s, μ(s)) (with the just-updated critic)
    and Polyak updates of both targets.
    """
    nets = td3_networks(cfg, spec)
    actor, critics, scale = nets
    actor_tx, critic_tx = optax.adam(cfg.actor_lr), optax.adam(cfg.critic_lr)
    obs0 = jnp.zeros(spec.observation_space.shape, jnp.float32)
    action0 = jnp.zeros(spec.action_space.shape, jnp.float32)

    def init(key: Key) -> TD3State:
        actor_key, critic_key = jax.random.split(key)
        actor_params = actor.init(actor_key, obs0)
        critic_params = critics.init(critic_key, obs0, action0)
        return TD3State(
            actor_params,
            critic_params,
            actor_params,
            critic_params,
            actor_tx.init(actor_params),
            critic_tx.init(critic_params),
            jnp.zeros((), jnp.int32),
        )

    def noisy(params: PyTree, obs: Array, key: Key) -> Array:
        mu = actor.apply(params, obs)
        noise = cfg.exploration_noise * jax.random.normal(key, mu.shape)
        return scale.to_env(jnp.clip(mu + noise, -1.0, 1.0))

    def explore(state: TD3State, obs: Array, key: Key, env_steps: Array) -> Array:
        return noisy(state.actor_params, obs, key)

    def act(state: TD3State, obs: Array, key: Key, deterministic: bool) -> Array:
        if deterministic:
            return scale.to_env(actor.apply(state.actor_params, obs))
        return noisy(state.actor_params, obs, key)

    def update(state: TD3State, batch: Transition, key: Key) -> tuple[TD3State, Metrics]:
        batch = batch._replace(action=scale.from_env(batch.action))
        noise = cfg.target_noise * jax.random.normal(key, batch.action.shape)
        target = jax.lax.stop_gradient(td3_target(cfg, nets, state, batch, noise))

        def loss_of_critics(params: PyTree) -> tuple[Array, Array]:
            q = critics(params, batch.obs, batch.action)
            return critic_loss(q, target), q

        (loss, q), grads = jax.value_and_grad(loss_of_critics, has_aux=True)(state.critic_params)
        updates, critic_opt_state = critic_tx.update(grads, state.critic_opt_state)
        critic_params = optax.apply_updates(state.critic_params, updates)
        count = state.updates + 1

        def actor_step(_: None) -> tuple[PyTree, ...]:
            def actor_loss(params: PyTree) -> Array:
                action = actor.apply(params, batch.obs)
                return -critics.first(critic_params, batch.obs, action).mean()

            grads = jax.grad(actor_loss)(state.actor_params)
            updates, opt_state = actor_tx.update(grads, state.actor_opt_state)
            actor_params = optax.apply_updates(state.actor_params, updates)
            return (
                actor_params,
                opt_state,
                soft_update(state.target_actor_params, actor_params, cfg.tau),
                soft_update(state.target_critic_params, critic_params, cfg.tau),
            )

        def hold(_: None) -> tuple[PyTree, ...]:
            return (
                state.actor_params,
                state.actor_opt_state,
                state.target_actor_params,
                state.target_critic_params,
            )

        actor_params, actor_opt_state, target_actor, target_critic = jax.lax.cond(
            count % cfg.policy_delay == 0, actor_step, hold, None
        )
        new_state = TD3State(
            actor_params,
            critic_params,
            target_actor,
            target_critic,
            actor_opt_state,
            critic_opt_state,
            count,
        )
        return new_state, {"critic_loss": loss, "q_mean": q.mean()}

    return Learner(
        init=init,
        explore=explore,
        act=act,
        update=update,
        params=lambda state: state.actor_params,
    )


def make_td3(cfg: TD3Config, env: Env) -> Agent:
    """TD3 (or DDPG, given a `DDPGConfig`) on `env`'s batch through the off-policy driver."""
    return make_off_policy(cfg, env, make_td3_learner(cfg, env.spec))
