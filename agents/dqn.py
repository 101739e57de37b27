"""Deep Q-Networks (Mnih et al. 2015) with Double DQN targets (van Hasselt et al. 2016).

ε-greedy exploration on a linear schedule, a target network refreshed every
`target_update_period` updates (a hard copy with τ = 1, Polyak averaging with τ < 1), Huber or
squared TD loss, global-norm gradient clipping, and an MLP (vector observations) or Nature CNN
(image observations) Q-network. The replay buffer, learning starts, `train_freq` and
`gradient_steps` are `jaxrl.offpolicy`'s; this module is the learner. Three of Rainbow's pieces
(Hessel et al. 2018) are options: n-step returns (`n_step`, summed by the driver), dueling heads
(`dueling`, Wang et al. 2016) and proportional prioritised replay (`prioritized`, Schaul et al.
2016; `jaxrl.prioritized`), whose importance weights scale each sample's loss.

Weights (`kernel_init`): orthogonal with gain √2 in the hidden layers and 1 in the head, the
setting the defaults were swept with; `lecun_normal` is flax's default, kept by PureJaxRL's and
CleanRL's DQN, and with PureJaxRL's CartPole config it is the one that holds the solved policy
(benchmarks/results/dqn_purejaxrl.md).

Bootstrapping: the driver stores the true successor (`final_obs`) of every step, so a truncated
step bootstraps from the last observation of its episode; the target masks the bootstrap with
`terminated` alone (`td_target`).

Settings. The defaults (`conf/agent/dqn.yaml`) solve CartPole-v1 in 60k env steps. They start
from RL Baselines3 Zoo's CartPole-v1 DQN (batch 64, 1000 learning starts, 256 env steps then 128
updates, ε 1 → 0.04 over 16% of 50k steps, 100k buffer, gradient norm 10) with three changes
found by a 4-seed sweep here, because the Zoo's own values (lr 2.3e-3 constant, Huber,
[256, 256]) reached 500 and fell back (final evaluations 19–500): squared loss, [128, 128] ReLU,
and lr 2e-3 annealed linearly to 0 over the budget (PureJaxRL's DQN option), which mostly holds
the learned policy: in 20 seed runs of 60k steps (seeds 0–11, 4 or 8 vmapped at a time) all
reached 500 and 18 ended there (two fell back to 96 and 376 near the end). The env batch is
4 envs × `train_freq` 64; Double DQN is on. Units differ from SB3's in two places:
`exploration_steps` is absolute (SB3's fraction × its budget), and `target_update_period`
counts gradient updates, not env steps; the Zoo's `target_update_interval=10` env steps with
updates in blocks of 128 refreshes the target once per block: `target_update_period=128` here.

Atari (`env=ALE/Breakout-v5`: 84×84×4 uint8 frames, the Nature CNN is picked automatically):
an `ALE/…` env picks the `atari` preset (jaxrl/presets.py), RL Baselines3 Zoo's DQN (1e7 steps,
one update every 4 env steps, lr 1e-4, batch 32, 100k buffer and learning starts, ε 1 → 0.01
over 1M steps, Huber loss, no Double DQN, each frame stored once). The Zoo refreshes its target
every 1000 env steps, which is 250 updates at one update per 4 steps. Nature DQN itself differs in:
RMSProp lr 2.5e-4, 1M transitions, 50k learning starts, target every 10k updates
(`agent.target_update_period=10000`), ε 1 → 0.1 over 1M frames. Memory (`agent.frame_storage`,
exact at truncations and terminations in every form): 100k Atari transitions with obs and
next_obs stored whole (`full`) are 5.6 GB of uint8 frames per seed; `compact` stores next_obs as
its newest frame only (`jaxrl.offpolicy.NEWEST_FRAME_LAYOUT`): 3.5 GB; `once` stores each frame
once and rebuilds the stacks when sampling (`jaxrl.frame_replay`): 0.75 GB, and the Nature DQN's
1M transitions 7.5 GB.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from agents.configs import DQNConfig
from jaxrl import optimizers
from jaxrl.config import require
from jaxrl.datatypes import Agent, Array, EnvSpec, Key, Metrics, PyTree, Transition
from jaxrl.env import Env, discrete_actions
from jaxrl.networks import KERNEL_INITS, Dense, MLPTorso, NatureCNN, resolve_torso
from jaxrl.offpolicy import (
    FRAMES_ONCE_LAYOUT,
    FULL_LAYOUT,
    NEWEST_FRAME_LAYOUT,
    Learner,
    epsilon,
    epsilon_greedy,
    make_off_policy,
    num_updates,
    soft_update,
)
from jaxrl.prioritized import Prioritization

FRAME_STORAGE = {
    "full": FULL_LAYOUT,  # obs and next_obs whole
    "compact": NEWEST_FRAME_LAYOUT,  # next_obs as its newest frame: k + 1 frames a transition
    "once": FRAMES_ONCE_LAYOUT,  # each frame once: about one frame a transition
}


class QNetwork(nn.Module):
    """One Q-value per action from an observation (or a batch of them)."""

    num_actions: int
    torso: str = "mlp"  # "mlp" or "nature_cnn" (resolved by `resolve_torso`)
    hidden_sizes: Sequence[int] = (128, 128)  # MLP torso only
    activation: str = "relu"
    dueling: bool = False  # a value head and an advantage head (`dueling_q`)
    kernel_init: str = "orthogonal"  # of the MLP torso and the heads (`KERNEL_INITS`)

    @nn.compact
    def __call__(self, obs: Array) -> Array:
        if self.torso == "nature_cnn":
            features = NatureCNN()(obs)
        else:
            features = MLPTorso(self.hidden_sizes, self.activation, self.kernel_init)(
                obs.astype(jnp.float32)
            )
        head_init = KERNEL_INITS[self.kernel_init][1]
        head = lambda n, name: Dense(n, kernel_init=head_init, name=name)
        if self.dueling:
            return dueling_q(
                head(1, "value")(features), head(self.num_actions, "advantage")(features)
            )
        return head(self.num_actions, None)(features)


def dueling_q(value: Array, advantage: Array) -> Array:
    """Q(s, a) = V(s) + A(s, a) − mean_a A(s, a): the mean makes V and A identifiable (Wang et al.
    2016, eq. 9), so that V is the mean of the Q-values."""
    return value + advantage - advantage.mean(axis=-1, keepdims=True)


class DQNState(NamedTuple):
    params: PyTree
    target_params: PyTree
    opt_state: optax.OptState
    updates: Array  # int32: gradient updates so far


def td_target(
    q_next_online: Array,
    q_next_target: Array,
    reward: Array,
    terminated: Array,
    gamma: float | Array,
    double_q: bool,
) -> Array:
    """r + γ·(1 − terminated)·Q_target(s', a'), with a' = argmax Q_online(s') (Double DQN) or
    argmax Q_target(s'); for n-step returns r is the discounted sum and γ per sample the
    transition's `discount`. Truncation is not an argument: a truncated step bootstraps like any
    other, from s' = its episode's final observation."""
    chooser = q_next_online if double_q else q_next_target
    next_action = jnp.argmax(chooser, axis=-1)
    next_value = jnp.take_along_axis(q_next_target, next_action[..., None], axis=-1)[..., 0]
    return reward + gamma * (1.0 - terminated.astype(jnp.float32)) * next_value


def td_loss(error: Array, kind: str) -> Array:
    """Per-sample loss of a TD error: Huber (δ = 1) or ½·error², which agree for |error| ≤ 1;
    Huber is the squared loss with its gradient clipped to ±1 (Nature DQN's error clipping)."""
    if kind == "huber":
        return optax.huber_loss(error, delta=1.0)
    return 0.5 * error**2


class DQNSetup(NamedTuple):
    """What the learner's functions share, fixed when the program is traced."""

    cfg: DQNConfig
    net: QNetwork
    tx: optax.GradientTransformation
    num_actions: int


def init(setup: DQNSetup, obs: Array, key: Key) -> DQNState:
    """Fresh parameters from an example (unbatched) observation; the target starts equal."""
    params = setup.net.init(key, obs)
    return DQNState(params, params, setup.tx.init(params), jnp.zeros((), jnp.int32))


def greedy(setup: DQNSetup, params: PyTree, obs: Array) -> Array:
    return jnp.argmax(setup.net.apply(params, obs), axis=-1).astype(jnp.int32)


def eps_greedy(setup: DQNSetup, params: PyTree, obs: Array, key: Key, eps: Array) -> Array:
    """The greedy action, replaced by a uniform one with probability ε."""
    return epsilon_greedy(greedy(setup, params, obs), setup.num_actions, key, eps)


def act(setup: DQNSetup, state: DQNState, obs: Array, key: Key, deterministic: bool) -> Array:
    """Greedy for evaluation; otherwise the final exploration policy (ε = eps_end)."""
    if deterministic:
        return greedy(setup, state.params, obs)
    return eps_greedy(setup, state.params, obs, key, jnp.asarray(setup.cfg.eps_end))


def loss_fn(
    setup: DQNSetup,
    params: PyTree,
    state: DQNState,
    batch: Transition,
    weights: Array | None = None,
) -> tuple[Array, tuple[Metrics, Array]]:
    """The mean TD loss of a minibatch against the (Double) DQN target of `state`'s target net,
    each sample's loss times its importance weight under prioritised replay; (metrics, TD
    errors)."""
    cfg, net = setup.cfg, setup.net
    q = net.apply(params, batch.obs)
    q_taken = jnp.take_along_axis(q, batch.action[:, None].astype(jnp.int32), axis=-1)[:, 0]
    q_next_target = net.apply(state.target_params, batch.next_obs)
    q_next_online = net.apply(params, batch.next_obs) if cfg.double_q else q_next_target
    discount = cfg.gamma if batch.discount is None else batch.discount
    target = td_target(
        q_next_online, q_next_target, batch.reward, batch.terminated, discount, cfg.double_q
    )
    error = q_taken - jax.lax.stop_gradient(target)
    losses = td_loss(error, cfg.loss)
    if weights is not None:
        losses = weights * losses
    return losses.mean(), ({"q_mean": q_taken.mean()}, error)


def update(
    setup: DQNSetup, state: DQNState, batch: Transition, key: Key
) -> tuple[DQNState, Metrics]:
    """One gradient step; the target moves every `target_update_period` updates."""
    del key  # DQN's update is deterministic given the minibatch
    state, metrics, _ = gradient_step(setup, state, batch, None)
    return state, metrics


def weighted_update(
    setup: DQNSetup, state: DQNState, batch: Transition, weights: Array, key: Key
) -> tuple[DQNState, Metrics, Array]:
    """`update` under prioritised replay: the samples' losses weighted; their TD errors back."""
    del key
    return gradient_step(setup, state, batch, weights)


def gradient_step(
    setup: DQNSetup, state: DQNState, batch: Transition, weights: Array | None
) -> tuple[DQNState, Metrics, Array]:
    cfg = setup.cfg
    (loss, (metrics, error)), grads = jax.value_and_grad(
        lambda p: loss_fn(setup, p, state, batch, weights), has_aux=True
    )(state.params)
    updates, opt_state = setup.tx.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    count = state.updates + 1
    refresh = count % cfg.target_update_period == 0
    refreshed = soft_update(state.target_params, params, cfg.tau)
    target_params = jax.tree.map(
        lambda new, old: jnp.where(refresh, new, old), refreshed, state.target_params
    )
    metrics = {**metrics, "loss": loss, "grad_norm": optax.tree.norm(grads)}
    return DQNState(params, target_params, opt_state, count), metrics, error


def make_learner(cfg: DQNConfig, spec: EnvSpec, total_env_steps: float) -> Learner:
    """The DQN learner for `spec`; non-Discrete action spaces are refused here, before anything
    is traced. `total_env_steps` (the run's budget) sets the learning-rate annealing horizon."""
    space = discrete_actions(spec, "dqn", "for continuous actions use ddpg, td3 or sac")
    obs_space = spec.observation_space
    torso = resolve_torso(cfg.torso, obs_space.shape, cfg.name)
    net = QNetwork(space.n, torso, cfg.hidden_sizes, cfg.activation, cfg.dueling, cfg.kernel_init)
    learning_rate: optax.ScalarOrSchedule = cfg.learning_rate
    if cfg.anneal_lr:
        horizon = num_updates(cfg, spec.num_envs, total_env_steps, cfg.n_step)
        learning_rate = optimizers.linear_to_zero(cfg.learning_rate, horizon)
    tx = optax.chain(
        optimizers.clip_by_global_norm(cfg.max_grad_norm),
        optax.adam(learning_rate, eps=cfg.adam_eps),
    )

    setup = DQNSetup(cfg, net, tx, space.n)
    obs0 = jnp.zeros(obs_space.shape, obs_space.dtype)
    return Learner(
        init=functools.partial(init, setup, obs0),
        explore=lambda state, obs, key, env_steps: eps_greedy(
            setup, state.params, obs, key, epsilon(cfg, env_steps)
        ),
        act=functools.partial(act, setup),
        update=functools.partial(update, setup),
        weighted_update=functools.partial(weighted_update, setup),
        params=lambda state: state.params,
        action_value=lambda state, obs, action: jnp.take_along_axis(
            setup.net.apply(state.params, obs), action[..., None].astype(jnp.int32), axis=-1
        )[..., 0],
    )


def make_dqn(cfg: DQNConfig, env: Env, total_env_steps: float) -> Agent:
    """DQN on `env` through the off-policy driver; `total_env_steps` is the run's budget (the
    learning-rate annealing horizon)."""
    learner = make_learner(cfg, env.spec, total_env_steps)
    layout = FRAME_STORAGE[cfg.frame_storage]
    if cfg.frame_storage != "full":
        shape = env.spec.observation_space.shape
        require(
            len(shape) == 3 and shape[-1] >= 2,
            f"agent.frame_storage={cfg.frame_storage} needs frame-stacked image observations "
            f"[H, W, k >= 2]; env '{env.spec.name}' has shape {shape} (valid for it: full)",
        )
    prioritization = None
    if cfg.prioritized:
        prioritization = Prioritization(
            cfg.priority_exponent, cfg.importance_exponent, cfg.priority_epsilon, total_env_steps
        )
    return make_off_policy(cfg, env, learner, layout, cfg.n_step, prioritization)
