"""ERL: Evolutionary Reinforcement Learning (Khadka & Tumer 2018, "Evolution-Guided Policy Gradient
in Reinforcement Learning").

A population of `population_size` actors evolves by the GA of `jaxrl.ga` (elitism, tournament
selection, neuron-wise crossover, the paper's mutation); an off-policy learner (`learner=ddpg` as
in the paper, or `td3`, both `jaxrl.deterministic`'s learner) trains from ONE replay buffer that
every rollout of the population and of the learner's own actor writes to; every `sync_period`
generations the learner's actor is copied over the weakest member, and the next generation says
whether it became an elite (`rl_elite`, the paper's selection diagnostic).

One `train_step` is one generation:

1. Rollout. The members and the learner's actor are mapped onto ONE env batch of
   `population_size × episodes_per_member + rl_episodes` envs (rows member-major, the learner's
   last) and run for exactly one episode each, in a `while_loop` that stops when all have ended;
   each row's steps up to its episode's end are staged in a [max_episode_steps, rows] block and
   added to the buffer with one masked `replay.add` after the loop. The alternative, a
   fixed-length scan of `max_episode_steps`, runs every row to the cap: on CartPole an early
   population's episodes last ~20 of 500 steps, and on host envs every step is a host call, so
   the while_loop is the faster of the two. (Adding to the buffer inside the loop instead cost
   time proportional to the buffer's capacity on every step: benchmarks/results/design_notes.md.)
   The env is never vmapped (only the actors are,
   over their rows), so JAX-native, Brax and host envs (`spec.vmappable` False: the batch is one
   host pool, one host call per step) run the same code; what differs for host envs is only
   cost: rows whose episode ended keep being stepped (a pool steps as a whole) until the slowest
   ends.
2. Fitness = mean return of each member's `episodes_per_member` episodes (deterministic actor);
   the learner's rows explore (Gaussian noise) and give `rl_return`.
3. GA step (`jaxrl.ga.next_generation`): elites stay in their slots; tournament winners, crossed
   repeats and mutants fill the others, the weakest member's slot last.
4. `floor(updates_per_step × env steps of this generation)` learner updates (the paper's
   `frac_frames_train` = 1), once the buffer holds `learning_starts` transitions.
5. Every `sync_period`-th generation the learner's actor replaces the weakest member (the slot
   the GA gave its last offspring).

Evaluation acts with the champion: the fittest member of the last generation (an elite, so still
in its slot).

Devices: on JAX-native and Brax envs the members are split over the devices that share them
evenly (every process's, in a distributed run), each device running its members' episodes; the
staged steps are gathered, and every device keeps the same buffer and makes the same GA step and
updates (`split_episodes`). Host envs keep one pool, on one device.

Discrete actions (CartPole-v1): the actor is the same tanh actor with one output per action,
read as squashed logits; the env action is their argmax (tanh is monotone, so it is the argmax of
the logits), and the critic takes the squashed-logit vector the actor produced, exploration noise
included. ERL thus sees a continuous-action MDP (`ArgmaxActions`): the GA, the buffer and the
unchanged DDPG/TD3 learner need nothing discrete, and the critic is trained on exactly the kind of
vector it is queried with. Storing the one-hot of the executed action instead would fit the
critic on the simplex's corners and query it inside (softmax) during the actor update; a
Gumbel-softmax actor adds a temperature to tune.

Defaults are the paper's (its supplementary hyperparameters and the authors' code): population
10, elite fraction 0.1, tournament size 3, mutation probability 0.9, mutation fraction 0.1,
mutation strength 0.1, super-mutation probability 0.05 and strength 10 (100 × 0.1), reset
probability 0.05, one episode per member, sync period 10, one update per env step, DDPG with
layer norm, 128-128 tanh actor, Adam 5e-5 (actor) / 5e-4 (critic), τ 0.001, γ 0.99, batch 128,
buffer 1e6, updates once the buffer holds 5 batches. Differences: the critic has the actor's
128-128 layers (the paper's is 200-300 ELU), and exploration is Gaussian (σ 0.1 of the half
range) rather than Ornstein-Uhlenbeck.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from agents.configs import ERLConfig
from jaxrl import ga, parallel, replay
from jaxrl.config import require
from jaxrl.datatypes import Agent, Array, Box, Discrete, Key, Metrics, PyTree, TimeStep, Transition
from jaxrl.deterministic import make_deterministic_learner
from jaxrl.env import Env
from jaxrl.offpolicy import Learner, example_transition
from jaxrl.replay import ReplayState
from jaxrl.rollout import while_each

MEMBERS_AXIS = "members"


def mutation_rates(cfg: ERLConfig) -> ga.MutationRates:
    """The GA's mutation settings of an ERL config."""
    return ga.MutationRates(
        cfg.mutation_frac,
        cfg.mutation_strength,
        cfg.super_mutation_prob,
        cfg.super_mutation_strength,
        cfg.reset_prob,
    )


@dataclasses.dataclass(frozen=True)
class ArgmaxActions:
    """A discrete env seen as a continuous one: the action is a vector in [-1, 1]^n (squashed
    logits) and the wrapped env receives its argmax."""

    inner: Env

    @property
    def spec(self):
        n = self.inner.spec.action_space.n
        box = Box(-np.ones(n, np.float32), np.ones(n, np.float32), (n,))
        return dataclasses.replace(self.inner.spec, action_space=box)

    def with_num_envs(self, num_envs: int) -> ArgmaxActions:
        return ArgmaxActions(self.inner.with_num_envs(num_envs))

    def reset(self, key: Key) -> tuple[Any, TimeStep]:
        return self.inner.reset(key)

    def step(self, state: Any, action: Array, key: Key) -> tuple[Any, TimeStep]:
        return self.inner.step(state, to_discrete(action), key)


def to_discrete(action: Array) -> Array:
    return jnp.argmax(action, axis=-1).astype(jnp.int32)


class ERLState(NamedTuple):
    population: PyTree  # actor parameters, leaves [population_size, ...]
    learner: PyTree  # the learner's state (DeterministicState: `actor_params` is the RL actor)
    buffer: ReplayState
    champion: Array  # int32: slot of the fittest member of the last generation
    synced_slot: Array  # int32: slot holding the RL actor copied in last generation, -1 if none
    generation: Array  # int32
    syncs_judged: Array  # int32: generations that judged a synced RL actor
    rl_elites: Array  # int32: ...of which it was an elite
    env_steps: Array  # int32: env steps collected so far


class Episodes(NamedTuple):
    """One episode of every row of a batch, staged step by step for the buffer."""

    staged: Transition  # leaves [max_steps, rows, ...]
    valid: Array  # bool[max_steps, rows]: the step belongs to the row's episode
    returns: Array  # float32[rows]
    lengths: Array  # int32[rows]
    steps_computed: Array  # int32: loop iterations × rows


class CollectedEpisodes(NamedTuple):
    """One episode of every row of the rollout batch, added to the buffer."""

    buffer: ReplayState
    returns: Array  # float32[rows]
    lengths: Array  # int32[rows]
    steps_computed: Array  # int32: loop iterations × rows


def stage_episodes(
    env: Env, policy: Any, example: Transition, key: Key, max_steps: int
) -> Episodes:
    """Run every env of the batch for exactly one episode under `policy(obs, key)`, staging each
    row's steps of that episode (none after it) in a [max_steps, rows] block.

    The block is carried by the loop and added to the buffer with one masked `replay.add` after
    it: carrying the buffer itself made every loop iteration cost time proportional to the
    buffer's capacity (a copy per step; under vmap over seeds, a select of the whole buffer per
    step)."""
    n = env.spec.num_envs
    reset_key, loop_key = jax.random.split(key)
    env_state, ts = env.reset(reset_key)
    staged = jax.tree.map(lambda x: jnp.zeros((max_steps, n, *x.shape), x.dtype), example)

    def cond(carry):
        *_, alive, _, _, t, _ = carry
        return jnp.any(alive) & (t < max_steps)

    def body(carry):
        env_state, obs, staged, valid, alive, returns, lengths, t, key = carry
        key, act_key, step_key = jax.random.split(key, 3)
        action = policy(obs, act_key)
        env_state, ts = env.step(env_state, action, step_key)
        transition = Transition(obs, action, ts.reward, ts.terminated, ts.truncated, ts.final_obs)
        staged = jax.tree.map(lambda s, x: s.at[t].set(x.astype(s.dtype)), staged, transition)
        valid = valid.at[t].set(alive)
        returns = returns + jnp.where(alive, ts.reward, 0.0)
        lengths = lengths + alive.astype(jnp.int32)
        alive = alive & ~(ts.terminated | ts.truncated)
        return env_state, ts.obs, staged, valid, alive, returns, lengths, t + 1, key

    carry = (
        env_state,
        ts.obs,
        staged,
        jnp.zeros((max_steps, n), bool),
        jnp.ones((n,), bool),
        jnp.zeros((n,), jnp.float32),
        jnp.zeros((n,), jnp.int32),
        jnp.zeros((), jnp.int32),
        loop_key,
    )
    _, _, staged, valid, _, returns, lengths, t, _ = while_each(cond, body, carry)
    return Episodes(staged, valid, returns, lengths, t * n)


def add_episodes(buffer: ReplayState, episodes: Episodes) -> CollectedEpisodes:
    """The staged steps into `buffer`, in step order (row by row within a step)."""
    steps, rows = episodes.valid.shape
    flat = jax.tree.map(lambda x: x.reshape(steps * rows, *x.shape[2:]), episodes.staged)
    buffer = replay.add(buffer, flat, episodes.valid.reshape(-1))
    return CollectedEpisodes(buffer, episodes.returns, episodes.lengths, episodes.steps_computed)


def collect_episodes(
    env: Env, policy: Any, buffer: ReplayState, key: Key, max_steps: int
) -> CollectedEpisodes:
    """One episode of every env of the batch under `policy`, added to `buffer`."""
    example = jax.tree.map(lambda x: x[0], buffer.data)
    return add_episodes(buffer, stage_episodes(env, policy, example, key, max_steps))


class ERLSetup(NamedTuple):
    """What a generation's functions share, fixed when the program is traced; `erl_setup` builds
    it and the functions below take it as their first argument."""

    cfg: ERLConfig
    learner: Learner  # jaxrl.deterministic's DDPG/TD3 learner on the Box view of the env
    box_env: Env  # the env, discrete actions seen as squashed logits (`ArgmaxActions`)
    rollout_env: Env  # one batch: every member's episodes, then the learner's
    # Over several devices (`jaxrl.parallel`: several processes' too) the members' episodes are
    # split by member over `axis`, each device's members on `member_env`; the learner's episodes
    # run on `learner_env` on every device alike.
    axis: parallel.DataAxis
    member_env: Env
    learner_env: Env
    discrete: bool
    pop_rows: int  # rows of the rollout batch the members fill
    max_steps: int  # the env's episode cap
    learn_after: int  # transitions in the buffer before the first update


def erl_setup(cfg: ERLConfig, env: Env) -> ERLSetup:
    """The setup for `cfg` on `env`; a buffer too small for one generation raises ConfigError."""
    discrete = isinstance(env.spec.action_space, Discrete)
    box_env = ArgmaxActions(env) if discrete else env
    pop_rows = cfg.population_size * cfg.episodes_per_member
    rollout_env = box_env.with_num_envs(pop_rows + cfg.rl_episodes)
    max_steps = env.spec.max_episode_steps
    rows = rollout_env.spec.num_envs
    # Host envs are one pool stepped from Python: their population stays one batch.
    split = env.spec.vmappable and cfg.population_size > 1
    members = f"the {cfg.population_size} members of agent.population_size={cfg.population_size}"
    mesh = (
        parallel.data_mesh(cfg.population_size, MEMBERS_AXIS, members)
        if split
        else jax.make_mesh((1,), (MEMBERS_AXIS,), devices=jax.local_devices()[:1])
    )
    axis = parallel.DataAxis(mesh, MEMBERS_AXIS)
    require(
        cfg.buffer_size >= max_steps * rows,
        f"agent.buffer_size={cfg.buffer_size} must hold a generation's rollouts at their "
        f"longest: max_episode_steps x envs = {max_steps} x {rows} = {max_steps * rows}",
    )
    return ERLSetup(
        cfg=cfg,
        learner=make_deterministic_learner(cfg.learner_config(), box_env.spec),
        box_env=box_env,
        rollout_env=rollout_env,
        axis=axis,
        member_env=box_env.with_num_envs(pop_rows // axis.size),
        learner_env=box_env.with_num_envs(cfg.rl_episodes),
        discrete=discrete,
        pop_rows=pop_rows,
        max_steps=max_steps,
        learn_after=max(cfg.learning_starts, cfg.batch_size),
    )


def members_act(setup: ERLSetup, learner_state: PyTree, population: PyTree, obs: Array, key: Key):
    """Each member's deterministic actions on its own rows of `obs` ([k, rows, ...])."""
    act_one = lambda params, o: setup.learner.act(
        learner_state._replace(actor_params=params), o, key, True
    )
    return jax.vmap(act_one)(population, obs)


def rollout_policy(setup: ERLSetup, state: ERLState) -> Callable[[Array, Key], Array]:
    """The rollout batch's policy: members act deterministically on their rows, the learner's
    actor explores on the last `rl_episodes` rows."""
    k, per_member = setup.cfg.population_size, setup.cfg.episodes_per_member
    pop_rows = setup.pop_rows

    def policy(obs: Array, key: Key) -> Array:
        member_obs = obs[:pop_rows].reshape(k, per_member, *obs.shape[1:])
        member_actions = members_act(setup, state.learner, state.population, member_obs, key)
        rl_actions = setup.learner.explore(state.learner, obs[pop_rows:], key, state.env_steps)
        return jnp.concatenate(
            [member_actions.reshape(pop_rows, *member_actions.shape[2:]), rl_actions]
        )

    return policy


def split_episodes(setup: ERLSetup, state: ERLState, key: Key) -> Episodes:
    """A generation's episodes over the devices of `setup.axis`: each device runs its members'
    episodes (its own loop, as long as its longest episode), the learner's episodes run on every
    device alike, and the staged steps of every device are gathered, so that every device (and
    process) adds the same block to its copy of the buffer and makes the same update. Rows keep
    `rollout_policy`'s order: members (device by device), then the learner's."""
    cfg, axis = setup.cfg, setup.axis
    per_member = cfg.episodes_per_member
    example = jax.tree.map(lambda x: x[0], state.buffer.data)
    member_key, learner_key = jax.random.split(key)

    def members(population: PyTree, learner_state: PyTree, key: Key) -> Episodes:
        local = jax.tree.leaves(population)[0].shape[0]

        def policy(obs: Array, act_key: Key) -> Array:
            member_obs = obs.reshape(local, per_member, *obs.shape[1:])
            actions = members_act(setup, learner_state, population, member_obs, act_key)
            return actions.reshape(local * per_member, *actions.shape[2:])

        device_key = jax.random.fold_in(key, axis.index())
        episodes = stage_episodes(setup.member_env, policy, example, device_key, setup.max_steps)
        return axis.all_gather(episodes)  # leaves [devices, ...]

    gathered = axis.shard_map(members, in_specs=(P(MEMBERS_AXIS), P(), P()), out_specs=P())(
        state.population, state.learner, member_key
    )
    by_row = lambda x: jnp.moveaxis(x, 0, 1).reshape(x.shape[1], -1, *x.shape[3:])
    learner_episodes = stage_episodes(
        setup.learner_env,
        lambda obs, k: setup.learner.explore(state.learner, obs, k, state.env_steps),
        example,
        learner_key,
        setup.max_steps,
    )
    return Episodes(
        staged=jax.tree.map(
            lambda m, r: jnp.concatenate([by_row(m), r], axis=1),
            gathered.staged,
            learner_episodes.staged,
        ),
        valid=jnp.concatenate([by_row(gathered.valid), learner_episodes.valid], axis=1),
        returns=jnp.concatenate([gathered.returns.reshape(-1), learner_episodes.returns]),
        lengths=jnp.concatenate([gathered.lengths.reshape(-1), learner_episodes.lengths]),
        steps_computed=gathered.steps_computed.sum() + learner_episodes.steps_computed,
    )


def init(setup: ERLSetup, key: Key) -> ERLState:
    learner = setup.learner
    learner_key, pop_key = jax.random.split(key)
    learner_state = learner.init(learner_key)
    # One member after another (lax.map): never a vmapped initialiser on CPU (see loop.py).
    population = jax.lax.map(
        lambda k_: learner.params(learner.init(k_)),
        jax.random.split(pop_key, setup.cfg.population_size),
    )
    zero = jnp.zeros((), jnp.int32)
    return ERLState(
        population,
        learner_state,
        replay.init(example_transition(setup.box_env), setup.cfg.buffer_size),
        champion=zero,
        synced_slot=jnp.full((), -1, jnp.int32),
        generation=zero,
        syncs_judged=zero,
        rl_elites=zero,
        env_steps=zero,
    )


def learn(
    setup: ERLSetup, learner_state: PyTree, buffer: ReplayState, steps: Array, key: Key
) -> tuple[PyTree, Array, Metrics]:
    """`floor(updates_per_step × steps)` updates on minibatches from `buffer` (none before
    `learn_after` transitions); returns the new state, the update count and mean metrics."""
    cfg, learner = setup.cfg, setup.learner
    count = jnp.where(
        buffer.size >= setup.learn_after,
        jnp.floor(cfg.updates_per_step * steps.astype(jnp.float32)).astype(jnp.int32),
        0,
    )

    # Jitted so that the trace for the metrics' shapes is the one the loop reuses.
    @partial(jax.jit, inline=True)
    def one_update(ls: PyTree, i: Array):
        sample_key, update_key = jax.random.split(jax.random.fold_in(key, i))
        return learner.update(ls, replay.sample(buffer, sample_key, cfg.batch_size), update_key)

    metric_shapes = jax.eval_shape(one_update, learner_state, jnp.zeros((), jnp.int32))[1]

    def body(i: Array, carry):
        ls, sums = carry
        ls, metrics = one_update(ls, i)
        return ls, jax.tree.map(jnp.add, sums, metrics)

    zeros = jax.tree.map(lambda m: jnp.zeros(m.shape, m.dtype), metric_shapes)
    learner_state, sums = jax.lax.fori_loop(0, count, body, (learner_state, zeros))
    means = jax.tree.map(lambda s: s / jnp.maximum(count, 1), sums)
    return learner_state, count, means


def train_step(
    setup: ERLSetup, state: ERLState, env_state: PyTree, key: Key
) -> tuple[ERLState, PyTree, Metrics]:
    """One generation: rollouts, GA step, learner updates, and every `sync_period`-th generation
    the learner's actor over the weakest member. The loop's env state passes through."""
    cfg, learner, pop_rows = setup.cfg, setup.learner, setup.pop_rows
    rollout_key, ga_key, learn_key = jax.random.split(key, 3)
    if setup.axis.size > 1:
        out = add_episodes(state.buffer, split_episodes(setup, state, rollout_key))
    else:
        out = collect_episodes(
            setup.rollout_env,
            rollout_policy(setup, state),
            state.buffer,
            rollout_key,
            setup.max_steps,
        )
    fitness = out.returns[:pop_rows].reshape(cfg.population_size, cfg.episodes_per_member)
    fitness = fitness.mean(axis=1)
    steps = out.lengths.sum()

    population, gen = ga.next_generation(
        ga_key,
        state.population,
        fitness,
        cfg.num_elites,
        cfg.tournament_size,
        cfg.mutation_prob,
        mutation_rates(cfg),
    )
    judged = state.synced_slot >= 0
    rl_elite = judged & jnp.any(gen.order[: cfg.num_elites] == state.synced_slot)

    learner_state, updates, learner_metrics = learn(
        setup, state.learner, out.buffer, steps, learn_key
    )

    generation = state.generation + 1
    sync = generation % cfg.sync_period == 0
    synced, weakest = ga.replace_weakest(population, fitness, learner.params(learner_state))
    population = jax.tree.map(lambda s, p: jnp.where(sync, s, p), synced, population)

    syncs_judged = state.syncs_judged + judged.astype(jnp.int32)
    rl_elites = state.rl_elites + rl_elite.astype(jnp.int32)
    new_state = ERLState(
        population,
        learner_state,
        out.buffer,
        champion=gen.order[0],
        synced_slot=jnp.where(sync, weakest, -1).astype(jnp.int32),
        generation=generation,
        syncs_judged=syncs_judged,
        rl_elites=rl_elites,
        env_steps=state.env_steps + steps,
    )
    metrics: Metrics = {
        **learner_metrics,
        "fitness_max": fitness.max(),
        "fitness_mean": fitness.mean(),
        "fitness_min": fitness.min(),
        "rl_return": out.returns[pop_rows:].mean(),
        "rl_judged": judged.astype(jnp.float32),  # rl_elite is meaningful where this is 1
        "rl_elite": rl_elite.astype(jnp.float32),
        "rl_elite_fraction": rl_elites / jnp.maximum(syncs_judged, 1),
        "gradient_steps": updates,
        "env_steps": steps,
        "env_steps_computed": out.steps_computed,
    }
    return new_state, env_state, metrics


def act(
    setup: ERLSetup, state: ERLState, obs: Array, key: Key, deterministic: bool = True
) -> Array:
    """The champion's deterministic action (env actions: argmax indices for discrete envs)."""
    del deterministic  # members act deterministically; only the learner's rows explore
    champion = ga.take(state.population, state.champion)
    action = setup.learner.act(state.learner._replace(actor_params=champion), obs, key, True)
    return to_discrete(action) if setup.discrete else action


def flat_params(setup: ERLSetup, state: ERLState) -> Array:
    leaves = jax.tree.leaves((state.population, setup.learner.params(state.learner)))
    return jnp.concatenate([jnp.ravel(x) for x in leaves])


def make_erl(cfg: ERLConfig, env: Env) -> Agent:
    """An `Agent` running ERL on `env`: the functions above bound to their setup."""
    setup = erl_setup(cfg, env)
    return Agent(
        init=partial(init, setup),
        act=partial(act, setup),
        train_step=partial(train_step, setup),
        params=partial(flat_params, setup),
    )
