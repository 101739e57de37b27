"""Imitation learning from a jaxrl run: what BC, DAgger and AggreVaTeD (`agents/bc.py`,
`agents/dagger.py`, `agents/aggrevated.py`) share.

The expert is any finished run directory (`load_expert`): its policy, and its critic where the
method needs one, become constants of the learner's compiled program. One iteration rolls the
persistent env batch in for `rollin_steps` batched steps; at each step each env is acted on by
the expert or by the learner, as the method decides (a mixture with expert share p_n at
iteration n: DAgger's β, AggreVaTeD's α). The expert's action is computed at every visited state
(its label), and the method then updates the learner from the roll-in (`Method.update`).

The learner is a tanh-Gaussian over the normalised box [−1, 1]^|A| (as SAC's actor, log-std
clamped to [log_std_min, log_std_max]) for Box actions and a categorical for Discrete ones; it
acts with its mode in evaluation.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from jaxrl import replay
from jaxrl.agent_config import ImitationConfig, MixtureConfig
from jaxrl.config import ConfigError, require
from jaxrl.continuous import ActionScale, GaussianActor, Torso, box_actions
from jaxrl.datatypes import Agent, Array, Box, Discrete, EnvSpec, Key, Metrics, PyTree
from jaxrl.distributions import Categorical, TanhGaussian
from jaxrl.env import Env, describe_actions
from jaxrl.networks import Dense
from jaxrl.replay import ReplayState

# Expert actions on the Box's edges are pulled this far inside [−1, 1] before the tanh is
# inverted for their log-likelihood: atanh(±1) is infinite.
EDGE = 1e-3


def expert_share(cfg: MixtureConfig, iteration: Array) -> Array:
    """p_n: the probability that the expert acts at a step of iteration n (0-based)."""
    n = jnp.asarray(iteration, jnp.float32)
    if cfg.mixture_schedule == "constant":
        return jnp.asarray(cfg.mixture, jnp.float32) * jnp.ones_like(n)
    if cfg.mixture_schedule == "linear":
        return cfg.mixture * jnp.clip(1.0 - n / cfg.mixture_iterations, 0.0, 1.0)
    if cfg.mixture_schedule == "exponential":
        return cfg.mixture * jnp.asarray(cfg.mixture_decay, jnp.float32) ** n
    return cfg.mixture / (n + 1.0)


def mixture_acts(cfg: MixtureConfig, setup: Setup, state: ImitationState, key: Key) -> Array:
    """The mixture's choice (DAgger, AggreVaTeD): each env independently, the expert with
    probability p_n."""
    share = expert_share(cfg, state.iteration)
    return jax.random.uniform(key, (setup.env.spec.num_envs,)) < share


# --- The expert ---------------------------------------------------------------------------------


class Expert(NamedTuple):
    """A finished run's policy and critic as functions of batched observations (constants of
    whatever program calls them)."""

    run_dir: str
    agent: str  # its algorithm
    spec: EnvSpec
    act: Callable[[Array], Array]  # deterministic env actions
    action_value: Callable[[Array, Array], Array] | None  # Q*(s, a) for env actions
    state_value: Callable[[Array], Array] | None  # V*(s)
    gamma: float  # the discount its critic was trained with
    eval_return: float  # its run's final evaluation (mean over its evaluation episodes)


def load_expert(cfg: ImitationConfig, spec: EnvSpec) -> Expert:
    """The expert that `cfg` names, checked against the learner's env `spec`: any problem is one
    ConfigError line naming `agent.expert`, raised before anything compiles."""
    if not cfg.expert:
        raise ConfigError(
            f"agent '{cfg.name}' needs agent.expert=<run directory>: a finished jaxrl run whose "
            f"policy it imitates (e.g. one of `python -m jaxrl.run agent=sac env={spec.name}`)"
        )
    expert = _load_expert(
        str(Path(cfg.expert).expanduser().absolute()), cfg.expert_seed, cfg.expert_grid_point
    )
    if expert.spec.name != spec.name:
        raise ConfigError(
            f"agent.expert={cfg.expert} was trained on env '{expert.spec.name}'; this run's env "
            f"is '{spec.name}' (the expert must act in the learner's env)"
        )
    from jaxrl.policy import check_same_spaces

    check_same_spaces(f"agent.expert={cfg.expert}", expert.spec, spec)
    return expert


@functools.lru_cache(maxsize=8)
def _load_expert(run_dir: str, seed: int | None, grid_point: int | None) -> Expert:
    """Read once per process: the learner's agent is built several times per run (its grid
    points, the traced program), each reading the same expert."""
    from jaxrl.policy import load_named_run

    policy, config = load_named_run(run_dir, "agent.expert", seed, grid_point)
    agent, state = policy.agent, policy.agent_state
    return Expert(
        run_dir=run_dir,
        agent=config["agent"]["name"],
        spec=policy.spec,
        act=lambda obs: agent.act(state, obs, jax.random.key(0), True),
        action_value=None
        if agent.action_value is None
        else functools.partial(agent.action_value, state),
        state_value=None
        if agent.state_value is None
        else functools.partial(agent.state_value, state),
        gamma=float(config["agent"].get("gamma", 0.99)),
        eval_return=_final_eval_return(Path(run_dir), policy.seed, grid_point),
    )


def _final_eval_return(run_dir: Path, seed: int, grid_point: int | None) -> float:
    """The expert run's last evaluation of that seed (NaN where its summary has none)."""
    try:
        rows = json.loads((run_dir / "summary.json").read_text())["runs"]
    except (OSError, ValueError, KeyError):
        return math.nan
    # A grid run's rows carry their point; a null expert_grid_point means its first (as load).
    point = grid_point if grid_point is not None or "grid_point" not in rows[0] else 0
    for row in rows:
        if row.get("seed") == seed and row.get("grid_point") == point:
            value = row.get("final_eval_return")
            return math.nan if value is None else float(value)
    return math.nan


# --- The learner's policy -----------------------------------------------------------------------


class CategoricalActor(nn.Module):
    """Logits over the discrete actions."""

    num_actions: int
    hidden_sizes: tuple[int, ...]
    activation: str

    @nn.compact
    def __call__(self, obs: Array) -> Array:
        x = Torso(self.hidden_sizes, self.activation)(obs.astype(jnp.float32))
        return Dense(self.num_actions)(x)


class LearnerPolicy(NamedTuple):
    """π(·|s) of the learner, and the maps between its raw samples and env actions."""

    actor: nn.Module
    scale: ActionScale | None  # None: discrete actions

    def dist(self, params: PyTree, obs: Array) -> TanhGaussian | Categorical:
        """π(·|s) over raw actions (pre-tanh values in normalised units, or action indices)."""
        if self.scale is None:
            return Categorical(self.actor.apply(params, obs))
        mean, log_std = self.actor.apply(params, obs)
        unit = jnp.ones(mean.shape[-1], jnp.float32)
        return TanhGaussian(mean, log_std, -unit, unit)

    def env_action(self, dist: TanhGaussian | Categorical, raw: Array) -> Array:
        if self.scale is None:
            return raw
        return self.scale.to_env(dist.env_action(raw))

    def raw_action(self, action: Array) -> Array:
        """The raw action whose env action is `action` (edges pulled in by EDGE)."""
        if self.scale is None:
            return action.astype(jnp.int32)
        unit = jnp.clip(self.scale.from_env(action), -1.0 + EDGE, 1.0 - EDGE)
        return jnp.arctanh(unit)

    def act(self, params: PyTree, obs: Array, key: Key, deterministic: bool) -> Array:
        dist = self.dist(params, obs)
        return self.env_action(dist, dist.mode() if deterministic else dist.sample(key))

    def mean_action(self, params: PyTree, obs: Array) -> Array:
        """The deterministic action in normalised units (Box only)."""
        return jnp.tanh(self.dist(params, obs).mean)


def learner_policy(cfg: ImitationConfig, spec: EnvSpec) -> LearnerPolicy:
    """A tanh-Gaussian for a bounded flat Box, a categorical for Discrete; else ConfigError."""
    space = spec.action_space
    if isinstance(space, Discrete):
        return LearnerPolicy(CategoricalActor(space.n, cfg.hidden_sizes, cfg.activation), None)
    scale = box_actions(spec, cfg.name)
    actor = GaussianActor(
        space.shape[0], cfg.hidden_sizes, cfg.activation, cfg.log_std_min, cfg.log_std_max
    )
    return LearnerPolicy(actor, scale)


def kl_divergence(old: TanhGaussian | Categorical, new: TanhGaussian | Categorical) -> Array:
    """KL(old ‖ new) per state. The tanh is a bijection, so two tanh-Gaussians are as far apart
    as their base Gaussians."""
    if isinstance(old, Categorical):
        log_old, log_new = jax.nn.log_softmax(old.logits), jax.nn.log_softmax(new.logits)
        return jnp.sum(jnp.exp(log_old) * (log_old - log_new), axis=-1)
    var_old, var_new = jnp.exp(2 * old.log_std), jnp.exp(2 * new.log_std)
    per_dim = (
        new.log_std - old.log_std + (var_old + (old.mean - new.mean) ** 2) / (2 * var_new) - 0.5
    )
    return per_dim.sum(axis=-1)


# --- The driver ----------------------------------------------------------------------------------


class Rollin(NamedTuple):
    """[T, envs] arrays of one iteration's roll-in."""

    obs: Array
    action: Array  # the executed env action
    expert_action: Array  # the expert's label of obs
    expert_acted: Array  # bool
    reward: Array
    terminated: Array
    next_obs: Array  # the true successor (final_obs where an episode ended)


class ImitationState(NamedTuple):
    params: PyTree
    opt_state: optax.OptState
    dataset: ReplayState | tuple[()]  # what the method aggregates (labels, states); () without
    iteration: Array  # int32: iterations done
    env_episodes: Array  # int32[num_envs]: episodes each env of the batch has ended
    labelled_steps: Array  # int32: states the expert has labelled or scored so far


class Labels(NamedTuple):
    obs: Array
    expert_action: Array


class Setup(NamedTuple):
    """What the method-independent functions share, fixed when the program is traced."""

    cfg: ImitationConfig
    env: Env
    expert: Expert
    policy: LearnerPolicy
    tx: optax.GradientTransformation


class Method(NamedTuple):
    """What makes BC, DAgger and AggreVaTeD themselves."""

    # (setup, state, key) -> bool[num_envs]: which envs the expert acts in at a roll-in step
    expert_acts: Callable[[Setup, ImitationState, Key], Array]
    # (setup, state after the roll-in, roll-in, key) -> (state, metrics)
    update: Callable[[Setup, ImitationState, Rollin, Key], tuple[ImitationState, Metrics]]
    # (setup) -> the empty dataset, or () for a method that keeps none
    dataset: Callable[[Setup], ReplayState | tuple[()]]


def optimizer(cfg: ImitationConfig) -> optax.GradientTransformation:
    return optax.chain(optax.clip_by_global_norm(cfg.max_grad_norm), optax.adam(cfg.learning_rate))


def empty_labels(setup: Setup, capacity: int) -> ReplayState:
    spec = setup.env.spec
    obs = jnp.zeros(spec.observation_space.shape, spec.observation_space.dtype)
    action = jnp.zeros(spec.action_space.shape, spec.action_space.dtype)
    return replay.init(Labels(obs, action), capacity)


def rollin(
    setup: Setup, method: Method, state: ImitationState, env_state: PyTree, key: Key
) -> tuple[ImitationState, PyTree, Rollin, Array, Array]:
    """`rollin_steps` batched steps of the mixture; (state with episode counts, env state,
    roll-in, episodes ended, sum of their returns)."""
    env, policy, cfg = setup.env, setup.policy, setup.cfg

    def step(carry: tuple[ImitationState, PyTree], k: Key):
        state, (vector_state, ts) = carry
        mix_key, learner_key, step_key = jax.random.split(k, 3)
        expert_action = setup.expert.act(ts.obs)
        learner_action = policy.act(state.params, ts.obs, learner_key, not cfg.learner_samples)
        by_expert = method.expert_acts(setup, state, mix_key)
        pick = by_expert.reshape(by_expert.shape + (1,) * (expert_action.ndim - 1))
        action = jnp.where(pick, expert_action, learner_action.astype(expert_action.dtype))
        vector_state, next_ts = env.step(vector_state, action, step_key)
        done = next_ts.info["episode_done"]
        state = state._replace(env_episodes=state.env_episodes + done.astype(jnp.int32))
        record = Rollin(
            ts.obs,
            action,
            expert_action,
            by_expert,
            next_ts.reward,
            next_ts.terminated,
            next_ts.final_obs,
        )
        returns = jnp.where(done, next_ts.info["episode_return"], 0.0).sum()
        return (state, (vector_state, next_ts)), (record, done.sum(), returns)

    keys = jax.random.split(key, cfg.rollin_steps)
    (state, env_state), (record, ends, returns) = jax.lax.scan(step, (state, env_state), keys)
    return state, env_state, record, ends.sum(), returns.sum()


def train_step(
    setup: Setup, method: Method, state: ImitationState, env_state: PyTree, key: Key
) -> tuple[ImitationState, PyTree, Metrics]:
    """One iteration: the roll-in, then the method's update."""
    rollin_key, update_key = jax.random.split(key)
    state, env_state, record, episodes, returns = rollin(
        setup, method, state, env_state, rollin_key
    )
    state, metrics = method.update(setup, state, record, update_key)
    state = state._replace(iteration=state.iteration + 1)
    env_steps = setup.cfg.rollin_steps * setup.env.spec.num_envs
    metrics = {
        **metrics,
        "env_steps": jnp.asarray(env_steps, jnp.int32),
        "episodes": episodes,
        "episode_return": returns / jnp.maximum(episodes, 1),  # of the mixture's roll-in
        "expert_share": record.expert_acted.mean(),
        "labelled_steps": state.labelled_steps,
    }
    if math.isfinite(setup.expert.eval_return):
        metrics["expert_return"] = jnp.asarray(setup.expert.eval_return, jnp.float32)
    return state, env_state, metrics


def minibatch_updates(
    setup: Setup,
    state: ImitationState,
    loss_fn: Callable[[PyTree, Key], tuple[Array, Metrics]],
    key: Key,
) -> tuple[ImitationState, Metrics]:
    """`gradient_steps` clipped Adam steps on `loss_fn(params, key)` (the key draws the
    minibatch); mean metrics."""

    def one(carry: tuple[PyTree, optax.OptState], k: Key):
        params, opt_state = carry
        (loss, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, k)
        updates, opt_state = setup.tx.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), {"loss": loss, **metrics}

    keys = jax.random.split(key, setup.cfg.gradient_steps)
    (params, opt_state), metrics = jax.lax.scan(one, (state.params, state.opt_state), keys)
    return state._replace(params=params, opt_state=opt_state), jax.tree.map(jnp.mean, metrics)


def supervised_loss(setup: Setup, loss: str, params: PyTree, labels: Labels) -> Array:
    """The BC/DAgger loss of a minibatch: −log π(a*|s) ("nll"; cross-entropy for Discrete) or
    the squared error of the deterministic action in normalised units ("mse", Box)."""
    policy = setup.policy
    if loss == "mse":
        target = jnp.clip(policy.scale.from_env(labels.expert_action), -1.0, 1.0)
        error = policy.mean_action(params, labels.obs) - target
        return jnp.mean(jnp.sum(error**2, axis=-1))
    dist = policy.dist(params, labels.obs)
    return -jnp.mean(dist.log_prob(policy.raw_action(labels.expert_action)))


def aggregate_and_fit(
    setup: Setup, loss: str, state: ImitationState, record: Rollin, keep: Array, key: Key
) -> tuple[ImitationState, Metrics]:
    """Add the kept steps' (obs, expert action) to the dataset, then fit it by `loss`: the
    update of BC and DAgger."""
    flat = lambda x: x.reshape(-1, *x.shape[2:])
    labels = Labels(flat(record.obs), flat(record.expert_action))
    dataset = replay.add(state.dataset, labels, flat(keep))
    state = state._replace(
        dataset=dataset, labelled_steps=state.labelled_steps + keep.sum().astype(jnp.int32)
    )

    def loss_fn(params: PyTree, k: Key) -> tuple[Array, Metrics]:
        batch = replay.sample(dataset, k, setup.cfg.batch_size)
        return supervised_loss(setup, loss, params, batch), {}

    def fit(s: ImitationState) -> tuple[ImitationState, Metrics]:
        return minibatch_updates(setup, s, loss_fn, key)

    def skip(s: ImitationState) -> tuple[ImitationState, Metrics]:  # nothing labelled yet
        return s, {"loss": jnp.zeros((), jnp.float32)}

    state, metrics = jax.lax.cond(dataset.size > 0, fit, skip, state)
    return state, {**metrics, "dataset_size": dataset.size}


def init(setup: Setup, method: Method, key: Key) -> ImitationState:
    spec = setup.env.spec
    obs = jnp.zeros(spec.observation_space.shape, jnp.float32)
    params = setup.policy.actor.init(key, obs)
    zero = jnp.zeros((), jnp.int32)
    return ImitationState(
        params,
        setup.tx.init(params),
        method.dataset(setup),
        zero,
        jnp.zeros((spec.num_envs,), jnp.int32),
        zero,
    )


def make_imitation(cfg: ImitationConfig, env: Env, method: Method, expert: Expert) -> Agent:
    """An `Agent` that rolls the env batch in with `method`'s mixture and updates the learner
    by `method`; the expert was loaded (and checked) by the caller."""
    setup = Setup(cfg, env, expert, learner_policy(cfg, env.spec), optimizer(cfg))
    policy = setup.policy
    return Agent(
        init=functools.partial(init, setup, method),
        act=lambda state, obs, key, deterministic: policy.act(
            state.params, obs, key, deterministic
        ),
        train_step=functools.partial(train_step, setup, method),
        params=lambda state: jnp.concatenate([jnp.ravel(x) for x in jax.tree.leaves(state.params)]),
        steps_per_iteration=cfg.rollin_steps * env.spec.num_envs,
    )


def check_box_loss(loss: str, spec: EnvSpec, agent: str) -> None:
    """ "mse" needs Box actions; the loss must be one of the two."""
    require(loss in ("nll", "mse"), f"agent.loss={loss!r} is not one of nll, mse")
    space = spec.action_space
    if loss == "mse" and not isinstance(space, Box):
        hint = " (use loss=nll: cross-entropy)" if isinstance(space, Discrete) else ""
        raise ConfigError(
            f"agent '{agent}': loss=mse regresses continuous actions; env '{spec.name}' has "
            f"{describe_actions(space)}{hint}"
        )
