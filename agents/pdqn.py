"""P-DQN (Xiong et al. 2018, "Parametrized Deep Q-Networks Learning: Reinforcement Learning with
Discrete-Continuous Hybrid Action Space"), and MP-DQN's multi-pass Q-network (Bester, James &
Konidaris 2019, "Multi-Pass Q-Networks for Deep Reinforcement Learning with Parameterised Action
Spaces") with `multi_pass=true`, for `Hybrid` action spaces.

* A parameter actor x(s) gives every choice's parameters at once in normalised units, [−1, 1]
  per parameter, rescaled to the Box only at the env boundary. Bounded as the reference bounds
  it, by Hausknecht & Stone's (2016) inverting gradients on an unsquashed output (clipped when
  acting), or with `inverting_gradients=false` by a tanh (the bounded output of Xiong et al.).
* A Q-network Q(s, x) gives one value per choice. P-DQN feeds it the state and all P parameters;
  MP-DQN runs K passes, pass k seeing only choice k's parameters (the others zero, the middle of
  their range) and keeps Q_k of pass k (`multi_pass_q`, a vmap over the passes), so that choice
  k's value does not depend on the other choices' parameters.
* Q loss: the mean squared error to r + γ·(1 − terminated)·max_k Q'(s', k, x'(s')) with both
  target networks; only termination stops the bootstrap (a truncated step bootstraps from its
  episode's last observation, which the driver stores as `next_obs`). With `twin_q=true`
  (HyAR's PDQN-TD3, Table 2's P-DQN baseline) two Q-networks learn side by side, the target is
  the smaller of their two max_k Q' (TD3's clipped double Q), the loss the sum of their squared
  errors, and acting and the actor follow the first.
* Actor loss: −mean over the batch of Σ_k Q(s, k, x(s)) against the just-updated Q-network
  (the P-DQN paper's; the reference's default loss, neither indexed nor weighted); its gradient
  with respect to x(s) inverted near the bounds (`inverted_gradients`) unless tanh-squashed.
* Acting: the choice is ε-greedy (ε linear in env steps from `eps_start` to `eps_end` over
  `exploration_steps`), the parameters x(s) plus Gaussian noise (`exploration_noise`, normalised
  units) on the chosen choice's slice only, clipped to the bounds. The first `learning_starts`
  steps are uniformly random (the driver's warm-up). Evaluation is greedy and noise-free.

Followed, for facts and settings (the code here is ours): github.com/cycraig/MP-DQN, commit
eec13eb (its code files as at 4003efa), `agents/pdqn.py` (`PDQNAgent._optimize_td_loss`: the
max-over-choices target from both target networks, MSE, gradient-norm clipping at 10, the actor
loss mean(Σ_k Q) and its inverted gradient, Polyak updates of both targets after every update;
`_invert_gradients`; `act`: ε-greedy choice, noise on the chosen slice),
`agents/pdqn_multipass.py` (`MultiPassQActor`: the batch repeated K times, pass k holding only
choice k's parameters, Q_k of pass k), `run_platform_pdqn.py` (Platform's settings: one hidden
layer of 128 ReLU for both networks, batch 128, γ 0.9, replay 10,000, learning from 500
transitions, ε 1 → 0.01 over 1,000 episodes, τ_Q 0.1, τ_x 0.001, Adam 1e-3 (Q) and 1e-4 (x),
one update per env step, inverting gradients). Its script's defaults run MP-DQN; `multi_pass`
is off here by default because the agent is P-DQN. `twin_q` follows github.com/TJU-DRL-LAB/
self-supervised-rl, commit ece9562, `RL_with_Action_Representation/HyAR/agents/pdqn_td3.py`
(`_optimize_td_loss`: min over the two networks of each one's max over choices; the sum of both
losses, clipped together; the actor and `act` on `Q1`).

Inverting gradients are the default because with the tanh some runs got stuck with parameters
saturated at a bound, where a saturated tanh passes no gradient; MP-DQN with them was also the
fastest (`benchmarks/results/hybrid.md`).

Departures from the reference, each because our driver differs: (1) its exploration noise is an
Ornstein-Uhlenbeck process with σ = 1e-4 (stationary σ ~2e-4 in normalised units: next to none),
which would need per-env state the driver's `explore` does not carry; Gaussian noise here, σ = 0.1
by default (σ = 0, next to the reference's, did worse on Platform), and σ = 0 in the `goal` preset
(on Goal σ 0.1 let the parameter actor drift off scoring parameters: success 0.22 at 300k env steps
against 0.64 with none). (2) ε falls over env steps, not episodes: 1,000 random Platform episodes
are ~2,200 steps (2.2 steps each), so `exploration_steps` = 2,500. (3) No Platform-specific initial
parameters (the reference's `initialise_params` biases x(s) to (3, 10, 400)): x(s) starts
mid-range. On Goal, `parameter_prior=true` adds the reference's hand-made Goal parameter policy
(`run_goal_pdqn.py`'s passthrough layer, fixed, `envs.goal.PARAMETER_PRIOR`) to x(s), and
`reward_scale` is its reward scaling; the `goal` preset (jaxrl/presets.py, `PDQN_GOAL`) holds that
script's Goal settings. (4) Flax's LeCun-normal initialiser, not Kaiming's. (5) `anneal_lr`, off by
default as in the reference, takes both learning rates linearly to 0 over the updates the budget
allows, as DQN's option does.

The driver (`jaxrl.offpolicy`) stores the env's own `(choice, parameters)` actions in its replay
buffer and draws them uniformly for its warm-up.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from agents.configs import PDQNConfig
from envs.hybrid import parameter_prior
from jaxrl import optimizers
from jaxrl.config import ConfigError
from jaxrl.continuous import (
    ActionScale,
    Torso,
    bootstrapped_return,
    critic_loss,
    inverted_gradients,
)
from jaxrl.datatypes import Agent, Array, EnvSpec, Key, Metrics, PyTree, Transition
from jaxrl.env import Env
from jaxrl.hybrid_actions import hybrid_actions, parameter_owners, parameter_scale
from jaxrl.networks import Dense
from jaxrl.offpolicy import (
    Learner,
    annealing_budget,
    epsilon,
    epsilon_greedy,
    make_off_policy,
    num_updates,
    soft_update,
)


class ParameterActor(nn.Module):
    """x(s): every choice's parameters in normalised units, a tanh over the last layer when
    `squash` (else unbounded: inverting gradients keep it in [−1, 1]). The last layer starts near
    zero (the reference's N(0, 1e-4) weights): parameters mid-range, or the `prior`'s, a fixed
    (untrained) linear map of the observation added before the bound, as nested tuples
    ((weights[P][obs]), bias[P])."""

    num_parameters: int
    hidden_sizes: Sequence[int]
    activation: str = "relu"
    squash: bool = True
    prior: tuple[tuple[tuple[float, ...], ...], tuple[float, ...]] | None = None

    @nn.compact
    def __call__(self, obs: Array) -> Array:
        obs = obs.astype(jnp.float32)
        x = Torso(self.hidden_sizes, self.activation)(obs)
        x = Dense(self.num_parameters, kernel_init=nn.initializers.normal(1e-4))(x)
        if self.prior is not None:
            weights, bias = (jnp.asarray(a, jnp.float32) for a in self.prior)
            x = x + obs @ weights.T + bias
        return jnp.tanh(x) if self.squash else x


class HybridQNetwork(nn.Module):
    """Q(s, x): one value per choice from the state and (normalised) parameters."""

    num_choices: int
    hidden_sizes: Sequence[int]
    activation: str = "relu"

    @nn.compact
    def __call__(self, obs: Array, parameters: Array) -> Array:
        x = jnp.concatenate([obs.astype(jnp.float32), parameters], axis=-1)
        return Dense(self.num_choices)(Torso(self.hidden_sizes, self.activation)(x))


def multi_pass_q(q: Callable[[Array], Array], parameters: Array, owners: Array) -> Array:
    """MP-DQN's Q: pass k sees only choice k's parameters (`owners[k]`, the others zero) and
    gives Q_k; the K passes are one vmapped call (the reference repeats the batch K times).
    `q(parameters[..., P]) -> [..., K]`; returns [..., K]."""
    passes = jax.vmap(lambda mask: q(parameters * mask), out_axes=-2)(owners)  # [..., pass, K]
    return jnp.diagonal(passes, axis1=-2, axis2=-1)


class PDQNState(NamedTuple):
    q_params: PyTree
    actor_params: PyTree
    target_q_params: PyTree
    target_actor_params: PyTree
    q_opt_state: optax.OptState
    actor_opt_state: optax.OptState


class PDQNSetup(NamedTuple):
    """What the learner's functions share, fixed when the program is traced."""

    cfg: PDQNConfig
    q_net: HybridQNetwork
    actor: ParameterActor
    q_tx: optax.GradientTransformation
    actor_tx: optax.GradientTransformation
    scale: ActionScale
    owners: np.ndarray  # float32[K, P], `parameter_owners`


def one_network_q(setup: PDQNSetup, q_params: PyTree, obs: Array, parameters: Array) -> Array:
    """[..., K]: one Q-network's value of every choice at normalised `parameters` (one pass, or
    MP-DQN's K)."""
    q = functools.partial(setup.q_net.apply, q_params, obs)
    if setup.cfg.multi_pass:
        return multi_pass_q(q, parameters, jnp.asarray(setup.owners))
    return q(parameters)


def all_q_values(setup: PDQNSetup, q_params: PyTree, obs: Array, parameters: Array) -> Array:
    """[networks, ..., K]: every Q-network's values (`twin_q`: two, their parameters stacked on
    a leading axis; else one)."""
    if setup.cfg.twin_q:
        return jax.vmap(lambda p: one_network_q(setup, p, obs, parameters))(q_params)
    return one_network_q(setup, q_params, obs, parameters)[None]


def q_values(setup: PDQNSetup, q_params: PyTree, obs: Array, parameters: Array) -> Array:
    """[..., K]: the first Q-network's values, the ones acting and the actor follow."""
    if setup.cfg.twin_q:
        q_params = jax.tree.map(lambda p: p[0], q_params)
    return one_network_q(setup, q_params, obs, parameters)


def bounded_parameters(setup: PDQNSetup, actor_params: PyTree, obs: Array) -> Array:
    """x(s) within [−1, 1]: what acting and the target use (a no-op after a tanh)."""
    return jnp.clip(setup.actor.apply(actor_params, obs), -1.0, 1.0)


def td_target(
    setup: PDQNSetup, state: PDQNState, reward: Array, terminated: Array, next_obs: Array
) -> Array:
    """r + γ·(1 − terminated)·max_k Q'(s', k, x'(s')), both networks the targets; with twin
    Q-networks the smaller of their two maxima."""
    next_parameters = bounded_parameters(setup, state.target_actor_params, next_obs)
    next_q = all_q_values(setup, state.target_q_params, next_obs, next_parameters)
    next_value = next_q.max(axis=-1).min(axis=0)
    reward = setup.cfg.reward_scale * reward
    return bootstrapped_return(reward, terminated, next_value, setup.cfg.gamma)


def q_loss(
    setup: PDQNSetup, q_params: PyTree, batch: Transition, target: Array
) -> tuple[Array, Array]:
    """Mean squared error of Q(s, k, x) at the stored choice k and normalised parameters x,
    summed over the Q-networks; the first network's Q(s, k, x) beside it."""
    choice, parameters = batch.action
    q = all_q_values(setup, q_params, batch.obs, setup.scale.from_env(parameters))
    q_taken = jnp.take_along_axis(q, choice[None, :, None], axis=-1)[..., 0]  # [networks, B]
    return critic_loss(q_taken, target), q_taken[0]


def actor_loss(setup: PDQNSetup, actor_params: PyTree, q_params: PyTree, obs: Array) -> Array:
    """−mean over the batch of Σ_k Q(s, k, x(s)): every choice's parameters climb their own
    value (gradients reach the actor only). With inverting gradients, a surrogate with that
    loss's gradient through x(s), inverted: −mean Σ_p sg(inverted ∂ΣQ/∂x_p)·x_p(s)."""
    parameters = setup.actor.apply(actor_params, obs)
    total_q = lambda x: q_values(setup, q_params, obs, x).sum(axis=-1)  # [batch]
    if not setup.cfg.inverting_gradients:
        return -total_q(parameters).mean()
    grads = jax.grad(lambda x: total_q(x).sum())(parameters)  # each sample's own ∂ΣQ/∂x
    grads = inverted_gradients(grads, parameters)
    return -jnp.sum(jax.lax.stop_gradient(grads) * parameters, axis=-1).mean()


def init(setup: PDQNSetup, obs: Array, key: Key) -> PDQNState:
    """Fresh parameters from an example (unbatched) observation; the targets start equal."""
    q_key, actor_key = jax.random.split(key)
    parameters = jnp.zeros(setup.owners.shape[1], jnp.float32)
    if setup.cfg.twin_q:
        q_keys = jax.random.split(q_key)
        q_params = jax.vmap(lambda k: setup.q_net.init(k, obs, parameters))(q_keys)
    else:
        q_params = setup.q_net.init(q_key, obs, parameters)
    actor_params = setup.actor.init(actor_key, obs)
    return PDQNState(
        q_params,
        actor_params,
        q_params,
        actor_params,
        setup.q_tx.init(q_params),
        setup.actor_tx.init(actor_params),
    )


def greedy(setup: PDQNSetup, state: PDQNState, obs: Array) -> tuple[Array, Array]:
    """argmax_k Q(s, k, x(s)) and x(s) (normalised)."""
    parameters = bounded_parameters(setup, state.actor_params, obs)
    q = q_values(setup, state.q_params, obs, parameters)
    return jnp.argmax(q, axis=-1).astype(jnp.int32), parameters


def explore(
    setup: PDQNSetup, state: PDQNState, obs: Array, key: Key, eps: Array
) -> tuple[Array, Array]:
    """An ε-greedy choice and x(s) with Gaussian noise on the chosen choice's parameters,
    clipped to the bounds: (choice, parameters in env units)."""
    choice, parameters = greedy(setup, state, obs)
    choice_key, noise_key = jax.random.split(key)
    choice = epsilon_greedy(choice, len(setup.owners), choice_key, eps)
    noise = setup.cfg.exploration_noise * jax.random.normal(noise_key, parameters.shape)
    noise = noise * jnp.asarray(setup.owners)[choice]
    return choice, setup.scale.to_env(jnp.clip(parameters + noise, -1.0, 1.0))


def act(
    setup: PDQNSetup, state: PDQNState, obs: Array, key: Key, deterministic: bool
) -> tuple[Array, Array]:
    """The env's `(choice, parameters)`: greedy and noise-free for evaluation, else the final
    exploration policy (ε = eps_end)."""
    if deterministic:
        choice, parameters = greedy(setup, state, obs)
        return choice, setup.scale.to_env(parameters)
    return explore(setup, state, obs, key, jnp.asarray(setup.cfg.eps_end))


def update(
    setup: PDQNSetup, state: PDQNState, batch: Transition, key: Key
) -> tuple[PDQNState, Metrics]:
    """One Q step, one actor step against the updated Q, then Polyak updates of both targets."""
    del key  # deterministic given the minibatch
    cfg = setup.cfg
    target = td_target(setup, state, batch.reward, batch.terminated, batch.next_obs)
    (loss, q_taken), q_grads = jax.value_and_grad(
        lambda p: q_loss(setup, p, batch, jax.lax.stop_gradient(target)), has_aux=True
    )(state.q_params)
    q_updates, q_opt_state = setup.q_tx.update(q_grads, state.q_opt_state)
    q_params = optax.apply_updates(state.q_params, q_updates)

    value, actor_grads = jax.value_and_grad(lambda p: actor_loss(setup, p, q_params, batch.obs))(
        state.actor_params
    )
    actor_updates, actor_opt_state = setup.actor_tx.update(actor_grads, state.actor_opt_state)
    actor_params = optax.apply_updates(state.actor_params, actor_updates)

    new_state = PDQNState(
        q_params,
        actor_params,
        soft_update(state.target_q_params, q_params, cfg.q_tau),
        soft_update(state.target_actor_params, actor_params, cfg.actor_tau),
        q_opt_state,
        actor_opt_state,
    )
    metrics = {"loss": loss, "q_mean": q_taken.mean(), "actor_loss": value}
    return new_state, metrics


def env_prior(spec: EnvSpec) -> tuple[tuple[tuple[float, ...], ...], tuple[float, ...]]:
    """`spec`'s hand-made parameter policy as `ParameterActor.prior`; ConfigError for an env
    without one."""
    prior = parameter_prior(spec.name)
    if prior is None:
        raise ConfigError(
            f"agent.parameter_prior=true: env '{spec.name}' has no hand-made parameter policy "
            f"(Goal-v0 has one, MP-DQN's); set agent.parameter_prior=false"
        )
    weights, bias = prior
    return tuple(map(tuple, weights.tolist())), tuple(bias.tolist())


def make_setup(cfg: PDQNConfig, spec: EnvSpec, total_env_steps: float | None = None) -> PDQNSetup:
    """The networks, optimisers and parameter layout for `spec` (Hybrid actions, else
    ConfigError); `total_env_steps`, the run's budget, is the horizon `anneal_lr` needs."""
    space = hybrid_actions(spec, cfg.name)
    horizon = None
    if cfg.anneal_lr:
        horizon = num_updates(cfg, spec.num_envs, annealing_budget(total_env_steps))

    def adam(learning_rate: float) -> optax.GradientTransformation:
        schedule = (
            learning_rate if horizon is None else optimizers.linear_to_zero(learning_rate, horizon)
        )
        return optax.chain(optimizers.clip_by_global_norm(cfg.max_grad_norm), optax.adam(schedule))

    return PDQNSetup(
        cfg,
        HybridQNetwork(space.choices.n, cfg.hidden_sizes, cfg.activation),
        ParameterActor(
            space.parameters.shape[0],
            cfg.hidden_sizes,
            cfg.activation,
            squash=not cfg.inverting_gradients,
            prior=env_prior(spec) if cfg.parameter_prior else None,
        ),
        adam(cfg.q_lr),
        adam(cfg.actor_lr),
        parameter_scale(space),
        parameter_owners(space),
    )


def make_learner(cfg: PDQNConfig, spec: EnvSpec, total_env_steps: float | None = None) -> Learner:
    """P-DQN's learner for `spec`; it acts and stores the env's `(choice, parameters)`."""
    setup = make_setup(cfg, spec, total_env_steps)
    obs0 = jnp.zeros(spec.observation_space.shape, jnp.float32)
    return Learner(
        init=functools.partial(init, setup, obs0),
        explore=lambda state, obs, key, env_steps: explore(
            setup, state, obs, key, epsilon(cfg, env_steps)
        ),
        act=functools.partial(act, setup),
        update=functools.partial(update, setup),
        params=lambda state: (state.q_params, state.actor_params),
    )


def make_pdqn(cfg: PDQNConfig, env: Env, total_env_steps: float) -> Agent:
    """P-DQN (MP-DQN with `multi_pass`) on `env`'s batch through the off-policy driver;
    `total_env_steps` is the run's budget (the annealing horizon with `anneal_lr`)."""
    return make_off_policy(cfg, env, make_learner(cfg, env.spec, total_env_steps))
