"""Option-Critic (Bacon, Harb & Precup 2017, "The Option-Critic Architecture") in two forms,
picked by `agent.network`: `linear` (the default) in the observation, which on a one-hot
observation (`FourRooms-v0`) is the paper's tabular agent, and `deep`, a network trained on
n-step rollouts of an env batch as in the authors' Arcade and A2OC code.

Linear. Every function of the observation is linear in it: the option values
Q_Ω(s, ω) = φ·W_Ω[:, ω], the option-action values Q_U(s, ω, a) = φ·W_U[:, ω, a], the Boltzmann
intra-option policies π_ω(a|s) ∝ exp(φ·W_π[:, ω, a] / temperature) and the sigmoid terminations
β_ω(s) = σ(φ·W_β[:, ω]), all weights starting at zero as in the paper. One env step is the
paper's Algorithm 1, in its order:

1. a ~ π_ω(·|s); step to s′ (the episode's true last observation where it ended).
2. Evaluation, intra-option Q-learning with the termination mixture
   U(s′, ω) = (1 − β_ω(s′)) Q_Ω(s′, ω) + β_ω(s′) max_ω̄ Q_Ω(s′, ω̄), and the one-step target
   g = r + γ U(s′, ω) (γ·U dropped only where s′ is terminal: a truncated episode bootstraps).
   Q_Ω(s, ω) and Q_U(s, ω, a) both move towards g with `critic_lr` (the authors' code learns
   Q_Ω this way rather than as Σ_a π Q_U).
3. Improvement with the updated critic: the intra-option policy gradient
   W_π[:, ω, :] += intra_lr · (Q_U(s, ω, a) − b) · φ ⊗ (e_a − π_ω(·|s)), b = Q_Ω(s, ω) with
   `baseline` (the paper's runs) else 0; and the termination gradient at s′ (not at a terminal
   s′, where there is no next option) W_β[:, ω] −= termination_lr · β(1 − β) ·
   (Q_Ω(s′, ω) − max_ω̄ Q_Ω(s′, ω̄) + ξ) · φ(s′), ξ the deliberation cost (Harb et al. 2018).
   Like the authors' code (fourrooms/transfer.py of github.com/jeanharb/option_critic), the
   policy step leaves out the 1/temperature of the softmax's gradient (with temperature 0.01 the
   step would be a hundred times larger).
4. The option ends with probability β_ω(s′); a new one is chosen at s′ by the policy over
   options: Boltzmann in Q_Ω with the same temperature (the authors' code) or ε-greedy in Q_Ω
   (the paper's text). A new episode starts with a new option too.

With `num_envs` > 1 every env of the batch takes this step at once and their updates add up.

Deep. Torsos shared by the options (MLPs, or the Nature CNN for image observations,
`agent.torso`) feed three heads: Q_Ω(s, ·) and the terminations' logits on the critic's torso,
the intra-option policies' logits (softmax at `temperature`) on the actor's; with
`shared_torso` one torso carries all three and every loss trains it (the network of A2OC,
OC_theano.py at commit 42e25ce of github.com/jeanharb/a2oc_delib). An iteration is a rollout of
`num_steps` steps of every env of the batch, then one gradient step on it (A2OC's n-step
updates, with the Arcade code's target network: neural_net.py at commit 5d6c81a of
github.com/jeanharb/option_critic):

* the critic moves Q_Ω(s_t, ω_t) towards the n-step return G_t = r_t + γ G_{t+1}, which runs
  on through option switches (the switch was the policy's) and ends at the rollout's end or the
  episode's with the bootstrap U(s′, ω) = (1 − β_ω(s′)) Q′(s′, ω) + β_ω(s′) max Q′(s′, ·), Q′ a
  target network copied every `target_update_period` updates, β the online one's; nothing
  after a terminal s′ (a truncated one bootstraps from the final observation);
* the intra-option policy gradient −log π_ω(a_t|s_t) (G_t − Q_Ω(s_t, ω_t)) (G_t alone without
  `baseline`) with an entropy bonus `ent_coef`;
* the termination gradient β_ω(s′) (Q_Ω(s′, ω) − max Q_Ω(s′, ·) + ξ) at every non-terminal
  successor s′, lowering β where the option is as good as the best one.

Each of the three head groups (critic torso and Q_Ω; actor torso and policies; terminations)
has its own Adam at `critic_lr`, `intra_lr` and `termination_lr`, with its own global-norm
clipping, the rates falling linearly to 0 over `lr_decay_steps` env steps if that is set. The
policy over options is ε-greedy in Q_Ω (or the Boltzmann one); an option's end is drawn when
the env arrives in its next state, so an option starts at the state it acts in. The training
envs' options are part of the agent's state. Without a deliberation cost the terminations
learn to end every option at every step (Q_Ω(s′, ω) ≤ max Q_Ω(s′, ·)); the deep default
ξ = 1 keeps options running (on CartPole-v1 one option ends up acting in nearly every state).

Evaluation. The deep agent is evaluated as the paper's test runs are, with its options running
(`Agent.act_with_memory`): each option runs until it ends (β drawn), the option greedy in Q_Ω
takes over, and the running option's greedy action is taken. Its `act` (what `jaxrl.load` and
videos run) and the linear agent's evaluation have no memory: at each step the option greedy in
Q_Ω(s, ·) and the action greedy in its policy, so an option's persistence shows in training only.
Per-step choices are fragile for the deep agent: a rarely used option whose Q_Ω is stale, or
whose policy has become one primitive action, takes over wherever its value is highest.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import NamedTuple

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from agents.configs import OptionCriticConfig
from jaxrl import optimizers
from jaxrl.config import ConfigError
from jaxrl.datatypes import Agent, Array, EnvSpec, Key, Metrics, PyTree
from jaxrl.env import Env, discrete_actions
from jaxrl.networks import Dense, MLPTorso, NatureCNN, resolve_torso
from jaxrl.options import NO_OPTION, option_ends, selected


class OptionCriticState(NamedTuple):
    option_values: Array  # W_Ω [features, options]
    action_values: Array  # W_U [features, options, actions]
    policy_weights: Array  # W_π [features, options, actions]
    termination_weights: Array  # W_β [features, options]
    option: Array  # int32[envs]: the option each training env executes (NO_OPTION: choose)
    option_steps: Array  # int32[envs]: steps the current option has run so far


class OptionCriticSetup(NamedTuple):
    """What the functions below share, fixed when the program is traced."""

    cfg: OptionCriticConfig
    num_features: int
    num_actions: int
    num_envs: int
    env: Env


def check_spaces(spec: EnvSpec) -> None:
    """Linear functions of a flat observation and a finite set of actions."""
    discrete_actions(spec, "option_critic", "valid: Discrete envs such as FourRooms-v0")
    obs = spec.observation_space
    if len(obs.shape) != 1:
        raise ConfigError(
            f"agent 'option_critic' is linear in a flat observation; env '{spec.name}' observes "
            f"shape {obs.shape} (valid: 1-D observations, e.g. FourRooms-v0's one-hot cell; "
            f"env.observation=grid is an image)"
        )


def option_values(state: OptionCriticState, obs: Array) -> Array:
    """Q_Ω(s, ·) for a batch of observations: [B, options]."""
    return obs @ state.option_values


def terminations(state: OptionCriticState, obs: Array) -> Array:
    """β_ω(s) for every option: [B, options]."""
    return jax.nn.sigmoid(obs @ state.termination_weights)


def policy_logits(setup: OptionCriticSetup, state: OptionCriticState, obs: Array) -> Array:
    """Every option's action logits (temperature applied): [B, options, actions]."""
    return jnp.einsum("bf,fka->bka", obs, state.policy_weights) / setup.cfg.temperature


def choose_options(setup: OptionCriticSetup | DeepSetup, values: Array, key: Key) -> Array:
    """The policy over options at a batch of states, from their Q_Ω values [B, options]."""
    cfg = setup.cfg
    if cfg.option_policy == "softmax":
        return jax.random.categorical(key, values / cfg.temperature).astype(jnp.int32)
    explore_key, random_key = jax.random.split(key)
    random = jax.random.randint(random_key, values.shape[:1], 0, cfg.num_options, jnp.int32)
    explore = jax.random.uniform(explore_key, values.shape[:1]) < cfg.epsilon
    return jnp.where(explore, random, jnp.argmax(values, axis=-1).astype(jnp.int32))


def termination_mixture(values: Array, beta: Array, option: Array) -> Array:
    """U(s′, ω) = (1 − β_ω(s′)) Q_Ω(s′, ω) + β_ω(s′) max_ω̄ Q_Ω(s′, ω̄) from every option's
    values and β [..., options]: the value of arriving in s′ with ω, which ends there with
    probability β_ω(s′)."""
    end = selected(beta, option)
    return (1.0 - end) * selected(values, option) + end * values.max(axis=-1)


def termination_advantage(values: Array, option: Array, deliberation_cost: float) -> Array:
    """Q_Ω(s′, ω) − V_Ω(s′) + ξ with V_Ω = max_ω̄ Q_Ω: the termination gradient lowers β where
    it is positive (the option is still as good as the best one, or switching costs ξ)."""
    return selected(values, option) - values.max(axis=-1) + deliberation_cost


class StepResult(NamedTuple):
    state: OptionCriticState
    env_state: PyTree
    reward: Array  # [envs]
    episode_done: Array  # bool[envs]
    episode_return: Array  # [envs], meaningful where episode_done
    episode_length: Array  # int32[envs], meaningful where episode_done
    option_used: Array  # int32[envs]: the option that chose this step's action
    action: Array  # int32[envs]
    option_ended: Array  # bool[envs]: that option ended at s′ (an episode's end included)
    option_steps: Array  # int32[envs]: how long it had run by then (meaningful where ended)
    beta: Array  # [envs]: β_ω(s′) of that option after the update


def env_step(
    setup: OptionCriticSetup, state: OptionCriticState, env_state: PyTree, key: Key
) -> StepResult:
    """One env step of every env of the batch and the learning step it gives (Algorithm 1)."""
    cfg = setup.cfg
    vector_state, ts = env_state
    choose_key, act_key, step_key, end_key, next_key = jax.random.split(key, 5)
    envs = jnp.arange(setup.num_envs)
    obs = ts.obs.astype(jnp.float32)

    values = option_values(state, obs)
    option = jnp.where(
        state.option == NO_OPTION, choose_options(setup, values, choose_key), state.option
    )
    logits = policy_logits(setup, state, obs)[envs, option]  # [B, actions]
    action = jax.random.categorical(act_key, logits).astype(jnp.int32)
    vector_state, next_ts = setup.env.step(vector_state, action, step_key)
    next_obs = next_ts.final_obs.astype(jnp.float32)  # s′ of this episode, before any reset
    continues = 1.0 - next_ts.terminated.astype(jnp.float32)

    # Evaluation: both critics towards g = r + γ U(s′, ω).
    next_values = option_values(state, next_obs)
    arrival = termination_mixture(next_values, terminations(state, next_obs), option)
    target = next_ts.reward + cfg.gamma * continues * arrival
    option_hot = jax.nn.one_hot(option, cfg.num_options)  # [B, options]
    action_hot = jax.nn.one_hot(action, setup.num_actions)  # [B, actions]
    pair_hot = option_hot[:, :, None] * action_hot[:, None, :]  # [B, options, actions]
    option_error = target - values[envs, option]
    action_error = target - jnp.einsum("bf,bka,fka->b", obs, pair_hot, state.action_values)
    state = state._replace(
        option_values=state.option_values
        + cfg.critic_lr * jnp.einsum("bf,bk->fk", obs, option_error[:, None] * option_hot),
        action_values=state.action_values
        + cfg.critic_lr * jnp.einsum("bf,bka->fka", obs, action_error[:, None, None] * pair_hot),
    )

    # Improvement with the updated critic.
    signal = jnp.einsum("bf,bka,fka->b", obs, pair_hot, state.action_values)
    if cfg.baseline:
        signal = signal - option_values(state, obs)[envs, option]
    score = option_hot[:, :, None] * (action_hot - jax.nn.softmax(logits))[:, None, :]
    policy_step = cfg.intra_lr * jnp.einsum("bf,bka->fka", obs, signal[:, None, None] * score)
    next_values = option_values(state, next_obs)  # the policy and termination steps keep W_Ω
    beta = terminations(state, next_obs)[envs, option]
    advantage = termination_advantage(next_values, option, cfg.deliberation_cost)
    descent = beta * (1.0 - beta) * advantage * continues  # no next option after a terminal s′
    termination_step = -cfg.termination_lr * jnp.einsum(
        "bf,bk->fk", next_obs, descent[:, None] * option_hot
    )
    state = state._replace(
        policy_weights=state.policy_weights + policy_step,
        termination_weights=state.termination_weights + termination_step,
    )

    # The option ends with probability β_ω(s′) under the new weights, and with the episode.
    beta = terminations(state, next_obs)[envs, option]
    episode_done = next_ts.info["episode_done"]
    ended = (jax.random.uniform(end_key, beta.shape) < beta) | episode_done
    successor = choose_options(setup, next_values, next_key)
    next_option = jnp.where(ended, successor, option)
    next_option = jnp.where(episode_done, NO_OPTION, next_option)
    steps = state.option_steps + 1
    state = state._replace(option=next_option, option_steps=jnp.where(ended, 0, steps))
    return StepResult(
        state,
        (vector_state, next_ts),
        next_ts.reward,
        episode_done,
        next_ts.info["episode_return"],
        next_ts.info["episode_length"],
        option,
        action,
        ended,
        steps,
        beta,
    )


def init(setup: OptionCriticSetup, key: Key) -> OptionCriticState:
    """All weights zero, as in the paper: uniform intra-option policies, β = 0.5 everywhere."""
    del key
    f, k, a = setup.num_features, setup.cfg.num_options, setup.num_actions
    return OptionCriticState(
        option_values=jnp.zeros((f, k), jnp.float32),
        action_values=jnp.zeros((f, k, a), jnp.float32),
        policy_weights=jnp.zeros((f, k, a), jnp.float32),
        termination_weights=jnp.zeros((f, k), jnp.float32),
        option=jnp.full((setup.num_envs,), NO_OPTION, jnp.int32),
        option_steps=jnp.zeros((setup.num_envs,), jnp.int32),
    )


def act(
    setup: OptionCriticSetup,
    state: OptionCriticState,
    obs: Array,
    key: Key,
    deterministic: bool = True,
) -> Array:
    """Actions for a batch of observations, or one: the option greedy in Q_Ω, then its greedy
    action (deterministic) or a sample of its policy."""
    single = obs.ndim == 1
    obs = jnp.atleast_2d(obs).astype(jnp.float32)
    option = jnp.argmax(option_values(state, obs), axis=-1)
    logits = policy_logits(setup, state, obs)[jnp.arange(obs.shape[0]), option]
    greedy = jnp.argmax(logits, axis=-1)
    action = (greedy if deterministic else jax.random.categorical(key, logits)).astype(jnp.int32)
    return action[0] if single else action


def steps_per_env(cfg: OptionCriticConfig, num_envs: int) -> int:
    """Env steps each env of the batch takes per iteration (at least one)."""
    return max(1, cfg.iteration_steps // num_envs)


def train_step(
    setup: OptionCriticSetup, state: OptionCriticState, env_state: PyTree, key: Key
) -> tuple[OptionCriticState, PyTree, Metrics]:
    """`iteration_steps` env steps (over the batch) of Algorithm 1, with what they say about the
    options: how often each was used, how long they ran, how likely they were to end."""
    cfg = setup.cfg
    steps = steps_per_env(cfg, setup.num_envs)

    def body(carry, step_key):
        state, env_state = carry
        out = env_step(setup, state, env_state, step_key)
        return (out.state, out.env_state), out._replace(state=None, env_state=None)

    (state, env_state), out = jax.lax.scan(body, (state, env_state), jax.random.split(key, steps))
    episodes = out.episode_done.sum()
    ended = out.option_ended.sum()
    usage = jax.nn.one_hot(out.option_used, cfg.num_options).mean(axis=(0, 1))
    metrics: Metrics = {
        "env_steps": jnp.asarray(steps * setup.num_envs, jnp.int32),
        "episodes": episodes,
        "episode_return": jnp.where(out.episode_done, out.episode_return, 0.0).sum()
        / jnp.maximum(episodes, 1),
        "episode_length": jnp.where(out.episode_done, out.episode_length, 0).sum()
        / jnp.maximum(episodes, 1),
        "option_duration": jnp.where(out.option_ended, out.option_steps, 0).sum()
        / jnp.maximum(ended, 1),
        "termination_probability": out.beta.mean(),
        **{f"option_{k}_usage": usage[k] for k in range(cfg.num_options)},
    }
    return state, env_state, metrics


def train_for_episodes(
    setup: OptionCriticSetup,
    state: OptionCriticState,
    env_state: PyTree,
    key: Key,
    num_episodes: int,
) -> tuple[OptionCriticState, PyTree, Array]:
    """Algorithm 1 on a batch of one env until it has finished `num_episodes` episodes; returns
    the length of each (int32[num_episodes]): the paper's steps-per-episode curve, which a fixed
    number of env steps per iteration cannot give. Vmap it over keys for many runs."""
    if setup.num_envs != 1:
        raise ValueError(f"train_for_episodes runs one env; the setup has {setup.num_envs}")

    def running(carry) -> Array:
        return carry[3] < num_episodes

    def body(carry):
        state, env_state, key, done, lengths = carry
        key, step_key = jax.random.split(key)
        out = env_step(setup, state, env_state, step_key)
        ended = out.episode_done[0]
        lengths = jnp.where(ended, lengths.at[done].set(out.episode_length[0]), lengths)
        return out.state, out.env_state, key, done + ended.astype(jnp.int32), lengths

    carry = (state, env_state, key, jnp.zeros((), jnp.int32), jnp.zeros(num_episodes, jnp.int32))
    state, env_state, _, _, lengths = jax.lax.while_loop(running, body, carry)
    return state, env_state, lengths


def flat_params(state: OptionCriticState) -> Array:
    weights = (
        state.option_values,
        state.action_values,
        state.policy_weights,
        state.termination_weights,
    )
    return jnp.concatenate([jnp.ravel(w) for w in weights])


# --- Deep option-critic --------------------------------------------------------------------


class OptionOutputs(NamedTuple):
    """The deep network's heads for one observation (leading axes for a batch)."""

    option_values: Array  # Q_Ω(s, ·) [..., options]
    termination_logits: Array  # β_ω(s) = σ(logit) [..., options]
    policy_logits: Array  # every option's action logits before the temperature [..., options, A]


# The deep network's parameters by top-level module, one Adam and learning rate per group (a
# shared torso takes the critic's, and every loss's gradient).
PARAMETER_GROUPS: dict[str, tuple[str, ...]] = {
    "critic": ("torso", "critic_torso", "option_values"),
    "policy": ("actor_torso", "policies"),
    "termination": ("terminations",),
}


class OptionCriticNetwork(nn.Module):
    """Torsos shared by the options: one for the critic (Q_Ω and β) and one for the
    intra-option policies, or a single one under all three heads (`shared_torso`, A2OC's
    network), which every loss then trains."""

    num_options: int
    num_actions: int
    torso: str = "mlp"  # "mlp" or "nature_cnn" (resolved by `resolve_torso`)
    hidden_sizes: Sequence[int] = (64, 64)  # MLP torso only
    activation: str = "relu"
    shared_torso: bool = False

    def _torso(self, name: str, obs: Array) -> Array:
        if self.torso == "nature_cnn":
            return NatureCNN(name=name)(obs)
        return MLPTorso(self.hidden_sizes, self.activation, name=name)(obs.astype(jnp.float32))

    @nn.compact
    def __call__(self, obs: Array) -> OptionOutputs:
        critic = self._torso("torso" if self.shared_torso else "critic_torso", obs)
        actor = critic if self.shared_torso else self._torso("actor_torso", obs)
        k, a = self.num_options, self.num_actions
        values = Dense(k, kernel_init=nn.initializers.orthogonal(1.0), name="option_values")
        small = nn.initializers.orthogonal(0.01)  # near-uniform policies, β near ½ at the start
        terminations = Dense(k, kernel_init=small, name="terminations")(critic)
        policies = Dense(k * a, kernel_init=small, name="policies")(actor)
        return OptionOutputs(
            values(critic), terminations, policies.reshape(*policies.shape[:-1], k, a)
        )


class DeepState(NamedTuple):
    params: PyTree
    target_params: PyTree  # Q′ of the bootstrap (the whole network, refreshed as a copy)
    opt_state: dict[str, optax.OptState]  # one per PARAMETER_GROUPS entry
    updates: Array  # int32: gradient steps so far
    option: Array  # int32[envs]: the option each training env executes (NO_OPTION: choose)


class DeepSetup(NamedTuple):
    """What the deep functions share, fixed when the program is traced."""

    cfg: OptionCriticConfig
    net: OptionCriticNetwork
    tx: optax.GradientTransformation  # clipping and Adam of one group, before its learning rate
    env: Env
    num_envs: int
    num_actions: int


class DeepSteps(NamedTuple):
    """A rollout, [T, envs] leaves (one step's when they are [envs])."""

    obs: Array
    option: Array  # int32: the option that chose the action
    action: Array  # int32
    reward: Array
    terminated: Array
    truncated: Array
    next_obs: Array  # the true successor: the final observation where the episode ended
    chose: Array  # bool: the option was chosen at this step (episode start or termination)
    arrived: Array  # bool: an option arrived here from the step before (not an episode's start)
    arrival_beta: Array  # β of the option that arrived, judged here (0 where none arrived)
    episode_done: Array
    episode_return: Array  # of the episode that ended at the step; used where episode_done
    episode_length: Array  # int32, likewise


def continue_or_choose(
    setup: DeepSetup | OptionCriticSetup,
    values: Array,
    termination_logits: Array,
    option: Array,
    key: Key,
) -> tuple[Array, Array, Array]:
    """At a batch of states s [B]: the option that arrived in s ends with probability β_ω(s)
    (always where none arrived, NO_OPTION), and then the policy over options picks the next.
    Returns the option to act with, whether it was chosen here, and the arriving option's β
    (0 where none arrived)."""
    end_key, choose_key = jax.random.split(key)
    chose, beta = option_ends(termination_logits, option, end_key)
    option = jnp.where(chose, choose_options(setup, values, choose_key), option)
    return option, chose, beta


def option_logits(policy_logits: Array, option: Array, temperature: float) -> Array:
    """The action logits of each entry's option, temperature applied: [..., options, A] ->
    [..., A]."""
    logits = jnp.take_along_axis(policy_logits, option[..., None, None], axis=-2)[..., 0, :]
    return logits / temperature


def deep_rollout_step(
    setup: DeepSetup, params: PyTree, carry: tuple[PyTree, Array], key: Key
) -> tuple[tuple[PyTree, Array], DeepSteps]:
    """One step of every env of the batch with the options they carry."""
    (vector_state, ts), option = carry
    option_key, act_key, step_key = jax.random.split(key, 3)
    outputs = setup.net.apply(params, ts.obs)
    arrived = option != NO_OPTION
    option, chose, beta = continue_or_choose(
        setup, outputs.option_values, outputs.termination_logits, option, option_key
    )
    logits = option_logits(outputs.policy_logits, option, setup.cfg.temperature)
    action = jax.random.categorical(act_key, logits)
    action = action.astype(jnp.int32)
    vector_state, next_ts = setup.env.step(vector_state, action, step_key)
    ended = next_ts.terminated | next_ts.truncated
    steps = DeepSteps(
        ts.obs,
        option,
        action,
        next_ts.reward,
        next_ts.terminated,
        next_ts.truncated,
        next_ts.final_obs,
        chose,
        arrived,
        beta,
        next_ts.info["episode_done"],
        next_ts.info["episode_return"],
        next_ts.info["episode_length"],
    )
    return ((vector_state, next_ts), jnp.where(ended, NO_OPTION, option)), steps


def n_step_returns(
    rewards: Array, terminated: Array, truncated: Array, bootstrap: Array, gamma: float
) -> Array:
    """G_t = r_t + γ (1 − terminated_t) X_t over time-major [T, ...] arrays, X_t = G_{t+1} while
    the episode goes on inside the rollout and `bootstrap[t]` (U(s′_t, ω_t)) where it ended or
    the rollout does: the n-step return of every step, each to its own horizon."""
    chex.assert_equal_shape([rewards, terminated, truncated, bootstrap])
    ended = terminated | truncated
    alive = 1.0 - terminated.astype(jnp.float32)

    def backward(later: Array, x: tuple[Array, ...]) -> tuple[Array, Array]:
        reward, alive, ended, bootstrap = x
        ret = reward + gamma * alive * jnp.where(ended, bootstrap, later)
        return ret, ret

    _, returns = jax.lax.scan(
        backward, bootstrap[-1], (rewards, alive, ended, bootstrap), reverse=True
    )
    return returns


def deep_targets(
    cfg: OptionCriticConfig,
    next_termination_logits: Array,
    target_next_values: Array,
    steps: DeepSteps,
) -> Array:
    """The critic's targets [T, envs]: n-step returns bootstrapped with
    U(s′, ω) = (1 − β_ω(s′)) Q′(s′, ω) + β_ω(s′) max Q′(s′, ·), Q′ the target network's values
    and β the online network's (the authors' code); no gradient flows through them."""
    beta = jax.nn.sigmoid(next_termination_logits)
    arrival = termination_mixture(target_next_values, beta, steps.option)
    returns = n_step_returns(steps.reward, steps.terminated, steps.truncated, arrival, cfg.gamma)
    return jax.lax.stop_gradient(returns)


def deep_loss(
    cfg: OptionCriticConfig,
    outputs: OptionOutputs,
    next_outputs: OptionOutputs,
    target_next_values: Array,
    steps: DeepSteps,
) -> tuple[Array, dict[str, Array]]:
    """The rollout's loss from the network's heads at s_t (`outputs`) and s′_t (`next_outputs`),
    and the target network's Q′(s′_t, ·), all [T, envs, ...]: critic + intra-option policy −
    entropy bonus + termination, means over the rollout."""
    chex.assert_equal_shape([outputs.option_values, target_next_values])
    option = steps.option
    returns = deep_targets(cfg, next_outputs.termination_logits, target_next_values, steps)
    value = selected(outputs.option_values, option)
    critic_loss = 0.5 * (returns - value) ** 2
    signal = returns - jax.lax.stop_gradient(value) if cfg.baseline else returns
    log_p = jax.nn.log_softmax(option_logits(outputs.policy_logits, option, cfg.temperature))
    policy_loss = -selected(log_p, steps.action) * signal
    entropy = -jnp.sum(jnp.exp(log_p) * log_p, axis=-1)
    next_values = jax.lax.stop_gradient(next_outputs.option_values)
    advantage = termination_advantage(next_values, option, cfg.deliberation_cost)
    next_beta = jax.nn.sigmoid(selected(next_outputs.termination_logits, option))
    continues = 1.0 - steps.terminated.astype(jnp.float32)  # no next option after a terminal s′
    termination_loss = next_beta * advantage * continues
    loss = critic_loss + policy_loss - cfg.ent_coef * entropy + termination_loss
    return loss.mean(), {
        "critic_loss": critic_loss.mean(),
        "policy_loss": policy_loss.mean(),
        "entropy": entropy.mean(),
        "termination_loss": termination_loss.mean(),
        "option_value": value.mean(),
    }


def parameter_groups(params: PyTree) -> dict[str, PyTree]:
    """The network's parameters split into PARAMETER_GROUPS."""
    modules = params["params"]
    return {
        group: {m: modules[m] for m in names if m in modules}
        for group, names in PARAMETER_GROUPS.items()
    }


def merged_groups(groups: dict[str, PyTree]) -> PyTree:
    """`parameter_groups`' inverse."""
    return {"params": {m: p for group in groups.values() for m, p in group.items()}}


def learning_rate_scale(setup: DeepSetup, updates: Array) -> Array:
    """The learning rates' factor after `updates` updates: 1, or falling linearly to 0 at
    `lr_decay_steps` env steps."""
    if setup.cfg.lr_decay_steps == 0:
        return jnp.ones((), jnp.float32)
    env_steps = updates * setup.cfg.num_steps * setup.num_envs
    return jnp.maximum(1.0 - env_steps / setup.cfg.lr_decay_steps, 0.0)


def deep_update(
    setup: DeepSetup, state: DeepState, steps: DeepSteps
) -> tuple[DeepState, dict[str, Array]]:
    """One gradient step on a rollout: each head group's clipped Adam step at its own learning
    rate; the target network copied after every `target_update_period`-th."""
    cfg, net = setup.cfg, setup.net
    target_next_values = net.apply(state.target_params, steps.next_obs).option_values

    def loss_fn(params: PyTree) -> tuple[Array, dict[str, Array]]:
        outputs, next_outputs = net.apply(params, steps.obs), net.apply(params, steps.next_obs)
        return deep_loss(cfg, outputs, next_outputs, target_next_values, steps)

    grads, metrics = jax.grad(loss_fn, has_aux=True)(state.params)
    decay = learning_rate_scale(setup, state.updates)
    rates = {
        "critic": cfg.critic_lr * decay,
        "policy": cfg.intra_lr * decay,
        "termination": cfg.termination_lr * decay,
    }
    params, grads = parameter_groups(state.params), parameter_groups(grads)
    opt_state = {}
    for group, rate in rates.items():
        step, opt_state[group] = setup.tx.update(grads[group], state.opt_state[group])
        params[group] = jax.tree.map(lambda p, u, rate=rate: p - rate * u, params[group], step)
        metrics[f"{group}_grad_norm"] = optax.tree.norm(grads[group])
    params = merged_groups(params)
    updates = state.updates + 1
    refresh = updates % cfg.target_update_period == 0
    target = jax.tree.map(lambda p, t: jnp.where(refresh, p, t), params, state.target_params)
    return state._replace(
        params=params, target_params=target, opt_state=opt_state, updates=updates
    ), metrics


def deep_train_step(
    setup: DeepSetup, state: DeepState, env_state: PyTree, key: Key
) -> tuple[DeepState, PyTree, Metrics]:
    """A rollout of `num_steps` steps of every env, one update on it, and what the rollout says
    about the options: how often each acted, env steps per option choice (the mean duration of
    the options begun), and the mean β of the options that arrived in a state."""
    cfg = setup.cfg
    step = partial(deep_rollout_step, setup, state.params)
    (env_state, option), steps = jax.lax.scan(
        step, (env_state, state.option), jax.random.split(key, cfg.num_steps)
    )
    state, metrics = deep_update(setup, state._replace(option=option), steps)
    episodes = steps.episode_done.sum()
    usage = jax.nn.one_hot(steps.option, cfg.num_options).mean(axis=(0, 1))
    arrivals = steps.arrived.sum()
    metrics = {
        **metrics,
        "env_steps": jnp.asarray(cfg.num_steps * setup.num_envs, jnp.int32),
        "episodes": episodes,
        "episode_return": jnp.where(steps.episode_done, steps.episode_return, 0.0).sum()
        / jnp.maximum(episodes, 1),
        "episode_length": jnp.where(steps.episode_done, steps.episode_length, 0).sum()
        / jnp.maximum(episodes, 1),
        "option_duration": steps.chose.size / jnp.maximum(steps.chose.sum(), 1),
        "termination_probability": steps.arrival_beta.sum() / jnp.maximum(arrivals, 1),
        **{f"option_{k}_usage": usage[k] for k in range(cfg.num_options)},
    }
    return state, env_state, metrics


def deep_init(setup: DeepSetup, key: Key) -> DeepState:
    """Fresh parameters (the target equal to them), optimiser states, no options yet."""
    space = setup.env.spec.observation_space
    params = setup.net.init(key, jnp.zeros(space.shape, space.dtype))
    groups = parameter_groups(params)
    return DeepState(
        params=params,
        target_params=params,
        opt_state={group: setup.tx.init(groups[group]) for group in PARAMETER_GROUPS},
        updates=jnp.zeros((), jnp.int32),
        option=jnp.full((setup.num_envs,), NO_OPTION, jnp.int32),
    )


def deep_act(
    setup: DeepSetup, state: DeepState, obs: Array, key: Key, deterministic: bool = True
) -> Array:
    """Actions for a batch of observations, or one: the option greedy in Q_Ω, then its greedy
    action (deterministic) or a sample of its policy."""
    single = obs.ndim == len(setup.env.spec.observation_space.shape)
    outputs = setup.net.apply(state.params, obs[None] if single else obs)
    option = jnp.argmax(outputs.option_values, axis=-1)
    logits = option_logits(outputs.policy_logits, option, setup.cfg.temperature)
    action = jnp.argmax(logits, axis=-1) if deterministic else jax.random.categorical(key, logits)
    action = action.astype(jnp.int32)
    return action[0] if single else action


def deep_evaluation_step(
    setup: DeepSetup, state: DeepState, obs: Array, option: Array, key: Key
) -> tuple[Array, Array]:
    """Evaluation with the running options, as the paper's test runs: each option runs until
    it ends (β drawn at every state it arrives in), the option greedy in Q_Ω takes over where
    one ends or none runs yet, and the running option's greedy action ([B] each)."""
    outputs = setup.net.apply(state.params, obs)
    ends, _ = option_ends(outputs.termination_logits, option, key)
    option = jnp.where(ends, jnp.argmax(outputs.option_values, axis=-1), option)
    logits = option_logits(outputs.policy_logits, option, setup.cfg.temperature)
    return jnp.argmax(logits, axis=-1).astype(jnp.int32), option.astype(jnp.int32)


def deep_flat_params(state: DeepState) -> Array:
    return jnp.concatenate([jnp.ravel(x) for x in jax.tree.leaves(state.params)])


def make_deep_option_critic(cfg: OptionCriticConfig, env: Env) -> Agent:
    """The deep agent on `env`'s batch; envs it cannot take raise ConfigError here."""
    spec = env.spec
    space = discrete_actions(spec, "option_critic", "its intra-option policies are softmaxes")
    torso = resolve_torso(cfg.torso, spec.observation_space.shape, "option_critic")
    net = OptionCriticNetwork(
        cfg.num_options, space.n, torso, cfg.hidden_sizes, cfg.activation, cfg.shared_torso
    )
    tx = optax.chain(optimizers.clip_by_global_norm(cfg.max_grad_norm), optax.scale_by_adam())
    setup = DeepSetup(cfg, net, tx, env, spec.num_envs, space.n)
    return Agent(
        init=partial(deep_init, setup),
        act=partial(deep_act, setup),
        train_step=partial(deep_train_step, setup),
        params=deep_flat_params,
        steps_per_iteration=cfg.num_steps * spec.num_envs,
        act_with_memory=partial(deep_evaluation_step, setup),
        initial_memory=lambda n: jnp.full((n,), NO_OPTION, jnp.int32),
    )


def make_option_critic(cfg: OptionCriticConfig, env: Env) -> Agent:
    """Option-Critic on `env`'s batch: the functions above bound to their setup, the linear or
    the deep ones (`agent.network`)."""
    if cfg.network == "deep":
        return make_deep_option_critic(cfg, env)
    spec = env.spec
    check_spaces(spec)
    setup = OptionCriticSetup(
        cfg,
        num_features=spec.observation_space.shape[0],
        num_actions=spec.action_space.n,
        num_envs=spec.num_envs,
        env=env,
    )
    return Agent(
        init=partial(init, setup),
        act=partial(act, setup),
        train_step=partial(train_step, setup),
        params=flat_params,
        steps_per_iteration=steps_per_env(cfg, spec.num_envs) * spec.num_envs,
    )
