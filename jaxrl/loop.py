"""Training: the compiled chunk (`eval.every` train steps + one evaluation, vmapped over runs) and
the host loop around it (budget, logging, checkpoints, resume, Ctrl-C, NaN guard, summary).

A run is one (grid point, seed) pair: `num_seeds` seeds of each point of `grid.agent`, point-major
(run r is point r // num_seeds, seed `seed + r % num_seeds`), or just the seeds without a grid.
Every point's seed k starts from the key of seed k, so the points are compared on common random
numbers and a grid run equals the single run with its values (to rounding)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import os
import resource
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import yaml
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import agents
import envs
from envs.host import host_errors
from jaxrl import config as config_lib
from jaxrl import distributed, hyper, parallel, presets, speedups
from jaxrl.checkpoint import Checkpointer, CheckpointError
from jaxrl.config import ConfigError, RunConfig
from jaxrl.datatypes import Agent, Array, EnvSpec, Key
from jaxrl.interrupt import StopRequest, signals_request_stop
from jaxrl.outputs import (
    PER_EPISODE_METRICS,
    SUCCESS_COLUMN,
    LiveDisplay,
    NoLogger,
    RunLogger,
    finite_or_none,
    per_episode_mean,
    write_json_atomic,
    write_text_atomic,
)
from jaxrl.prng import make_key
from jaxrl.rollout import Episodes, while_each
from jaxrl.rollout import evaluate as evaluate_episodes
from jaxrl.rundir import (
    CHECKPOINTS,
    ENV_SPEC,
    claim,
    default_run_dir,
    default_run_parent,
    holds_run,
    missing_dirs,
)
from jaxrl.video import record_videos

# The largest carry (all runs together) of runs padded to spread over the cores: every device
# holds it whole and the program copies it into the shares and back every chunk.
PADDED_CARRY_BYTES = 256 * 2**20


class Carry(NamedTuple):
    """Everything one run's training needs to continue: checkpointing it is resuming it. (Its
    hyperparameters are not in it: they follow from the config.)"""

    agent_state: Any
    env_state: Any  # (env state, last TimeStep) of the training env batch
    key: Key
    env_steps: Array  # int32: env steps counted so far, for the per-run budget


class ChunkOutput(NamedTuple):
    # [Trainer.eval_every] per metric; the entries past `iterations` are zeros
    metrics: dict[str, Array]
    iterations: Array  # int32: the train steps this chunk ran (0 for a run already done)
    eval_returns: Array  # [eval episodes]
    finite: Array  # bool: parameters, metrics and eval returns are all finite
    eval_successes: Array | None  # bool[eval episodes]; None unless the env reports success


class Run(NamedTuple):
    """One trained policy of a run directory."""

    seed: int
    grid_point: int | None  # index into `Trainer.points`; None without a grid

    def label(self, points: list[dict[str, float]]) -> str:
        """Its TensorBoard run and video name: `seed_3`, or `learning_rate=0.001/seed_3`."""
        seed = f"seed_{self.seed}"
        if self.grid_point is None:
            return seed
        return f"{hyper.point_name(points[self.grid_point])}/{seed}"

    def columns(self, points: list[dict[str, float]]) -> dict[str, Any]:
        """What identifies it in evals.csv and summary.json."""
        if self.grid_point is None:
            return {"seed": self.seed}
        return {"grid_point": self.grid_point, **points[self.grid_point], "seed": self.seed}


@dataclass
class Trainer:
    """The compiled pieces for one config; built once, shared by training, tests and `load`."""

    cfg: RunConfig
    agent: Agent = field(init=False)

    def __post_init__(self) -> None:
        if not self.cfg.distributed.enabled:  # a process of a distributed run keeps one device
            parallel.use_cores_as_devices()
        entry = agents.REGISTRY[self.cfg.agent.name]
        self.progress_metrics = entry.progress_metrics
        self.points = hyper.grid_points(self.cfg.agent, self.cfg.grid.agent)
        points = range(len(self.points)) if self.points else [None]
        self.runs = [Run(seed, point) for point in points for seed in self.cfg.seeds]
        # Per-run hyperparameter values, passed to the compiled program as data ({} without a
        # grid: the agent then closes over its config's constants, as a single run always has).
        values = hyper.stacked(self.points, self.cfg.num_seeds)
        self.hyper = {key: jnp.asarray(v) for key, v in values.items()}
        self.env = envs.make(
            self.cfg.env, num_envs=self.cfg.env.num_envs or self.cfg.agent.NUM_ENVS
        )
        self.eval_env = self.env.with_num_envs(self.cfg.eval.episodes)
        self._make_agent = lambda agent_cfg: entry.build(
            agent_cfg, self.env, self.cfg.budget.env_steps
        )
        # A resumed run's learner is in its own checkpoint: the run it started from is not read.
        self._agent_cfg = self.cfg.agent
        if self.cfg.resume:
            self._agent_cfg = config_lib.own_checkpoint_config(self.cfg.agent)
        # The agent with the config's own values: its static facts (steps per iteration) are
        # every grid point's, and it is the agent of a run without a grid.
        self.agent = self._make_agent(self._agent_cfg)
        self.budget = int(self.cfg.budget.env_steps)
        self.eval_every = self._eval_every()
        self._refuse_a_state_larger_than_memory()
        # Runs are initialised one after another (lax.map), not vmapped: a vmapped orthogonal
        # initialiser is a batched LAPACK QR, and jaxlib's CPU QR parallelises its batch on the
        # same 2-thread XLA pool whose workers are running it, which deadlocks at 0% CPU when two
        # such QRs run at once (seen with 2+ seeds on a 2-core machine).
        init = lambda keys, hp: jax.lax.map(lambda kh: self._init(*kh), (keys, hp))
        # Several runs on a CPU go as one share per core (`parallel.run_devices`): the init
        # lays the carry out (`carry_sharding`) and the chunk runs each share on its own device.
        self.share_mesh = self._run_layout()
        self.carry_sharding = None
        if self.share_mesh is not None:
            even = self._padding() == 0
            spec = P(parallel.RUN_DEVICES_AXIS) if even else P()
            self.carry_sharding = NamedSharding(self.share_mesh, spec)
            self.hyper = jax.device_put(self.hyper, self.carry_sharding)
        self.init = jax.jit(init, out_shardings=self.carry_sharding)
        if distributed.is_distributed():
            self._refuse_a_program_of_one_process()
            # The carry as arrays that every process holds: the chunk is one program over all
            # of them, and they write its checkpoints together.
            self.init = jax.jit(init, out_shardings=parallel.replicated())
        # One run goes unbatched: under vmap a `lax.cond` on a batched predicate becomes a
        # select that computes both branches (agents keep schedules that all runs share as
        # branches with `parallel.every_run`, over the runs' named axis). The carry is donated: the
        # chunk updates replay buffers in place instead of holding the old and the new one (a
        # NaN stop falls back on the last checkpoint, not on the previous carry).
        if len(self.runs) == 1:
            self.chunk = jax.jit(
                lambda carry, hp, iterations, evaluate: _add_run_axis(
                    self._chunk(_drop_run_axis(carry), _drop_run_axis(hp), iterations, evaluate)
                ),
                donate_argnums=0,
            )
        else:
            chunk = jax.vmap(self._chunk, in_axes=(0, 0, None, None), axis_name=parallel.RUN_AXIS)
            if self.share_mesh is not None:
                chunk = self._in_shares(chunk)
            self.chunk = jax.jit(chunk, donate_argnums=0, out_shardings=self.carry_sharding)

    def _run_layout(self) -> Mesh | None:
        """The mesh of the runs' shares: None where they take one device, as runs on host envs
        do (their steps are callbacks into this process's pools, which XLA does not split over
        devices). Runs that do not split evenly over the
        cores are padded with copies of the last run when that gives each core fewer runs than
        the even split and the carry is small (`PADDED_CARRY_BYTES`: it is copied every chunk)."""
        num_runs = len(self.runs)
        parallel.warn_if_runs_miss_the_cores(num_runs)
        if self.env.spec.family == "host":
            return None
        devices = parallel.run_devices(num_runs)
        wide = parallel.run_devices(num_runs, uneven=True)
        per_device = -(-num_runs // len(wide))
        if per_device < num_runs // len(devices) and self._carry_bytes() <= PADDED_CARRY_BYTES:
            devices = wide
        if len(devices) == 1:
            return None
        return jax.make_mesh(
            (len(devices),),
            (parallel.RUN_DEVICES_AXIS,),
            axis_types=(jax.sharding.AxisType.Auto,),
            devices=devices,
        )

    def _padding(self) -> int:
        """Copies of the last run that fill the last share (0: the runs split evenly)."""
        return -len(self.runs) % self.share_mesh.size

    @functools.cached_property
    def _one_run(self) -> tuple[dict[str, Array], Carry]:
        """The first run's hyperparameters and the shapes of its carry (traced once, not
        computed)."""
        one_run = {key: values[0] for key, values in self.hyper.items()}
        return one_run, jax.eval_shape(self._init, make_key(0), one_run)

    @functools.cached_property
    def _leaf_bytes(self) -> list[tuple[int, str]]:
        """One run's carry, leaf by leaf: its bytes and its dotted path."""
        leaves = jax.tree_util.tree_leaves_with_path(self._one_run[1])
        return [
            (x.size * x.dtype.itemsize, jax.tree_util.keystr(path, simple=True, separator="."))
            for path, x in leaves
        ]

    def _carry_bytes(self) -> int:
        """Bytes of every run's carry (one run's times the runs)."""
        return len(self.runs) * sum(size for size, _ in self._leaf_bytes)

    def _refuse_a_state_larger_than_memory(self) -> None:
        """The runs' state (replay buffers, populations, env batches) must fit the memory its
        device has, or XLA's allocation fails with a traceback after the run directory was
        written: refused here, in one line naming its largest part, before anything is."""
        limit, memory = memory_of_this_process(jax.local_devices()[0])
        total = self._carry_bytes()
        if limit is None or total <= limit:
            return
        largest, name = max(self._leaf_bytes)
        raise ConfigError(
            f"the state of {len(self.runs)} run(s) needs {total / 1e9:,.1f} GB, more than "
            f"{memory}; its largest part is {name} ({len(self.runs) * largest / 1e9:,.1f} GB): "
            f"lower what sizes it "
            f"(agent.buffer_size, env.num_envs, a population), num_seeds or the grid's points"
        )

    def refuse_a_program_larger_than_memory(self, compiled: jax.stages.Compiled) -> None:
        """The chunk needs its carry and XLA's temporaries at once (a rollout's transitions, a
        minibatch's activations, the evaluation's envs), which the state check cannot see: XLA's
        buffer assignment sizes them, per device. A chunk that cannot fit would fail at its
        first allocation with a traceback; refused here, before the run directory is written."""
        device = jax.local_devices()[0]
        limit, memory = memory_of_this_process(device)
        stats = compiled.memory_analysis()
        if limit is None or stats is None:
            return
        # CPU devices are the host's cores: the buffers of this process's share its memory.
        carry_sharding = jax.tree.leaves(compiled.input_shardings[0][0])[0]
        devices = len(carry_sharding.addressable_devices) if device.platform == "cpu" else 1
        temporaries = devices * stats.temp_size_in_bytes
        held = devices * (
            stats.argument_size_in_bytes + stats.output_size_in_bytes - stats.alias_size_in_bytes
        )
        if held + temporaries <= limit:
            return
        raise ConfigError(
            f"a chunk of {len(self.runs)} run(s) needs {(held + temporaries) / 1e9:,.1f} GB at "
            f"once ({temporaries / 1e9:,.1f} GB of it working memory: rollouts, batches, "
            f"activations), more than {memory}: {LOWER_MEMORY}"
        )

    def _in_shares(self, chunk: Callable) -> Callable:
        """`chunk` over the runs run as one share per device of `share_mesh` (`shard_map`); the
        carry of runs that do not split evenly is held whole on every device, and the program
        pads it with copies of the last run for the shares and drops them after."""
        shares = P(parallel.RUN_DEVICES_AXIS)
        in_shares = jax.shard_map(
            chunk,
            mesh=self.share_mesh,
            in_specs=(shares, shares, P(), P()),
            out_specs=shares,
            check_vma=False,  # the runs' collectives are vmap's, within a share
        )
        num_runs, padding = len(self.runs), self._padding()
        if padding == 0:
            return in_shares

        def padded(
            carry: Carry, hyperparameters: dict[str, Array], iterations: Array, evaluate: Array
        ) -> Any:
            grow = lambda x: jnp.concatenate([x, *[x[-1:]] * padding])
            carry, out = in_shares(
                jax.tree.map(grow, carry),
                jax.tree.map(grow, hyperparameters),
                iterations,
                evaluate,
            )
            return jax.tree.map(lambda x: x[:num_runs], (carry, out))

        return padded

    def _refuse_a_program_of_one_process(self) -> None:
        """ConfigError, before anything is compiled, for an agent that never splits its work
        over the devices of every process: each process would train the same whole run."""
        one_run, carry = self._one_run
        agent = self.agent_for(one_run)
        if not parallel.spans_every_process(
            lambda c: agent.train_step(c.agent_state, c.env_state, c.key), carry
        ):
            raise ConfigError(
                f"agent '{self.cfg.agent.name}' trains on one device: a distributed run needs an "
                f"agent that splits its work over devices (es, erl: their population on JAX-native "
                f"or Brax envs; ppo, a2c, reinforce, ppoc: their env batch)"
            )

    def agent_for(self, hyperparameters: dict[str, Array]) -> Agent:
        """The agent of one run: built inside the traced program from its (traced) values."""
        if not hyperparameters:
            return self.agent
        return self._make_agent(hyper.traced_config(self._agent_cfg, hyperparameters))

    def run_keys(self) -> Array:
        """Each run's key: that of its seed (the same for every grid point), made in one vmapped
        call (stacking one key per run compiled a concatenation of as many operands, which XLA
        had not finished after 10 minutes for 100,000 seeds). The config keeps seeds below 2^32,
        where a uint32 seed makes the key its Python int does."""
        seeds = jnp.asarray([run.seed for run in self.runs], dtype=jnp.uint32)
        return jax.vmap(make_key)(seeds)

    def initial_carry(self) -> Carry:
        return self.init(self.run_keys(), self.hyper)

    def _eval_every(self) -> int:
        """`eval.every`, or the cadence that gives about `eval.per_run` evaluations in the
        budget: an evaluation is a few sequential episodes, a fixed cost per chunk that hundreds
        of chunks turn into a large share of a short run (benchmarks/results/gpu_h100.md)."""
        if self.cfg.eval.every is not None:
            return self.cfg.eval.every
        per_iteration = self.agent.steps_per_iteration
        if per_iteration is None:
            return 1
        return max(1, math.ceil(self.budget / per_iteration / self.cfg.eval.per_run))

    def _init(self, key: Key, hyperparameters: dict[str, Array]) -> Carry:
        agent_key, env_key, loop_key = jax.random.split(key, 3)
        return Carry(
            self.agent_for(hyperparameters).init(agent_key),
            self.env.reset(env_key),
            loop_key,
            jnp.zeros((), jnp.int32),
        )

    def _chunk(
        self, carry: Carry, hyperparameters: dict[str, Array], iterations: Array, evaluate: Array
    ) -> tuple[Carry, ChunkOutput]:
        """Up to `iterations` train steps, fewer once the run's budget is reached, then one
        evaluation if `evaluate` (the loop runs an evaluation interval that takes long as
        several calls, the last one evaluating: `checkpoint.call_seconds`). A `while_loop`, not
        a scan, so that each run stops at its own budget: under vmap a run that is done is
        carried unchanged while the others go on."""
        agent = self.agent_for(hyperparameters)
        # Jitted so that its trace for the metrics' shapes is the one the loop's body reuses
        # (jit caches it): the train step, the largest part of a program, is traced once.
        train_step = jax.jit(agent.train_step, inline=True)
        step_metrics = jax.eval_shape(train_step, carry.agent_state, carry.env_state, carry.key)[2]
        metrics = {
            name: jnp.zeros((self.eval_every, *m.shape), m.dtype)
            for name, m in step_metrics.items()
        }
        fixed_steps = self.agent.steps_per_iteration is not None

        def running(loop: tuple[Array, Carry, dict[str, Array]]) -> Array:
            i, c, _ = loop
            if fixed_steps:  # the host sized `iterations` to the budget: same for every run
                return i < iterations
            return (i < iterations) & (c.env_steps < self.budget)

        def body(loop: tuple[Array, Carry, dict[str, Array]]):
            i, c, metrics = loop
            key, step_key = jax.random.split(c.key)
            agent_state, env_state, step = train_step(c.agent_state, c.env_state, step_key)
            metrics = {name: metrics[name].at[i].set(step[name]) for name in metrics}
            env_steps = c.env_steps + jnp.asarray(step["env_steps"], jnp.int32)
            return i + 1, Carry(agent_state, env_state, key, env_steps), metrics

        # Runs that stop at their own budget make the predicate batched under vmap: `while_each`.
        loop = jax.lax.while_loop if fixed_steps else while_each
        ran, carry, metrics = loop(running, body, (jnp.zeros((), jnp.int32), carry, metrics))

        # Jitted as the train step is, so that the trace that sizes the skipped branch's zeros is
        # the one the evaluating branch reuses.
        @functools.partial(jax.jit, inline=True)
        def evaluated(agent_state: Any, key: Key) -> tuple[Key, Array, Array | None]:
            key, eval_key = jax.random.split(key)
            episodes = self.evaluate(agent, agent_state, eval_key)
            return key, episodes.returns, episodes.successes

        # A call that does not evaluate leaves the key as it was: the pieces of an interval draw
        # the numbers that one call over the whole interval draws.
        shapes = jax.eval_shape(evaluated, carry.agent_state, carry.key)[1:]
        key, returns, successes = jax.lax.cond(
            evaluate,
            lambda key: evaluated(carry.agent_state, key),
            lambda key: (key, *jax.tree.map(jnp.zeros_like, shapes)),
            carry.key,
        )
        finite = jnp.all(jnp.isfinite(agent.params(carry.agent_state)))
        finite &= jnp.all(jnp.isfinite(returns))
        for value in metrics.values():
            finite &= jnp.all(jnp.isfinite(value))
        output = ChunkOutput(metrics, ran, returns, finite, successes)
        return carry._replace(key=key), output

    def evaluate(self, agent: Agent, agent_state: Any, key: Key) -> Episodes:
        """`eval.episodes` deterministic episodes, one per env, run in parallel."""
        return evaluate_episodes(agent, agent_state, self.eval_env, key)


def _drop_run_axis(tree: Any) -> Any:
    return jax.tree.map(lambda x: x[0], tree)


def _add_run_axis(tree: Any) -> Any:
    return jax.tree.map(lambda x: x[None], tree)


@dataclass
class Progress:
    """Host-side totals, saved in every checkpoint beside the carry."""

    iteration: int = 0  # chunks' iterations so far: the most any run ran (checkpoint step)
    iterations: list[int] = field(default_factory=list)  # per run
    env_steps: list[int] = field(default_factory=list)  # per run, steps that counted
    env_steps_computed: list[int] = field(default_factory=list)
    final_eval: list[float] = field(default_factory=list)
    best_eval: list[float] = field(default_factory=list)
    run_seconds: float = 0.0
    # The last evaluation's share of episodes that ended in success (envs that report success).
    final_success_rate: list[float] = field(default_factory=list)
    # Where the evaluation interval stands: iterations since the last evaluation (the most any
    # run ran), and the runs that trained since theirs (a checkpoint may fall between).
    since_eval: int = 0
    pending_eval: list[bool] = field(default_factory=list)

    @classmethod
    def start(cls, num_runs: int) -> Progress:
        return cls(
            0,
            [0] * num_runs,
            [0] * num_runs,
            [0] * num_runs,
            [math.nan] * num_runs,
            [-math.inf] * num_runs,
            final_success_rate=[math.nan] * num_runs,
            pending_eval=[False] * num_runs,
        )

    @classmethod
    def restored(cls, saved: dict[str, Any]) -> Progress:
        """The progress a checkpoint holds; one written before `since_eval` and `pending_eval`
        existed was written at an evaluation, with nothing pending."""
        progress = cls(**saved)
        if len(progress.pending_eval) != len(progress.iterations):
            progress.pending_eval = [False] * len(progress.iterations)
        return progress


@dataclass
class RunResult:
    run_dir: Path
    summary: dict[str, Any]
    carry: Carry  # final carry, leading axis = runs (`trainer.runs`)
    trainer: Trainer
    # "completed", "interrupted", "nan" or "failed" (a write failed, memory ran out: then the
    # carry is gone, the last checkpoint holds the run)
    status: str
    # The run's compiled `trainer.chunk` (carry, hyper, int32 iterations, bool evaluate): more
    # iterations from `carry` without compiling again (calling `trainer.chunk` traces and
    # compiles anew).
    compiled_chunk: jax.stages.Compiled
    stop_signal: int | None = None  # the signal that stopped an interrupted run


class Interrupted(Exception):
    """A stop signal (Ctrl-C, SIGTERM, a preemption) before training started: nothing was
    written."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.signum = signum


class OutOfMemory(Exception):
    """XLA could not allocate what a chunk needs, after the checks before the run had passed
    (the memory was there then): the run fails with its last checkpoint kept."""


# Between the calls of an interval a checkpoint waits for this many times as long as the last
# one took to write: saving a replay buffer of GBs takes at most that share of the run.
SAVE_SHARE = 10.0

# What sizes the memory a training program needs beyond its state.
LOWER_MEMORY = (
    "lower env.num_envs, agent.num_steps, a batch size, eval.episodes, num_seeds or the grid's "
    "points"
)


@contextlib.contextmanager
def out_of_memory_as(error: type[Exception], doing: str) -> Iterator[None]:
    """XLA's out-of-memory traceback as one line: `ConfigError` (exit 2) while a run is set up
    and nothing is written yet, `OutOfMemory` during training."""
    try:
        yield
    except jax.errors.JaxRuntimeError as e:
        text = str(e).strip()
        if not text.startswith("RESOURCE_EXHAUSTED"):
            raise
        raise error(f"out of memory {doing} ({text.splitlines()[0]}): {LOWER_MEMORY}") from None


def save_config(cfg: RunConfig, run_dir: Path, env_spec: EnvSpec) -> None:
    data = config_lib.to_dict(cfg)
    write_json_atomic(run_dir / "config.json", data)
    write_text_atomic(run_dir / "config.yaml", yaml.safe_dump(data, sort_keys=False))
    write_json_atomic(run_dir / ENV_SPEC, env_spec.to_json())


ProgressFn = Callable[[dict[str, Any]], None]


def train(
    cfg: RunConfig, run_dir: Path | None = None, progress_fn: ProgressFn | None = None
) -> RunResult:
    """Train `cfg` into `run_dir` (None: a new directory under `runs/`), resuming from its
    checkpoints when `cfg.resume` is set; `progress_fn` sees every evaluation (`jaxrl.train`).

    Everything that can be refused (the agent and env combination, the run directory) is
    checked before anything is written or compiled: a ConfigError leaves no trace. With
    `distributed.*` this process joins the others first (`jaxrl.distributed`)."""
    with signals_request_stop() as stop:
        distributed.start(cfg.distributed)
        trainer = Trainer(cfg)
        if stop.requested:
            raise Interrupted(
                f"{stop.reason} before training started: nothing was written", stop.signum
            )
        if run_dir is None:
            parents = missing_dirs(default_run_parent(cfg.agent.name, cfg.env.id))
            run_dir = default_run_dir(cfg.agent.name, cfg.env.id)
            made_here = [run_dir, *parents]
            cfg = dataclasses.replace(cfg, log=dataclasses.replace(cfg.log, dir=str(run_dir)))
        else:
            run_dir = Path(run_dir)
            made_here = missing_dirs(run_dir)
        writer = distributed.is_primary()
        with claim(run_dir, resume=bool(cfg.resume), writer=writer, made_here=made_here):
            return _train(cfg, run_dir, trainer, stop, progress_fn)


def _train(
    cfg: RunConfig,
    run_dir: Path,
    trainer: Trainer,
    stop: StopRequest,
    progress_fn: ProgressFn | None,
) -> RunResult:
    runs = trainer.runs
    if cfg.resume and not holds_run(run_dir):
        raise ConfigError(
            f"resume={cfg.resume}: no checkpoint in {run_dir / CHECKPOINTS} (the run stopped "
            f"before its first one: start it again without resume)"
        )
    with contextlib.ExitStack() as closing:  # whatever ends the run, these are closed
        primary = distributed.is_primary()  # the process that writes the run's files
        display = LiveDisplay(
            cfg.log.progress and primary, cfg.budget.env_steps, f"{cfg.agent.name} {cfg.env.id}"
        )
        closing.callback(display.close)

        progress = Progress.start(len(runs))
        saved_iteration: int | None = None
        saved_at = time.monotonic()

        t0 = time.perf_counter()
        keys = trainer.run_keys()
        iterations_shape = jax.ShapeDtypeStruct((), jnp.int32)
        evaluate_shape = jax.ShapeDtypeStruct((), jnp.bool_)

        def compile_chunk(abstract: Any) -> tuple[Any, float]:
            with out_of_memory_as(ConfigError, "compiling the training program"):
                lowered = trainer.chunk.lower(
                    abstract, trainer.hyper, iterations_shape, evaluate_shape
                )
                compiled = lowered.compile()
            trainer.refuse_a_program_larger_than_memory(compiled)
            return compiled, time.perf_counter()

        # XLA compiles outside the GIL: the chunk compiles in a thread while init compiles and runs.
        host_steps = trainer.env.spec.family == "host"
        with (
            ThreadPoolExecutor(max_workers=1) as pool,
            speedups.unrolled_threefry(host_steps),
            display.compiling(),
        ):
            abstract = jax.eval_shape(trainer.init, keys, trainer.hyper)
            if distributed.is_distributed():  # the compiler chooses how the chunk takes the carry
                abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), abstract)
            elif trainer.carry_sharding is not None:
                abstract = jax.tree.map(
                    lambda x: jax.ShapeDtypeStruct(
                        x.shape, x.dtype, sharding=trainer.carry_sharding
                    ),
                    abstract,
                )
            compiling = pool.submit(compile_chunk, abstract)
            with host_errors(), out_of_memory_as(ConfigError, "initialising the runs"):
                carry = jax.block_until_ready(trainer.init(keys, trainer.hyper))
            initialised_at = time.perf_counter()
            compiled, compiled_at = compiling.result()
        # The console's first line once the run is known to start: a run refused by the checks
        # above prints its one error line alone (stdout keeps the CLI's result line alone;
        # `log.progress=false` leaves stderr to errors).
        display.start(presets.announce(cfg))
        # Nothing is written before the program is known to compile and fit: a refused run leaves
        # no config or checkpoint behind (`claim` removes the directory it made).
        compile_seconds = max(compiled_at, initialised_at) - t0
        ckpt = Checkpointer(
            run_dir / CHECKPOINTS, cfg.checkpoint.keep, cfg.checkpoint.replay_buffer
        )
        closing.callback(ckpt.close)

        unsaved = False  # progress since the last checkpoint (or the restored one)
        save_seconds = 0.0  # how long the last checkpoint took to write

        def checkpoint(background: bool = False) -> None:
            """Save the carry; with `background` its files are written while the next chunk
            trains (`Checkpointer.save`), and what reads `saved_iteration` waits for them
            (`ckpt.wait`)."""
            nonlocal saved_at, unsaved
            iteration, t_save = progress.iteration, time.monotonic()

            def written() -> None:
                nonlocal saved_iteration, save_seconds
                saved_iteration, save_seconds = iteration, time.monotonic() - t_save
                stop.kept = (
                    f"the checkpoint of iteration {iteration} is kept; "
                    f"continue with resume={run_dir}"
                )

            with distributed.collectives_fail_as_one_line():
                meta = {"progress": progress.__dict__}
                ckpt.save(iteration, carry, meta, written, background)
            saved_at, unsaved = time.monotonic(), False

        # A resumed run's config is written once its checkpoint has restored: one this version
        # cannot restore leaves the directory as the version that wrote it can still continue it.
        if primary and not cfg.resume:
            save_config(cfg, run_dir, trainer.env.spec)
        t_restore = time.perf_counter()
        if cfg.resume:
            fresh_env_state = carry.env_state
            carry, meta = ckpt.restore(carry)
            if primary:
                save_config(cfg, run_dir, trainer.env.spec)
            if host_steps:  # a handle to this process's pools: fresh episodes
                carry = carry._replace(env_state=fresh_env_state)
            progress = Progress.restored(meta["progress"])
            saved_iteration = progress.iteration
            display.message(f"resumed from iteration {progress.iteration} in {run_dir}")
            if _budget_reached(cfg, runs, progress):
                display.message(_nothing_to_train(cfg, progress))
        if distributed.is_distributed() or trainer.carry_sharding is not None:
            # split as the compiled chunk takes it (the env batch; the runs' shares): a restored
            # checkpoint comes back on one device
            carry = parallel.laid_out_as(carry, compiled.input_shardings[0][0])
        compile_seconds += time.perf_counter() - t_restore
        # A resumed run's logs go back to its checkpoint: what a killed run logged after it is
        # redone.
        logger = (
            RunLogger(
                run_dir,
                [run.columns(trainer.points) for run in runs],
                [run.label(trainer.points) for run in runs],
                cfg.log.tensorboard,
                progress if cfg.resume else None,
                success_rate=trainer.env.spec.reports_success,
            )
            if primary
            else NoLogger()
        )
        closing.callback(logger.close)

        status = "completed"
        evaluations = 0
        seconds_per_iteration: float | None = None  # the last call's: sizes the next
        until_slower = _until_slower(trainer, progress)  # iterations before they turn slower
        last_trained: ChunkOutput | None = None  # the last call that trained: the progress line
        # The chunks run in a thread of their own while this one waits in Python, where a second
        # Ctrl-C is handled at once: a program with host callbacks (Atari, Gymnasium) holds the
        # thread that calls it in XLA until it returns, which kept signal handlers waiting for
        # the whole chunk (50 minutes of Pong). The thread is let go, not joined, so a run left
        # by an exception (a second Ctrl-C from the Python API) does not wait for the chunk in
        # flight, which ends on its own.
        chunk_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="jaxrl-chunk")
        closing.callback(chunk_thread.shutdown, wait=False)

        try:
            if saved_iteration is None:  # a fresh run's first: even one that fails at once has one
                checkpoint(background=True)
            # Every process makes the same calls: a stop that any of them was asked for is theirs,
            # and the next call's size is process 0's.
            agreed_stop, _, size = distributed.agree(stop.signal_taken, False, 1)
            while agreed_stop is None:
                budget_reached = _budget_reached(cfg, runs, progress)
                if budget_reached and not any(progress.pending_eval):
                    break
                # A run whose budget ended inside an interval that was not evaluated yet (runs of
                # whole episodes) gets its evaluation from a call that trains nothing.
                rest = _interval_rest(trainer, progress)
                iterations, evaluate = (0, True) if budget_reached else (size, size == rest)
                t_call = time.perf_counter()
                with (
                    host_errors(),
                    distributed.collectives_fail_as_one_line(),
                    out_of_memory_as(OutOfMemory, f"running iteration {progress.iteration + 1}"),
                ):
                    new_carry, out = chunk_thread.submit(
                        _run_chunk, compiled, carry, trainer.hyper, iterations, evaluate
                    ).result()
                call_seconds = time.perf_counter() - t_call
                progress.run_seconds += call_seconds
                ckpt.raise_failed_write()
                if not np.all(out.finite):
                    carry = new_carry  # the previous carry was donated to the chunk
                    ckpt.wait()
                    bad = [
                        run.label(trainer.points)
                        for run, ok in zip(runs, out.finite, strict=True)
                        if not ok
                    ]
                    display.message(
                        f"error: non-finite parameters, metrics or eval returns after iteration "
                        f"{progress.iteration + int(np.max(out.iterations))} ({', '.join(bad)}); "
                        f"stopped. "
                        f"The last good checkpoint (iteration {saved_iteration}) is kept."
                    )
                    status = "nan"
                    break
                carry = new_carry
                unsaved = True
                trained = int(np.max(out.iterations))
                if trained > 0:
                    seconds_per_iteration = call_seconds / trained
                    last_trained = out
                _record(progress, out, logger, compile_seconds, evaluate)
                was_faster, until_slower = until_slower, _until_slower(trainer, progress)
                if was_faster is not None and until_slower is None:
                    seconds_per_iteration = None  # slower iterations from here: timed afresh
                if last_trained is not None:
                    line = _progress_line(trainer, progress, last_trained)
                    display.update(min(progress.env_steps), line)
                since_saved = time.monotonic() - saved_at
                if evaluate:
                    evaluations += 1
                    due = (
                        evaluations % cfg.checkpoint.every == 0
                        and since_saved >= cfg.checkpoint.min_seconds
                    )
                    if progress_fn is not None:
                        progress_fn(
                            {
                                "iteration": progress.iteration,
                                "env_steps": min(progress.env_steps),
                                "eval_return": float(np.mean(progress.final_eval)),
                                "eval_returns": list(progress.final_eval),  # per run
                            }
                        )
                else:  # inside a long interval: after `min_seconds`, if saving is cheap enough
                    due = since_saved >= max(
                        cfg.checkpoint.min_seconds,
                        cfg.checkpoint.call_seconds,
                        SAVE_SHARE * save_seconds,
                    )
                agreed_stop, due, size = distributed.agree(
                    stop.signal_taken,
                    due,
                    _call_size(
                        _interval_rest(trainer, progress),
                        until_slower,
                        seconds_per_iteration,
                        cfg.checkpoint.call_seconds,
                    ),
                )
                if agreed_stop is not None or due:
                    checkpoint(background=agreed_stop is None)
            if agreed_stop is not None and status == "completed":
                stop.stopped_elsewhere(agreed_stop)
                status = "interrupted"
                if unsaved:
                    checkpoint()
                display.message(
                    f"{stop.reason}: checkpoint at iteration {progress.iteration} in "
                    f"{ckpt.directory}; continue with resume={run_dir}"
                )
            elif status == "completed" and unsaved:
                checkpoint()
            ckpt.wait()  # the run's files are all written when it returns
        except (CheckpointError, OSError, distributed.DistributedError, OutOfMemory) as e:
            # a full disk, a directory that went read-only, another process that stopped, memory
            # that other processes took (the carry, donated to the failed chunk, is gone)
            status = "failed"
            if not isinstance(e, CheckpointError):  # the write in flight still counts
                with contextlib.suppress(CheckpointError):
                    ckpt.wait()
            kept = (
                "no checkpoint was written"
                if saved_iteration is None
                else f"the checkpoint of iteration {saved_iteration} is kept"
            )
            display.message(f"error: {e}; {kept}")

    summary = _summary(cfg, trainer, progress, compile_seconds, status)
    if primary:
        with contextlib.suppress(OSError):  # a full disk: the error line above has said so
            write_json_atomic(run_dir / "summary.json", summary)
    if cfg.video and status == "completed":  # after summary.json: a failure here loses nothing
        agent_states = distributed.on_every_host(carry.agent_state)  # all processes take part
        if primary:
            act = lambda state, obs, key: trainer.agent_for(state[1]).act(state[0], obs, key, True)
            names = [(run.label(trainer.points), run.seed) for run in runs]
            states = (agent_states, trainer.hyper)
            videos = record_videos(trainer.env, act, states, names, run_dir)
            summary["videos"] = [str(p) for p in videos.paths]
            write_json_atomic(run_dir / "summary.json", summary)
    stop_signal = stop.signum if status == "interrupted" else None
    return RunResult(run_dir, summary, carry, trainer, status, compiled, stop_signal)


def _run_chunk(
    compiled: jax.stages.Compiled,
    carry: Carry,
    hyperparameters: dict[str, Array],
    iterations: int,
    evaluate: bool,
) -> tuple[Carry, ChunkOutput]:
    """One call of the chunk, its outputs fetched (the carry stays on its devices)."""
    new_carry, out = compiled(carry, hyperparameters, np.int32(iterations), np.bool_(evaluate))
    return new_carry, jax.device_get(out)


def _iterations_until(trainer: Trainer, progress: Progress, env_steps: int | None) -> int | None:
    """Iterations until every run has taken `env_steps`, where iterations take a fixed number of
    env steps; None where that is unknown (whole episodes, no `env_steps`) or already so."""
    per_iteration, taken = trainer.agent.steps_per_iteration, min(progress.env_steps)
    if per_iteration is None or env_steps is None or taken >= env_steps:
        return None
    return math.ceil((env_steps - taken) / per_iteration)


def _interval_rest(trainer: Trainer, progress: Progress) -> int:
    """Iterations to the next evaluation: the rest of the interval, or of the budget where
    iterations take a fixed number of env steps (a run of whole episodes stops at its budget
    inside the chunk, each run on its own)."""
    rest = max(1, trainer.eval_every - progress.since_eval)
    remaining = _iterations_until(trainer, progress, trainer.budget)
    return rest if remaining is None else min(rest, remaining)


def _until_slower(trainer: Trainer, progress: Progress) -> int | None:
    """Iterations before the agent's iterations turn slower (`Agent.slower_from`), or None where
    that is past or unknown: a call ends there and the next is timed afresh."""
    return _iterations_until(trainer, progress, trainer.agent.slower_from)


def _call_size(
    rest: int, until_slower: int | None, seconds_per_iteration: float | None, call_seconds: float
) -> int:
    """Iterations for the next call: the interval's `rest`, cut to about `call_seconds` of
    training and at the iteration from which iterations turn slower; a single one while no
    iteration has been timed (the first call times it)."""
    if seconds_per_iteration is None:
        return 1
    size = min(rest, int(call_seconds / max(seconds_per_iteration, 1e-9)))
    if until_slower is not None:
        size = min(size, until_slower)
    return max(1, size)


def _budget_reached(cfg: RunConfig, runs: list[Run], progress: Progress) -> bool:
    if min(progress.env_steps) >= cfg.budget.env_steps:
        return True
    target = cfg.budget.target_return
    return (
        target is not None
        and progress.iteration > 0
        and min(_mean_per_point(runs, progress.final_eval).values()) >= target
    )


def _nothing_to_train(cfg: RunConfig, progress: Progress) -> str:
    """Why a resumed run trains no further, and which setting continues it."""
    steps = min(progress.env_steps)
    if steps >= cfg.budget.env_steps:
        return (
            f"nothing to train: the run has {steps:,} env steps and budget.env_steps="
            f"{int(cfg.budget.env_steps)}; raise it to continue"
        )
    return (
        f"nothing to train: the run's evaluation return has reached budget.target_return="
        f"{cfg.budget.target_return}; raise it (or set it to null) to continue"
    )


def _mean_per_point(runs: list[Run], values: list[float]) -> dict[int | None, float]:
    """The mean over seeds of each grid point (key None without a grid)."""
    groups: dict[int | None, list[float]] = {}
    for run, value in zip(runs, values, strict=True):
        groups.setdefault(run.grid_point, []).append(value)
    return {point: float(np.mean(v)) for point, v in groups.items()}


def _record(
    progress: Progress, out: ChunkOutput, logger: RunLogger, compile_s: float, evaluated: bool
) -> None:
    """Host totals and logs of the iterations each run ran in this call (none for a run that
    had reached its budget before it), and if it `evaluated`, the evaluation of each run that
    trained since its last one."""
    ran = np.asarray(out.iterations, np.int64)  # [runs]
    steps = np.asarray(out.metrics["env_steps"], np.int64)  # [runs, trainer.eval_every]
    computed = np.asarray(out.metrics.get("env_steps_computed", steps), np.int64)
    cumulative = np.asarray(progress.env_steps, np.int64)[:, None] + np.cumsum(steps, axis=1)
    logger.log_iterations(out.metrics, cumulative, ran)
    progress.iteration += int(ran.max())
    progress.since_eval += int(ran.max())
    for i in range(len(ran)):
        if ran[i] == 0:
            continue
        progress.iterations[i] += int(ran[i])
        progress.env_steps[i] = int(cumulative[i, ran[i] - 1])
        progress.env_steps_computed[i] += int(computed[i, : ran[i]].sum())
        progress.pending_eval[i] = True
    if not evaluated:
        return
    progress.since_eval = 0
    rows = {}
    for i in range(len(ran)):
        if not progress.pending_eval[i]:
            continue
        progress.pending_eval[i] = False
        ret = float(np.mean(out.eval_returns[i]))
        progress.final_eval[i] = ret
        progress.best_eval[i] = max(progress.best_eval[i], ret)
        rows[i] = {
            "iteration": progress.iterations[i],
            "env_steps": progress.env_steps[i],
            "eval_return": ret,
            "eval_return_std": float(np.std(out.eval_returns[i])),
            "elapsed_seconds": round(compile_s + progress.run_seconds, 3),
        }
        if out.eval_successes is not None:
            rate = float(np.mean(out.eval_successes[i]))
            progress.final_success_rate[i] = rate
            rows[i][SUCCESS_COLUMN] = rate
    logger.log_eval(rows)


def _progress_line(trainer: Trainer, progress: Progress, out: ChunkOutput) -> str:
    parts = [f"iter {progress.iteration}", f"steps {min(progress.env_steps):,}"]
    last = np.maximum(np.asarray(out.iterations) - 1, 0)
    for name in trainer.progress_metrics:
        if name in PER_EPISODE_METRICS and "episodes" in out.metrics:
            # over the chunk's episodes: its last iteration may have ended none
            mean = per_episode_mean(out.metrics, name, out.iterations)
            parts.append(f"{name} {'n/a' if mean is None else f'{mean:.1f}'}")
            continue
        values = np.asarray(out.metrics[name])
        latest = values[np.arange(len(last)), last][np.asarray(out.iterations) > 0]
        parts.append(f"{name} {float(np.mean(latest)):.1f}")
    if np.all(np.isnan(progress.final_eval)):  # a long first interval, before its evaluation
        parts.append("eval n/a")
    else:
        parts.append(f"eval {np.mean(progress.final_eval):.1f}")
        if trainer.env.spec.reports_success:
            parts.append(f"success {np.mean(progress.final_success_rate):.0%}")
    if trainer.points:
        per_point = _mean_per_point(trainer.runs, progress.final_eval)
        best = max(per_point, key=lambda p: per_point[p])
        parts.append(f"best point {hyper.point_name(trainer.points[best])}: {per_point[best]:.1f}")
    sps = sum(progress.env_steps) / max(progress.run_seconds, 1e-9)
    parts.append(f"{sps:,.0f} steps/s")
    return " | ".join(parts)


def device_memory_bytes(device: jax.Device) -> int | None:
    """The memory `device`'s arrays can take: an accelerator's own limit; for the CPU, the
    host's physical memory or the container's limit where that is lower (None: unknown)."""
    if device.platform != "cpu":
        return (device.memory_stats() or {}).get("bytes_limit")
    limits = []
    with contextlib.suppress(ValueError, OSError):
        limits.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    with contextlib.suppress(ValueError, OSError):  # cgroup v2; "max" where there is none
        limits.append(int(Path("/sys/fs/cgroup/memory.max").read_text()))
    return min(limits, default=None)


def memory_of_this_process(device: jax.Device) -> tuple[int | None, str]:
    """The bytes this process's arrays on `device` can take, and how to say so. The processes of
    a distributed run on one machine each hold the whole state and program, so on a CPU they
    share its memory equally; an accelerator is each process's own."""
    limit = device_memory_bytes(device)
    # Asked before any early return: it is a collective that every process must enter.
    sharing = distributed.processes_on_this_host() if device.platform == "cpu" else 1
    if limit is None:
        return None, ""
    memory = f"the {limit / 1e9:,.1f} GB of memory this {device.platform.upper()} has"
    if sharing == 1:
        return limit, memory
    return limit // sharing, (
        f"the {limit // sharing / 1e9:,.1f} GB each of the {sharing} processes on this host has "
        f"(its {limit / 1e9:,.1f} GB of memory shared)"
    )


def peak_memory() -> dict[str, float]:
    """This process's peak resident memory (host env workers are processes of their own) and,
    where the devices report it (GPU, TPU), the largest peak of device memory in use, in GB."""
    peaks = {"peak_rss_gb": round(_peak_rss_bytes() / 1e9, 3)}
    device_peaks = [(d.memory_stats() or {}).get("peak_bytes_in_use") for d in jax.local_devices()]
    if any(p is not None for p in device_peaks):
        peaks["peak_device_memory_gb"] = round(max(p or 0 for p in device_peaks) / 1e9, 3)
    return peaks


def _peak_rss_bytes() -> int:
    """Linux's VmHWM: the high-water mark of this process's own memory. `ru_maxrss` keeps the
    parent's across fork and exec (a run started from a 7 GB process reported 7 GB), so it is
    only the fallback where /proc is missing (it is KiB on Linux, bytes on macOS)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024  # kB
    except OSError:
        pass
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def _summary(
    cfg: RunConfig, trainer: Trainer, progress: Progress, compile_seconds: float, status: str
) -> dict[str, Any]:
    total_steps = sum(progress.env_steps)
    runs = trainer.runs
    summary = {
        "agent": cfg.agent.name,
        "env": cfg.env.id,
        "status": status,
        # over every run: with a grid, see "grid" for each point's
        "final_eval_return": finite_or_none(float(np.mean(progress.final_eval))),
        "best_eval_return": finite_or_none(float(np.mean(progress.best_eval))),
        "env_steps": int(np.mean(progress.env_steps)),
        "env_steps_computed": int(np.mean(progress.env_steps_computed)),
        "iterations": progress.iteration,
        "eval_every": trainer.eval_every,  # iterations between evaluations, as resolved
        "compile_seconds": round(compile_seconds, 3),
        "run_seconds": round(progress.run_seconds, 3),
        "env_steps_per_second": round(total_steps / max(progress.run_seconds, 1e-9), 1),
        "num_seeds": cfg.num_seeds,
        "num_runs": len(runs),
        "devices": [str(d) for d in jax.devices()],
        # the devices the runs were spread over in equal shares (one: all runs on the first)
        "run_devices": 1 if trainer.share_mesh is None else trainer.share_mesh.size,
        **peak_memory(),
        "runs": [
            {
                **run.columns(trainer.points),
                "final_eval_return": finite_or_none(progress.final_eval[i]),
                "best_eval_return": finite_or_none(progress.best_eval[i]),
                "env_steps": progress.env_steps[i],
                "iterations": progress.iterations[i],
            }
            for i, run in enumerate(runs)
        ],
    }
    if distributed.is_distributed():
        summary["processes"] = jax.process_count()
    if trainer.points:
        final = _mean_per_point(runs, progress.final_eval)
        best = _mean_per_point(runs, progress.best_eval)
        summary["grid"] = [
            {
                "grid_point": p,
                **point,
                "final_eval_return": finite_or_none(final[p]),
                "best_eval_return": finite_or_none(best[p]),
            }
            for p, point in enumerate(trainer.points)
        ]
    if trainer.env.spec.reports_success:
        _add_success_rates(summary, runs, progress.final_success_rate)
    return summary


def _add_success_rates(summary: dict[str, Any], runs: list[Run], rates: list[float]) -> None:
    """The last evaluation's success rate beside each final eval return: over every run, per run
    and, with a grid, per point (the mean over its seeds)."""
    summary["final_eval_success_rate"] = finite_or_none(float(np.mean(rates)))
    for row, rate in zip(summary["runs"], rates, strict=True):
        row["final_eval_success_rate"] = finite_or_none(rate)
    per_point = _mean_per_point(runs, rates)
    for row in summary.get("grid", []):
        row["final_eval_success_rate"] = finite_or_none(per_point[row["grid_point"]])
