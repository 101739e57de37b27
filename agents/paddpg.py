"""PA-DDPG (Hausknecht & Stone 2016, "Deep Reinforcement Learning in Parameterized Action
Space"): DDPG over the continuous relaxation of a hybrid action, for `Hybrid` action spaces.

* The actor μ(s) gives K choice scores and every choice's P parameters at once, all in
  normalised units [−1, 1]: one continuous action of K + P dimensions. The env gets the choice
  with the highest score and the parameters rescaled to their Box (`relaxed_to_env`).
* The critic Q(s, μ(s)) sees the whole relaxed action: every score and every parameter.
* The actor is unsquashed and bounded by inverting gradients (the paper's contribution:
  a gradient pushing a score or parameter beyond [−1, 1] is scaled down near the bound and
  reversed past it), which `jaxrl.deterministic` implements; its learner (critic step,
  actor step, Polyak targets) is this agent's, on the relaxed Box. DDPG by default; TD3's
  changes are keys away (`agent.twin_critics=true agent.policy_delay=2
  agent.target_noise=0.2`: "PA-TD3", the baseline HyAR compares against).
* Exploration: with probability ε (linear in env steps, `eps_start` → `eps_end` over
  `exploration_steps`) a uniformly random relaxed action, else μ(s) plus Gaussian noise
  (`exploration_noise`); the relaxed action that was taken is what the buffer stores and the
  critic learns on. The first `learning_starts` steps are uniformly random relaxed actions.
  Evaluation is μ(s), noise-free.

Followed, for facts and settings (the code here is ours): github.com/cycraig/MP-DQN, commit
eec13eb, `agents/paddpg.py` (`PADDPGAgent`: the actor's two heads, the critic on state, scores
and parameters, ε-greedy with uniform scores and parameters, the stored concatenation of both,
`_optimize_td_loss`: MSE to r + γ(1 − terminal)Q'(s', μ'(s')), gradient-norm clipping at 10, the
inverted gradient of Q with respect to scores and parameters, Polyak updates of both targets after
every update) and `run_platform_paddpg.py` (Platform's settings: hidden layers 256-128, batch 32,
γ 0.9, replay 10,000, learning from 128 transitions, ε 1 → 0.01 over 1,000 episodes, τ 0.01 for
both networks, Adam 1e-3 (critic) and 1e-4 (actor)). Departures: ε falls over env steps (1,000
random Platform episodes are ~2,200 steps, so `exploration_steps` = 2,500) and ReLU instead of
leaky ReLU with flax's initialisers; the reference's Ornstein-Uhlenbeck parameter noise (σ 1e-4,
needing per-env state) is Gaussian noise here (`exploration_noise`); no Platform-specific initial
parameters (its passthrough layer's bias).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agents.configs import PADDPGConfig
from jaxrl import deterministic
from jaxrl.continuous import ActionScale
from jaxrl.datatypes import Agent, Array, Box, EnvSpec, Key
from jaxrl.deterministic import DeterministicNetworks, DeterministicState
from jaxrl.env import Env
from jaxrl.hybrid_actions import hybrid_actions, parameter_scale
from jaxrl.offpolicy import Learner, epsilon, make_off_policy


class PADDPGSetup(NamedTuple):
    """What the learner's functions share, fixed when the program is traced."""

    cfg: PADDPGConfig
    nets: DeterministicNetworks  # on the relaxed Box(−1, 1, (K + P,)): identity scaling
    num_choices: int
    scale: ActionScale  # normalised parameters ↔ the env's parameter Box


def relaxed_spec(spec: EnvSpec, agent: str) -> EnvSpec:
    """`spec` with its hybrid action relaxed to Box(−1, 1, (K + P,)): the scores, then the
    parameters, all normalised (refusing non-hybrid or unbounded spaces)."""
    space = hybrid_actions(spec, agent)
    size = space.choices.n + space.parameters.shape[0]
    bound = np.ones(size, np.float32)
    return dataclasses.replace(spec, action_space=Box(-bound, bound, (size,)))


def relaxed_to_env(setup: PADDPGSetup, relaxed: Array) -> tuple[Array, Array]:
    """The env's `(choice, parameters)`: the highest score's choice, the parameters rescaled."""
    scores, parameters = relaxed[..., : setup.num_choices], relaxed[..., setup.num_choices :]
    return jnp.argmax(scores, axis=-1).astype(jnp.int32), setup.scale.to_env(parameters)


def uniform_relaxed(setup: PADDPGSetup, key: Key, shape: tuple[int, ...]) -> Array:
    """Uniformly random relaxed actions of `shape` [..., K + P]."""
    return jax.random.uniform(key, shape, minval=-1.0, maxval=1.0)


def explore(
    setup: PADDPGSetup, state: DeterministicState, obs: Array, key: Key, eps: Array
) -> Array:
    """The relaxed action to take and store: per env, with probability ε a uniform one, else
    μ(s) with Gaussian noise, clipped to [−1, 1]."""
    noise_key, choose_key, uniform_key = jax.random.split(key, 3)
    noisy = deterministic.noisy_action(setup.cfg, setup.nets, state.actor_params, obs, noise_key)
    uniform = uniform_relaxed(setup, uniform_key, noisy.shape)
    random_rows = jax.random.uniform(choose_key, noisy.shape[:-1]) < eps
    return jnp.where(random_rows[..., None], uniform, noisy)


def act(
    setup: PADDPGSetup, state: DeterministicState, obs: Array, key: Key, evaluation: bool
) -> tuple[Array, Array]:
    """The env's `(choice, parameters)`: from μ(s) for evaluation, else the final exploration
    policy (ε = eps_end)."""
    if evaluation:
        relaxed = deterministic.policy_action(setup.nets, state.actor_params, obs)
    else:
        relaxed = explore(setup, state, obs, key, jnp.asarray(setup.cfg.eps_end))
    return relaxed_to_env(setup, relaxed)


def make_setup(
    cfg: PADDPGConfig, spec: EnvSpec, total_env_steps: float | None = None
) -> PADDPGSetup:
    space = hybrid_actions(spec, cfg.name)
    nets = deterministic.deterministic_networks(cfg, relaxed_spec(spec, cfg.name), total_env_steps)
    return PADDPGSetup(cfg, nets, space.choices.n, parameter_scale(space))


def make_learner(cfg: PADDPGConfig, spec: EnvSpec, total_env_steps: float | None = None) -> Learner:
    """PA-DDPG's learner for `spec`: it stores relaxed actions and gives the env hybrid ones;
    `total_env_steps` (the run's budget) is the annealing horizon with `anneal_lr`."""
    setup = make_setup(cfg, spec, total_env_steps)
    relaxed = relaxed_spec(spec, cfg.name).action_space
    obs0 = jnp.zeros(spec.observation_space.shape, jnp.float32)
    action0 = jnp.zeros(relaxed.shape, jnp.float32)
    return Learner(
        init=functools.partial(deterministic.init, setup.nets, obs0, action0),
        explore=lambda state, obs, key, env_steps: explore(
            setup, state, obs, key, epsilon(cfg, env_steps)
        ),
        act=functools.partial(act, setup),
        update=functools.partial(deterministic.update, cfg, setup.nets),
        params=lambda state: state.actor_params,
        env_action=functools.partial(relaxed_to_env, setup),
        random_action=lambda key, n: uniform_relaxed(setup, key, (n, *relaxed.shape)),
    )


def make_paddpg(cfg: PADDPGConfig, env: Env, total_env_steps: float) -> Agent:
    """PA-DDPG on `env`'s batch through the off-policy driver; `total_env_steps` is the run's
    budget (the annealing horizon with `anneal_lr`)."""
    return make_off_policy(cfg, env, make_learner(cfg, env.spec, total_env_steps))
