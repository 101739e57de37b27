"""The off-policy machinery DQN, DDPG, TD3 and SAC share; they differ only in their `Learner`.

One iteration (`train_step`) is `iteration_steps` env steps of the persistent env batch, in cycles
of `train_freq` batched steps followed by `gradient_steps` updates on minibatches drawn from the
replay buffer. Every step stores `Transition(obs, action, reward, terminated, truncated,
next_obs=final_obs)`: the true successor, so a truncated step bootstraps from the last observation
of its episode and a terminated one does not bootstrap at all (the learner's target uses
`terminated` only). Until `learning_starts` env steps have been taken, actions are uniformly random
and no update runs.

ERL reuses the pieces: its population's rollouts and its learner's share one buffer
(`jaxrl.replay`), and its learner is a `Learner` of this module.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxrl import frame_replay, prioritized, replay
from jaxrl.agent_config import EpsilonGreedyConfig, OffPolicyConfig
from jaxrl.config import ConfigError, require
from jaxrl.datatypes import Action, Agent, Array, EnvSpec, Key, Metrics, PyTree, Transition
from jaxrl.env import Env, random_actions
from jaxrl.frame_replay import FrameReplayState
from jaxrl.parallel import cond_over_runs, every_run
from jaxrl.prioritized import Prioritization, PrioritizedBuffer
from jaxrl.replay import ReplayState

# As the layout stores transitions (BufferLayout), with priorities around it when prioritised.
Buffer = ReplayState | FrameReplayState | PrioritizedBuffer
# (state, minibatch, importance weights, key) -> (state, metrics, TD errors per transition)
WeightedUpdate = Callable[[PyTree, Transition, Array, Key], tuple[PyTree, Metrics, Array]]


def epsilon(cfg: EpsilonGreedyConfig, env_steps: Array) -> Array:
    """ε after `env_steps` env steps: linear from eps_start to eps_end, then constant."""
    progress = jnp.minimum(env_steps / max(cfg.exploration_steps, 1), 1.0)
    return cfg.eps_start + (cfg.eps_end - cfg.eps_start) * progress


def epsilon_greedy(greedy: Array, num_choices: int, key: Key, eps: Array) -> Array:
    """`greedy` (int32 choices), each replaced by a uniform choice with probability ε."""
    explore_key, choice_key = jax.random.split(key)
    uniform = jax.random.randint(choice_key, greedy.shape, 0, num_choices, jnp.int32)
    return jnp.where(jax.random.uniform(explore_key, greedy.shape) < eps, uniform, greedy)


class Learner(NamedTuple):
    """What makes an off-policy agent itself: its networks, exploration and update.

    The buffer keeps the learner's own actions: the env's, unless the learner acts in another
    space and says how its actions become the env's (`env_action`: PA-DDPG's continuous choice
    scores, HyAR's latent actions) and how to draw them at random for the warm-up
    (`random_action`)."""

    init: Callable[[Key], PyTree]
    # (state, batched obs, key, env steps so far) -> stored actions with exploration (ε-greedy,
    # noise)
    explore: Callable[[PyTree, Array, Key, Array], PyTree]
    # (state, obs or batched obs, key, deterministic) -> env actions; deterministic for evaluation
    act: Callable[[PyTree, Array, Key, bool], Action]
    # (state, minibatch of transitions, key) -> (state, scalar metrics)
    update: Callable[[PyTree, Transition, Key], tuple[PyTree, Metrics]]
    params: Callable[[PyTree], PyTree]  # the policy's parameters (NaN checks, export)
    # (state, batched obs, batched env actions) -> Q(s, a), min over twin critics (`Agent`'s)
    action_value: Callable[[PyTree, Array, Array], Array] | None = None
    # A batch of stored actions as the env's actions; None: the learner stores env actions.
    env_action: Callable[[PyTree], Action] | None = None
    # (key, batch size) -> uniformly random stored actions for the warm-up; None: the env's
    # uniformly random actions (`jaxrl.env.random_actions`).
    random_action: Callable[[Key, int], PyTree] | None = None
    # The update under prioritised replay (`jaxrl.prioritized`); None: the learner has none.
    weighted_update: WeightedUpdate | None = None
    # (state, the batch's transitions just stored) -> state: for a learner whose schedules
    # count what it collects (HyAR's, in episodes); None: collecting leaves the state alone.
    observe: Callable[[PyTree, Transition], PyTree] | None = None


def random_stored_actions(learner: Learner, env: Env, key: Key) -> PyTree:
    """Uniformly random stored actions for `env`'s whole batch (the warm-up's)."""
    if learner.random_action is None:
        return random_actions(env.spec, key)
    return learner.random_action(key, env.spec.num_envs)


class OffPolicyState(NamedTuple):
    learner: PyTree
    buffer: Buffer
    env_steps: Array  # int32: env steps taken so far (all envs)


class BufferLayout(NamedTuple):
    """How transitions sit in the replay buffer: the buffer a learner starts with (from one
    example item, the capacity and the env batch), adding one step of the batch, drawing rows
    (key, batch size, newest rows left out) and reading whole transitions at rows. A step of the
    batch fills consecutive rows (modulo `capacity`), env by env, so an env's next transition
    sits `num_envs` rows after its last. Buffers have a `size` (transitions held)."""

    init: Callable[[Transition, int, int], PyTree]
    add: Callable[[PyTree, Transition], PyTree]
    sample_rows: Callable[[PyTree, Key, int, int], Array]
    gather: Callable[[PyTree, Array], Transition]
    capacity: Callable[[PyTree], int]
    eligible_rows: Callable[[PyTree, int], Array]  # bool per row: may be drawn (prioritised)


FULL_LAYOUT = BufferLayout(
    init=lambda example, capacity, num_envs: replay.init(example, capacity),
    add=replay.add,
    sample_rows=replay.sample_rows,
    gather=replay.gather,
    capacity=replay.capacity,
    eligible_rows=replay.eligible_rows,
)


def newest_frame_only(t: Transition) -> Transition:
    return t._replace(next_obs=t.next_obs[..., -1:])


def shift_in_newest_frame(t: Transition) -> Transition:
    """A transition of `newest_frame_only` with its next_obs stack rebuilt."""
    return t._replace(next_obs=jnp.concatenate([t.obs[..., 1:], t.next_obs], axis=-1))


# Frame-stacked images [..., H, W, k] (oldest frame first): next_obs is stored as its newest
# frame only and rebuilt as obs's last k − 1 frames followed by it, so a transition holds k + 1
# frames instead of 2k (5/8 of the memory at k = 4). It is exact for every stored step,
# truncated and terminated ones included: next_obs (final_obs where the episode ended) belongs to
# obs's episode, so its stack is obs's shifted by one frame; the next episode's reset frames are
# never needed. The env must stack that way (the Atari and pixel/ pools do;
# tests/agents/test_dqn.py checks both).
NEWEST_FRAME_LAYOUT = BufferLayout(
    init=lambda example, capacity, num_envs: replay.init(newest_frame_only(example), capacity),
    add=lambda buffer, t: replay.add(buffer, newest_frame_only(t)),
    sample_rows=replay.sample_rows,
    gather=lambda buffer, rows: shift_in_newest_frame(replay.gather(buffer, rows)),
    capacity=replay.capacity,
    eligible_rows=replay.eligible_rows,
)

# Each frame stored once, stacks rebuilt when sampling (jaxrl/frame_replay.py): about one frame
# per transition, exact at every episode end under the same condition as NEWEST_FRAME_LAYOUT.
FRAMES_ONCE_LAYOUT = BufferLayout(
    init=frame_replay.init,
    add=frame_replay.add,
    sample_rows=frame_replay.sample_rows,
    gather=frame_replay.gather,
    capacity=frame_replay.capacity,
    eligible_rows=frame_replay.eligible_rows,
)


def soft_update(target: PyTree, online: PyTree, tau: float) -> PyTree:
    """Polyak averaging: target ← τ·online + (1 − τ)·target (τ = 1 copies)."""
    return optax.incremental_update(online, target, tau)


def example_transition(env: Env, learner: Learner | None = None) -> Transition:
    """One zero transition shaped like those `learner` stores from `env` (the env's actions when
    no learner is given), for `replay.init`."""
    spec = env.spec
    obs = jnp.zeros(spec.observation_space.shape, spec.observation_space.dtype)
    draw = (
        functools.partial(random_actions, spec)
        if learner is None
        else functools.partial(random_stored_actions, learner, env)
    )
    batch = jax.eval_shape(draw, jax.random.key(0))
    action = jax.tree.map(lambda x: jnp.zeros(x.shape[1:], x.dtype), batch)
    flag = jnp.zeros((), bool)
    return Transition(obs, action, jnp.zeros((), jnp.float32), flag, flag, obs)


def env_step_transitions(
    env: Env,
    env_state: PyTree,
    policy: Callable[[Array, Key], PyTree],
    key: Key,
    env_action: Callable[[PyTree], Action] | None = None,
) -> tuple[PyTree, Transition, dict[str, Array]]:
    """One batched step of `env` under `policy`: the new (env state, TimeStep), the transitions
    to store (the policy's actions; successor = `final_obs`) and the step's episode statistics.
    `env_action` maps the policy's actions to the env's where they differ."""
    vector_state, ts = env_state
    act_key, step_key = jax.random.split(key)
    action = policy(ts.obs, act_key)
    env_actions = action if env_action is None else env_action(action)
    vector_state, next_ts = env.step(vector_state, env_actions, step_key)
    transition = Transition(
        ts.obs, action, next_ts.reward, next_ts.terminated, next_ts.truncated, next_ts.final_obs
    )
    return (vector_state, next_ts), transition, next_ts.info


class OffPolicySetup(NamedTuple):
    """What the driver's functions share, fixed when the program is traced; `make_off_policy`
    builds it and the functions below take it as their first argument."""

    cfg: OffPolicyConfig
    env: Env
    learner: Learner
    layout: BufferLayout
    rounds: int  # rounds of (train_freq batched steps, gradient_steps updates) per iteration
    learn_after: int  # env steps (and buffered transitions) before the first update
    n_step: int  # steps summed in a sampled return (1: one-step transitions)
    prioritization: Prioritization | None  # None: uniform sampling
    # 0: minibatches come from every transition held. N: from the newest N collected after the
    # warm-up, the learner's own (HyAR's reference keeps TD3's buffer apart from the warm-up's
    # and the VAE's), learning once a minibatch of them is held.
    own_steps_window: int = 0
    # True: one more round of updates after every round in which one of the run's episodes
    # ended, HyAR's reference loop (an update as each episode starts, besides one per step).
    update_at_episode_start: bool = False


def exploring_policy(
    setup: OffPolicySetup, learner_state: PyTree, env_steps: Array
) -> Callable[[Array, Key], PyTree]:
    """The collecting policy: the learner's exploration, uniform actions before learning_starts
    (stored actions, which `Learner.env_action` turns into the env's)."""

    def act(obs: Array, key: Key) -> PyTree:
        explore_key, random_key = jax.random.split(key)
        explored = setup.learner.explore(learner_state, obs, explore_key, env_steps)
        uniform = random_stored_actions(setup.learner, setup.env, random_key)
        warming_up = env_steps < setup.cfg.learning_starts
        return jax.tree.map(
            lambda u, e: jnp.where(warming_up, u.astype(e.dtype), e), uniform, explored
        )

    return act


def collect(
    setup: OffPolicySetup, carry: tuple[OffPolicyState, PyTree], key: Key
) -> tuple[tuple[OffPolicyState, PyTree], tuple[Array, Array]]:
    """One batched env step into the buffer; (episodes ended, sum of their returns)."""
    state, env_state = carry
    policy = exploring_policy(setup, state.learner, state.env_steps)
    env_state, transition, info = env_step_transitions(
        setup.env, env_state, policy, key, setup.learner.env_action
    )
    num_envs = setup.env.spec.num_envs
    if setup.prioritization is None:
        buffer = setup.layout.add(state.buffer, transition)
    else:
        buffer = state.buffer._replace(items=setup.layout.add(state.buffer.items, transition))
        buffer = prioritized.add_priorities(buffer, num_envs)
    learner_state = state.learner
    if setup.learner.observe is not None:
        learner_state = setup.learner.observe(learner_state, transition)
    state = OffPolicyState(learner_state, buffer, state.env_steps + num_envs)
    done = info["episode_done"]
    return (state, env_state), (done.sum(), jnp.where(done, info["episode_return"], 0).sum())


def n_step_transitions(steps: Transition, gamma: float) -> Transition:
    """Transitions of n-step returns from n consecutive transitions of each env (leading axis n):
    R = Σ_m γ^m r_m up to and including the first step that ended its episode (or the n-th), whose
    flags and next_obs the result takes, with `discount` γ^(steps summed) for its bootstrap."""
    n = steps.reward.shape[0]
    ended = steps.terminated | steps.truncated
    counted = (jnp.cumsum(ended, axis=0) - ended) == 0  # no end before step m
    last = jnp.where(ended.any(axis=0), jnp.argmax(ended, axis=0), n - 1)
    powers = gamma ** jnp.arange(n, dtype=jnp.float32)
    powers = powers.reshape(n, *(1,) * (steps.reward.ndim - 1))
    reward = (powers * steps.reward * counted).sum(axis=0)

    def at_last(x: Array) -> Array:
        index = last.reshape(1, *last.shape, *(1,) * (x.ndim - last.ndim - 1))
        return jnp.take_along_axis(x, index, axis=0)[0]

    return Transition(
        steps.obs[0],
        jax.tree.map(lambda a: a[0], steps.action),
        reward,
        at_last(steps.terminated),
        at_last(steps.truncated),
        at_last(steps.next_obs),
        (gamma ** (last + 1).astype(jnp.float32)),
    )


def newest_excluded(setup: OffPolicySetup) -> int:
    """Stored transitions that cannot start a sampled return: the newest n − 1 steps of the batch,
    whose successors are not written yet."""
    return (setup.n_step - 1) * setup.env.spec.num_envs


def minibatch_at(setup: OffPolicySetup, buffer: Buffer, rows: Array) -> Transition:
    """The transitions at `rows`, as `n_step` returns when it is above 1 (an env's next
    transition is `num_envs` rows on)."""
    layout, n = setup.layout, setup.n_step
    if n == 1:
        return layout.gather(buffer, rows)
    num_envs = setup.env.spec.num_envs
    following = jnp.mod(
        rows[None] + num_envs * jnp.arange(n, dtype=rows.dtype)[:, None], layout.capacity(buffer)
    )
    return n_step_transitions(layout.gather(buffer, following), setup.cfg.gamma)


def warm_up_steps(cfg: OffPolicyConfig, num_envs: int) -> int:
    """Env steps (all envs) taken at random: batched steps until `learning_starts`."""
    return -(-cfg.learning_starts // num_envs) * num_envs


def sample_batch(
    setup: OffPolicySetup, buffer: Buffer, key: Key, env_steps: Array | None = None
) -> Transition:
    """A minibatch of uniformly drawn transitions (of n-step returns: `minibatch_at`); with
    `own_steps_window`, from the newest of those collected after the warm-up (`env_steps` says
    how many were)."""
    batch_size, window = setup.cfg.batch_size, setup.own_steps_window
    if window == 0:
        rows = setup.layout.sample_rows(buffer, key, batch_size, newest_excluded(setup))
    else:
        own = env_steps - warm_up_steps(setup.cfg, setup.env.spec.num_envs)
        rows = replay.sample_newest_rows(buffer, key, batch_size, jnp.minimum(own, window))
    return minibatch_at(setup, buffer, rows)


Priorities = tuple[ReplayState, Array]  # a PrioritizedBuffer's priorities and max_priority


def learn(
    setup: OffPolicySetup, learner_state: PyTree, buffer: Buffer, env_steps: Array, key: Key
) -> tuple[PyTree, Priorities | None, Metrics]:
    """`gradient_steps` learner updates on minibatches sampled from the buffer: the learner's
    state, the buffer's new priorities (None without prioritised replay) and mean metrics."""
    cfg, learner, p = setup.cfg, setup.learner, setup.prioritization
    keys = jax.random.split(key, cfg.gradient_steps)
    if p is None:

        def one_update(ls: PyTree, k: Key) -> tuple[PyTree, Metrics]:
            sample_key, update_key = jax.random.split(k)
            batch = sample_batch(setup, buffer, sample_key, env_steps)
            return learner.update(ls, batch, update_key)

        learner_state, metrics = jax.lax.scan(one_update, learner_state, keys)
        return learner_state, None, jax.tree.map(jnp.mean, metrics)

    eligible = setup.layout.eligible_rows(buffer.items, newest_excluded(setup))

    def one_weighted_update(
        carry: tuple[PyTree, Priorities], k: Key
    ) -> tuple[tuple[PyTree, Priorities], Metrics]:
        ls, (priorities, max_priority) = carry
        drawn = buffer._replace(priorities=priorities, max_priority=max_priority)
        sample_key, update_key = jax.random.split(k)
        rows, weights = prioritized.sample_rows(
            drawn, eligible, sample_key, cfg.batch_size, p, env_steps
        )
        batch = minibatch_at(setup, buffer.items, rows)
        ls, metrics, td_errors = learner.weighted_update(ls, batch, weights, update_key)
        drawn = prioritized.with_td_errors(drawn, rows, td_errors, p)
        return (ls, (drawn.priorities, drawn.max_priority)), metrics

    start = (learner_state, (buffer.priorities, buffer.max_priority))
    (learner_state, priorities), metrics = jax.lax.scan(one_weighted_update, start, keys)
    return learner_state, priorities, jax.tree.map(jnp.mean, metrics)


def one_round(
    setup: OffPolicySetup, carry: tuple[OffPolicyState, PyTree], key: Key
) -> tuple[tuple[OffPolicyState, PyTree], tuple[Array, Array, Metrics]]:
    """`train_freq` collecting steps, then the updates once learning has started (and with
    `update_at_episode_start`, another round of them where an episode ended)."""
    cfg = setup.cfg
    collect_key, learn_key = jax.random.split(key)
    (state, env_state), (ends, returns) = jax.lax.scan(
        functools.partial(collect, setup), carry, jax.random.split(collect_key, cfg.train_freq)
    )
    # Jitted so that the trace for the metrics' shapes is the one `lax.cond` reuses.
    update = jax.jit(functools.partial(learn, setup), inline=True)
    args = (state.learner, state.buffer, state.env_steps)
    metric_shapes = jax.eval_shape(update, *args, learn_key)[2]

    def skip(ls: PyTree, buffer: Buffer, *_: Array) -> tuple[PyTree, Priorities | None, Metrics]:
        kept = None if setup.prioritization is None else (buffer.priorities, buffer.max_priority)
        return ls, kept, jax.tree.map(lambda m: jnp.zeros(m.shape, m.dtype), metric_shapes)

    def updated(
        state: OffPolicyState, branch: Callable[..., Any], key: Key
    ) -> tuple[OffPolicyState, Metrics]:
        """`state` after `branch(update, skip, ...)`: a conditional round of updates."""
        learner_state, priorities, metrics = branch(
            update, skip, state.learner, state.buffer, state.env_steps, key
        )
        state = state._replace(learner=learner_state)
        if priorities is not None:
            buffer = state.buffer._replace(priorities=priorities[0], max_priority=priorities[1])
            state = state._replace(buffer=buffer)
        return state, metrics

    # The runs of one program share their env steps and buffer sizes, so they agree and the
    # warm-up skips its updates under vmap too. The buffer size counts: a run resumed from a
    # checkpoint without its buffer (checkpoint.replay_buffer=false) refills it before learning.
    ready = every_run(
        (state.env_steps >= setup.learn_after)
        & (state.buffer.size >= min(setup.learn_after, cfg.buffer_size))
    )
    state, metrics = updated(state, functools.partial(jax.lax.cond, ready), learn_key)
    if setup.update_at_episode_start:
        # Runs end their episodes at different steps: both branches and a select only where
        # they disagree (`cond_over_runs`).
        started = ready & (ends.sum() > 0)
        start_key = jax.random.fold_in(learn_key, 1)
        state, _ = updated(state, functools.partial(cond_over_runs, started), start_key)
    return (state, env_state), (ends.sum(), returns.sum(), metrics)


def train_step(
    setup: OffPolicySetup, state: OffPolicyState, env_state: PyTree, key: Key
) -> tuple[OffPolicyState, PyTree, Metrics]:
    """One iteration: `rounds` rounds; the learner's mean metrics and the episode statistics."""
    cfg = setup.cfg
    (state, env_state), (ends, returns, metrics) = jax.lax.scan(
        functools.partial(one_round, setup), (state, env_state), jax.random.split(key, setup.rounds)
    )
    episodes = ends.sum()
    metrics = {
        **jax.tree.map(jnp.mean, metrics),
        "env_steps": jnp.asarray(cfg.iteration_steps, jnp.int32),
        "episodes": episodes,
        # 0 when no episode ended during the iteration (a NaN would stop the run); the logs leave
        # it out there (`outputs.PER_EPISODE_METRICS`)
        "episode_return": returns.sum() / jnp.maximum(episodes, 1),
    }
    return state, env_state, metrics


def init(setup: OffPolicySetup, key: Key) -> OffPolicyState:
    """The learner's fresh state and an empty buffer."""
    example = example_transition(setup.env, setup.learner)
    buffer = setup.layout.init(example, setup.cfg.buffer_size, setup.env.spec.num_envs)
    if setup.prioritization is not None:
        buffer = prioritized.init(buffer, setup.cfg.buffer_size)
    return OffPolicyState(setup.learner.init(key), buffer, jnp.zeros((), jnp.int32))


def act(
    setup: OffPolicySetup, state: OffPolicyState, obs: Array, key: Key, deterministic: bool = False
) -> Array:
    return setup.learner.act(state.learner, obs, key, deterministic)


def off_policy_setup(
    cfg: OffPolicyConfig,
    env: Env,
    learner: Learner,
    layout: BufferLayout = FULL_LAYOUT,
    n_step: int = 1,
    prioritization: Prioritization | None = None,
    own_steps_window: int = 0,
    update_at_episode_start: bool = False,
) -> OffPolicySetup:
    """The driver's setup for `learner` on `env`'s batch, its sizes checked; `n_step` > 1 gives
    the learner n-step returns (`n_step_transitions`: it must use `Transition.discount`),
    `prioritization` draws minibatches by priority (the learner needs a `weighted_update`) and
    `own_steps_window` > 0 only from the newest of the learner's own transitions, and
    `update_at_episode_start` adds a round of updates as episodes start (`OffPolicySetup`)."""
    require(
        prioritization is None or learner.weighted_update is not None,
        f"agent '{cfg.name}' has no prioritised replay",
    )
    num_envs = env.spec.num_envs
    steps_per_round = num_envs * cfg.train_freq
    require(
        cfg.iteration_steps % steps_per_round == 0,
        f"agent.iteration_steps={cfg.iteration_steps} must be a multiple of env.num_envs × "
        f"agent.train_freq = {num_envs} × {cfg.train_freq}",
    )
    require(
        cfg.buffer_size >= n_step * num_envs,
        f"agent.buffer_size={cfg.buffer_size} must hold at least {n_step} step(s) of the env "
        f"batch ({num_envs} envs)" + (f" for agent.n_step={n_step}" if n_step > 1 else ""),
    )
    learn_after = first_update_after(cfg, num_envs, n_step)
    if own_steps_window:
        # Rows are read as the newest ones: one-step transitions in a ring of whole rows.
        require(
            layout is FULL_LAYOUT and n_step == 1 and prioritization is None,
            f"agent '{cfg.name}': a window of its own steps needs one-step, uniformly drawn "
            "transitions stored whole",
        )
        require(
            0 < own_steps_window <= cfg.buffer_size,
            f"the window of agent '{cfg.name}''s own steps ({own_steps_window}) must be in "
            f"[1, agent.buffer_size={cfg.buffer_size}]",
        )
        learn_after = max(learn_after, warm_up_steps(cfg, num_envs) + cfg.batch_size)
    if cfg.init_from:
        learner = learner._replace(init=trained_init(cfg, env.spec, learner))
    return OffPolicySetup(
        cfg,
        env,
        learner,
        layout,
        rounds=cfg.iteration_steps // steps_per_round,
        learn_after=learn_after,
        n_step=n_step,
        prioritization=prioritization,
        own_steps_window=own_steps_window,
        update_at_episode_start=update_at_episode_start,
    )


def trained_init(cfg: OffPolicyConfig, spec: EnvSpec, learner: Learner) -> Callable[[Key], PyTree]:
    """`learner.init` replaced by the learner state of the run `cfg.init_from`, checked before
    anything compiles: the same agent, the env's spaces, and networks of the same shapes."""
    from jaxrl.policy import check_same_spaces

    where = f"agent.init_from={cfg.init_from}"
    name, trained_spec, trained = _trained_learner(str(Path(cfg.init_from).expanduser().absolute()))
    require(
        name == cfg.name, f"{where} is a run of agent '{name}'; this run's agent is '{cfg.name}'"
    )
    check_same_spaces(where, trained_spec, spec)
    fresh = jax.eval_shape(learner.init, jax.random.key(0))
    try:
        started = graft_learner(fresh, trained)
    except ValueError as e:
        raise ConfigError(
            f"{where}: its learner state does not line up with this run's ({e}); "
            "agent.hidden_sizes and the agent's other size keys must be the run's: see its "
            "config.yaml"
        ) from None
    return lambda key: started


def graft_learner(fresh: PyTree, trained: PyTree) -> PyTree:
    """`trained` laid out as `fresh` (abstract) is, leaf by leaf along the same paths; a
    ValueError names the first leaf that differs in shape or place. Only optax step counts
    (leaves named `count`) may be in one and not the other: a learning-rate schedule
    (`anneal_lr`) adds one to the optimiser state, and the fine-tuning run's starts at 0, so its
    rate falls over its own updates."""
    trained_leaves = dict(jax.tree_util.tree_flatten_with_path(trained)[0])
    fresh_leaves, layout = jax.tree_util.tree_flatten_with_path(fresh)
    step_count = jax.tree_util.GetAttrKey("count")
    leaves = []
    for path, want in fresh_leaves:
        got = trained_leaves.get(path)
        if got is None and path[-1] == step_count:
            leaves.append(jnp.zeros(want.shape, want.dtype))
        elif got is None:
            raise ValueError(f"this run has {jax.tree_util.keystr(path)}, which it has not")
        elif (got.shape, got.dtype) != (want.shape, want.dtype):
            raise ValueError(
                f"{jax.tree_util.keystr(path)} is {got.dtype}{list(got.shape)} there, "
                f"{want.dtype}{list(want.shape)} here"
            )
        else:
            leaves.append(got)
    fresh_paths = {path for path, _ in fresh_leaves}
    for path in trained_leaves:
        if path not in fresh_paths and path[-1] != step_count:
            raise ValueError(f"it has {jax.tree_util.keystr(path)}, which this run has not")
    return jax.tree.unflatten(layout, leaves)


@functools.lru_cache(maxsize=4)
def _trained_learner(run_dir: str) -> tuple[str, EnvSpec, PyTree]:
    """(agent name, env spec, learner state of the first seed) of a run, read once per process:
    the agent is built several times per run (grid points, the traced program)."""
    from jaxrl.policy import load_named_run

    policy, config = load_named_run(run_dir, "agent.init_from")
    return config["agent"]["name"], policy.spec, policy.agent_state.learner


def first_update_after(cfg: OffPolicyConfig, num_envs: int, n_step: int = 1) -> int:
    """Env steps (and stored transitions) before the first update: the warm-up, a minibatch, and
    for n-step returns one transition with its n − 1 successors."""
    return max(cfg.learning_starts, cfg.batch_size, (n_step - 1) * num_envs + 1)


def num_updates(
    cfg: OffPolicyConfig, num_envs: int, total_env_steps: float, n_step: int = 1
) -> int:
    """Gradient updates in a run of `total_env_steps`: `gradient_steps` after every round of
    `train_freq` batched steps that ends with `first_update_after` steps taken (the horizon of
    learning rates annealed over the run)."""
    per_round = num_envs * cfg.train_freq
    rounds = int(total_env_steps) // per_round
    first = -(-first_update_after(cfg, num_envs, n_step) // per_round)  # first learning round
    return max(rounds - first + 1, 0) * cfg.gradient_steps


def annealing_budget(total_env_steps: float | None) -> float:
    """The run's budget, over whose updates `anneal_lr` takes learning rates to 0; a learner
    built outside a run (ERL's, a script's) has none and cannot anneal (ConfigError)."""
    require(total_env_steps is not None, "agent.anneal_lr=true needs the run's budget")
    return total_env_steps


def make_off_policy(
    cfg: OffPolicyConfig,
    env: Env,
    learner: Learner,
    layout: BufferLayout = FULL_LAYOUT,
    n_step: int = 1,
    prioritization: Prioritization | None = None,
) -> Agent:
    """An `Agent` that fills a replay buffer from `env`'s batch and trains `learner` from it;
    `layout` says how transitions are stored, `n_step` what a sampled transition sums and
    `prioritization` how minibatches are drawn (None: uniformly)."""
    return off_policy_agent(off_policy_setup(cfg, env, learner, layout, n_step, prioritization))


def off_policy_agent(setup: OffPolicySetup) -> Agent:
    """The functions above bound to `setup`: for agents that also call the driver's functions
    themselves (HyAR wraps `train_step`)."""
    cfg, learner = setup.cfg, setup.learner
    return Agent(
        init=functools.partial(init, setup),
        act=functools.partial(act, setup),
        train_step=functools.partial(train_step, setup),
        params=lambda state: jnp.concatenate(
            [jnp.ravel(x) for x in jax.tree.leaves(learner.params(state.learner))]
        ),
        steps_per_iteration=cfg.iteration_steps,
        slower_from=setup.learn_after,
        action_value=None
        if learner.action_value is None
        else lambda state, obs, action: learner.action_value(state.learner, obs, action),
    )
