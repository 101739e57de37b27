"""Option-Critic (Bacon, Harb & Precup 2017, "The Option-Critic Architecture"), linear in the
observation: on a one-hot observation (`FourRooms-v0`) it is the paper's tabular agent.

Every function of the observation is linear in it: the option values Q_Ω(s, ω) = φ·W_Ω[:, ω],
the option-action values Q_U(s, ω, a) = φ·W_U[:, ω, a], the Boltzmann intra-option policies
π_ω(a|s) ∝ exp(φ·W_π[:, ω, a] / temperature) and the sigmoid terminations
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
Evaluation acts greedily without memory: at each step the option greedy in Q_Ω(s, ·) and the
action greedy in its policy (an option's persistence shows in training only).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import ClassVar, NamedTuple

import jax
import jax.numpy as jnp

from jaxrl.config import ConfigError, require
from jaxrl.datatypes import Agent, Array, EnvSpec, Key, Metrics, PyTree
from jaxrl.env import Env, discrete_actions

OPTION_POLICIES = ("egreedy", "softmax")
NO_OPTION = -1  # an env whose episode just began: its option is chosen at its first step


@dataclass(frozen=True)
class OptionCriticConfig:
    """Defaults are those of the run behind the paper's four-rooms figure, the command in the
    authors' fourrooms/README.md: 4 options, critic lr 0.5, intra-option and termination lr 0.25,
    with baseline, γ 0.99, and transfer.py's defaults for the rest: a Boltzmann policy over
    options and temperature 0.01. The paper's text says ε-greedy (ε 0.01) and temperature 0.001:
    `agent.option_policy=egreedy agent.temperature=0.001`, which learns more slowly
    (benchmarks/results/option_critic_fourrooms.md)."""

    NUM_ENVS: ClassVar[int] = 1  # one env per seed, as in the paper
    HYPERPARAMETERS: ClassVar[tuple[str, ...]] = (
        "gamma",
        "critic_lr",
        "intra_lr",
        "termination_lr",
        "epsilon",
        "temperature",
        "deliberation_cost",
    )
    name: str = "option_critic"
    num_options: int = 4
    gamma: float = 0.99
    critic_lr: float = 0.5
    intra_lr: float = 0.25
    termination_lr: float = 0.25
    option_policy: str = "softmax"  # over options: softmax (the authors' code) or egreedy
    epsilon: float = 0.01  # egreedy's exploration
    temperature: float = 0.01  # of the Boltzmann intra-option policies and policy over options
    baseline: bool = True  # Q_U − Q_Ω instead of Q_U in the intra-option gradient
    deliberation_cost: float = 0.0  # ξ, added to the termination advantage: longer options
    iteration_steps: int = 1_000  # env steps (all envs) per train_step, i.e. per logged iteration

    def __post_init__(self) -> None:
        require(self.num_options >= 1, f"agent.num_options={self.num_options} must be >= 1")
        require(0 <= self.gamma <= 1, f"agent.gamma={self.gamma} must be in [0, 1]")
        for key in ("critic_lr", "intra_lr", "termination_lr"):
            value = getattr(self, key)
            require(value > 0, f"agent.{key}={value} must be > 0")
        require(
            self.option_policy in OPTION_POLICIES,
            f"agent.option_policy='{self.option_policy}' is not one of: "
            f"{', '.join(OPTION_POLICIES)}",
        )
        require(0 <= self.epsilon <= 1, f"agent.epsilon={self.epsilon} must be in [0, 1]")
        require(self.temperature > 0, f"agent.temperature={self.temperature} must be > 0")
        require(
            self.deliberation_cost >= 0,
            f"agent.deliberation_cost={self.deliberation_cost} must be >= 0",
        )
        require(
            self.iteration_steps >= 1,
            f"agent.iteration_steps={self.iteration_steps} must be >= 1",
        )


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


def choose_options(setup: OptionCriticSetup, values: Array, key: Key) -> Array:
    """The policy over options at a batch of states, from their Q_Ω values [B, options]."""
    cfg = setup.cfg
    if cfg.option_policy == "softmax":
        return jax.random.categorical(key, values / cfg.temperature).astype(jnp.int32)
    explore_key, random_key = jax.random.split(key)
    random = jax.random.randint(random_key, values.shape[:1], 0, cfg.num_options, jnp.int32)
    explore = jax.random.uniform(explore_key, values.shape[:1]) < cfg.epsilon
    return jnp.where(explore, random, jnp.argmax(values, axis=-1).astype(jnp.int32))


def termination_mixture(values: Array, beta: Array, option: Array) -> Array:
    """U(s′, ω) = (1 − β_ω(s′)) Q_Ω(s′, ω) + β_ω(s′) max_ω̄ Q_Ω(s′, ω̄), one per env:
    the value of arriving in s′ with ω, which ends there with probability β_ω(s′)."""
    own = jnp.take_along_axis(values, option[:, None], axis=1)[:, 0]
    end = jnp.take_along_axis(beta, option[:, None], axis=1)[:, 0]
    return (1.0 - end) * own + end * values.max(axis=-1)


def termination_advantage(values: Array, option: Array, deliberation_cost: float) -> Array:
    """Q_Ω(s′, ω) − V_Ω(s′) + ξ with V_Ω = max_ω̄ Q_Ω: the termination gradient lowers β where
    it is positive (the option is still as good as the best one, or switching costs ξ)."""
    own = jnp.take_along_axis(values, option[:, None], axis=1)[:, 0]
    return own - values.max(axis=-1) + deliberation_cost


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


def make_option_critic(cfg: OptionCriticConfig, env: Env) -> Agent:
    """Option-Critic on `env`'s batch: the functions above bound to their setup."""
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
