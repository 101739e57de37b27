"""Training: the compiled chunk (`eval.every` train steps + one evaluation, vmapped over seeds) and
the host loop around it (budget, logging, checkpoints, resume, Ctrl-C, NaN guard, summary)."""

from __future__ import annotations

import math
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import yaml

import agents
import envs
from envs.host import host_errors
from jaxrl import config as config_lib
from jaxrl.checkpoint import Checkpointer
from jaxrl.config import ConfigError, RunConfig
from jaxrl.logging import LiveDisplay, RunLogger, finite_or_none, write_json_atomic
from jaxrl.prng import make_key
from jaxrl.rollout import run_episodes
from jaxrl.types import Agent, Array, Key
from jaxrl.video import record_videos


class Carry(NamedTuple):
    """Everything one seed's training needs to continue: checkpointing it is resuming it."""

    agent_state: Any
    env_state: Any  # (env state, last TimeStep) of the training env batch
    key: Key


class ChunkOutput(NamedTuple):
    metrics: dict[str, Array]  # [iterations] per metric
    eval_returns: Array  # [eval episodes]
    finite: Array  # bool: parameters, metrics and eval returns are all finite


@dataclass
class Trainer:
    """The compiled pieces for one config; built once, shared by training, tests and `load`."""

    cfg: RunConfig
    agent: Agent = field(init=False)

    def __post_init__(self) -> None:
        entry = agents.REGISTRY[self.cfg.agent.name]
        self.progress_metrics = entry.progress_metrics
        self.env = envs.make(self.cfg.env, num_envs=self.cfg.env.num_envs or entry.num_envs)
        self.eval_env = self.env.with_num_envs(self.cfg.eval.episodes)
        budget = {"total_env_steps": self.cfg.budget.env_steps} if entry.takes_budget else {}
        self.agent = entry.make(self.cfg.agent, self.env, **budget)
        # Seeds are initialised one after another (lax.map), not vmapped: a vmapped orthogonal
        # initialiser is a batched LAPACK QR, and jaxlib's CPU QR parallelises its batch on the
        # same 2-thread XLA pool whose workers are running it, which deadlocks at 0% CPU when two
        # such QRs run at once (seen with 2+ seeds on a 2-core machine).
        self.init = jax.jit(lambda keys: jax.lax.map(self._init, keys))
        # One seed runs unbatched: under vmap every `lax.cond` (learning starts, delayed actor
        # updates) becomes a select that computes both branches.
        if self.cfg.num_seeds == 1:
            self.chunk = jax.jit(lambda carry: _add_seed_axis(self._chunk(_drop_seed_axis(carry))))
        else:
            self.chunk = jax.jit(jax.vmap(self._chunk))

    def seed_keys(self) -> Array:
        return jnp.stack([make_key(s) for s in self.cfg.seeds])

    def _init(self, key: Key) -> Carry:
        agent_key, env_key, loop_key = jax.random.split(key, 3)
        return Carry(self.agent.init(agent_key), self.env.reset(env_key), loop_key)

    def _chunk(self, carry: Carry) -> tuple[Carry, ChunkOutput]:
        def body(c: Carry, _):
            key, step_key = jax.random.split(c.key)
            agent_state, env_state, metrics = self.agent.train_step(
                c.agent_state, c.env_state, step_key
            )
            return Carry(agent_state, env_state, key), metrics

        carry, metrics = jax.lax.scan(body, carry, None, length=self.cfg.eval.every)
        key, eval_key = jax.random.split(carry.key)
        eval_returns = self.evaluate(carry.agent_state, eval_key)
        finite = jnp.all(jnp.isfinite(self.agent.params(carry.agent_state)))
        finite &= jnp.all(jnp.isfinite(eval_returns))
        for value in metrics.values():
            finite &= jnp.all(jnp.isfinite(value))
        return carry._replace(key=key), ChunkOutput(metrics, eval_returns, finite)

    def evaluate(self, agent_state: Any, key: Key) -> Array:
        """Returns of `eval.episodes` deterministic episodes, one per env, run in parallel."""
        policy = lambda obs, k: self.agent.act(agent_state, obs, k, True)
        return run_episodes(self.eval_env, policy, key).returns


def _drop_seed_axis(tree: Any) -> Any:
    return jax.tree.map(lambda x: x[0], tree)


def _add_seed_axis(tree: Any) -> Any:
    return jax.tree.map(lambda x: x[None], tree)


@dataclass
class Progress:
    """Host-side totals, saved in every checkpoint beside the carry."""

    iteration: int = 0
    env_steps: list[int] = field(default_factory=list)  # per seed, steps that counted
    env_steps_computed: list[int] = field(default_factory=list)
    final_eval: list[float] = field(default_factory=list)
    best_eval: list[float] = field(default_factory=list)
    run_seconds: float = 0.0

    @classmethod
    def start(cls, num_seeds: int) -> Progress:
        return cls(
            0, [0] * num_seeds, [0] * num_seeds, [math.nan] * num_seeds, [-math.inf] * num_seeds
        )


@dataclass
class RunResult:
    run_dir: Path
    summary: dict[str, Any]
    carry: Carry  # final carry, leading axis = seeds
    trainer: Trainer
    status: str  # "completed", "interrupted" or "nan"


class _StopRequest:
    """First Ctrl-C asks the loop to checkpoint and stop after the current chunk; a second one
    interrupts at once (the last checkpoint stays valid: saves are atomic)."""

    def __init__(self) -> None:
        self.requested = False
        self._previous = None

    def __enter__(self) -> _StopRequest:
        try:
            self._previous = signal.signal(signal.SIGINT, self._handle)
        except ValueError:  # not the main thread: no signal handling there
            self._previous = None
        return self

    def _handle(self, signum, frame) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


def save_config(cfg: RunConfig, run_dir: Path) -> None:
    data = config_lib.to_dict(cfg)
    write_json_atomic(run_dir / "config.json", data)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


def train(cfg: RunConfig, run_dir: Path) -> RunResult:
    """Train `cfg` into `run_dir`, resuming from its checkpoints when `cfg.resume` is set."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    save_config(cfg, run_dir)
    trainer = Trainer(cfg)
    seeds = cfg.seeds
    display = LiveDisplay(cfg.log.progress, cfg.budget.env_steps, f"{cfg.agent.name} {cfg.env.id}")
    ckpt = Checkpointer(run_dir / "checkpoints", cfg.checkpoint.keep, cfg.checkpoint.replay_buffer)
    logger = RunLogger(run_dir, seeds, cfg.log.tensorboard)

    t0 = time.perf_counter()
    keys = trainer.seed_keys()
    # XLA compiles outside the GIL: the chunk compiles in a thread while init compiles and runs.
    with ThreadPoolExecutor(max_workers=1) as pool:
        abstract = jax.eval_shape(trainer.init, keys)
        compiling = pool.submit(lambda: trainer.chunk.lower(abstract).compile())
        with host_errors():
            carry = jax.block_until_ready(trainer.init(keys))
        compiled = compiling.result()
    progress = Progress.start(len(seeds))
    if cfg.resume:
        if ckpt.latest_step() is None:
            raise ConfigError(f"resume={cfg.resume}: no checkpoint in {ckpt.directory}")
        fresh_env_state = carry.env_state
        carry, meta = ckpt.restore(carry)
        if trainer.env.spec.family == "host":  # a handle to this process's pools: fresh episodes
            carry = carry._replace(env_state=fresh_env_state)
        progress = Progress(**meta["progress"])
        display.message(f"resumed from iteration {progress.iteration} in {run_dir}")
    compile_seconds = time.perf_counter() - t0

    status = "completed"
    if not cfg.resume:  # so that even a run that fails at once leaves a good checkpoint
        ckpt.save(0, carry, {"progress": progress.__dict__})
    saved_iteration = progress.iteration
    chunks_done = 0
    try:
        with _StopRequest() as stop:
            while not _budget_reached(cfg, progress):
                t_chunk = time.perf_counter()
                with host_errors():
                    new_carry, out = compiled(carry)
                    out = jax.device_get(out)
                progress.run_seconds += time.perf_counter() - t_chunk
                if not np.all(out.finite):
                    bad = [s for s, ok in zip(seeds, out.finite, strict=True) if not ok]
                    display.message(
                        f"error: non-finite parameters, metrics or eval returns after iteration "
                        f"{progress.iteration + cfg.eval.every} (seeds {bad}); stopped. "
                        f"The last good checkpoint (iteration {saved_iteration}) is kept."
                    )
                    status = "nan"
                    break
                carry = new_carry
                _record(cfg, progress, out, logger, compile_seconds)
                display.update(min(progress.env_steps), _progress_line(trainer, progress, out))
                chunks_done += 1
                if stop.requested or chunks_done % cfg.checkpoint.every == 0:
                    ckpt.save(progress.iteration, carry, {"progress": progress.__dict__})
                    saved_iteration = progress.iteration
                if stop.requested:
                    status = "interrupted"
                    display.message(
                        f"interrupted: checkpoint at iteration {progress.iteration} in "
                        f"{ckpt.directory}; continue with resume={run_dir}"
                    )
                    break
    finally:
        if status == "completed" and saved_iteration != progress.iteration:
            ckpt.save(progress.iteration, carry, {"progress": progress.__dict__})
        display.close()
        logger.close()
        ckpt.close()

    summary = _summary(cfg, progress, compile_seconds, status)
    write_json_atomic(run_dir / "summary.json", summary)
    if cfg.video and status == "completed":  # after summary.json: a failure here loses nothing
        act = lambda agent_state, obs, key: trainer.agent.act(agent_state, obs, key, True)
        videos = record_videos(trainer.env, act, carry.agent_state, seeds, run_dir)
        summary["videos"] = [str(p) for p in videos.paths]
        write_json_atomic(run_dir / "summary.json", summary)
    return RunResult(run_dir, summary, carry, trainer, status)


def _budget_reached(cfg: RunConfig, progress: Progress) -> bool:
    if min(progress.env_steps) >= cfg.budget.env_steps:
        return True
    target = cfg.budget.target_return
    return (
        target is not None
        and progress.iteration > 0
        and float(np.mean(progress.final_eval)) >= target
    )


def _record(
    cfg: RunConfig, progress: Progress, out: ChunkOutput, logger: RunLogger, compile_s: float
) -> None:
    steps = np.asarray(out.metrics["env_steps"], np.int64)  # [seeds, iterations]
    computed = np.asarray(out.metrics.get("env_steps_computed", steps), np.int64)
    cumulative = np.asarray(progress.env_steps, np.int64)[:, None] + np.cumsum(steps, axis=1)
    logger.log_iterations(out.metrics, cumulative)
    progress.iteration += cfg.eval.every
    rows = []
    for i, seed in enumerate(cfg.seeds):
        progress.env_steps[i] = int(cumulative[i, -1])
        progress.env_steps_computed[i] += int(computed[i].sum())
        ret = float(np.mean(out.eval_returns[i]))
        progress.final_eval[i] = ret
        progress.best_eval[i] = max(progress.best_eval[i], ret)
        rows.append(
            {
                "seed": seed,
                "iteration": progress.iteration,
                "env_steps": progress.env_steps[i],
                "eval_return": ret,
                "eval_return_std": float(np.std(out.eval_returns[i])),
                "elapsed_seconds": round(compile_s + progress.run_seconds, 3),
            }
        )
    logger.log_eval(rows)


def _progress_line(trainer: Trainer, progress: Progress, out: ChunkOutput) -> str:
    parts = [f"iter {progress.iteration}", f"steps {min(progress.env_steps):,}"]
    for name in trainer.progress_metrics:
        parts.append(f"{name} {float(np.mean(out.metrics[name][:, -1])):.1f}")
    parts.append(f"eval {np.mean(progress.final_eval):.1f}")
    sps = sum(progress.env_steps) / max(progress.run_seconds, 1e-9)
    parts.append(f"{sps:,.0f} steps/s")
    return " | ".join(parts)


def _summary(
    cfg: RunConfig, progress: Progress, compile_seconds: float, status: str
) -> dict[str, Any]:
    total_steps = sum(progress.env_steps)
    return {
        "agent": cfg.agent.name,
        "env": cfg.env.id,
        "status": status,
        "final_eval_return": finite_or_none(float(np.mean(progress.final_eval))),
        "best_eval_return": finite_or_none(float(np.mean(progress.best_eval))),
        "env_steps": int(np.mean(progress.env_steps)),
        "env_steps_computed": int(np.mean(progress.env_steps_computed)),
        "iterations": progress.iteration,
        "compile_seconds": round(compile_seconds, 3),
        "run_seconds": round(progress.run_seconds, 3),
        "env_steps_per_second": round(total_steps / max(progress.run_seconds, 1e-9), 1),
        "num_seeds": cfg.num_seeds,
        "devices": [str(d) for d in jax.local_devices()],
        "seeds": [
            {
                "seed": seed,
                "final_eval_return": finite_or_none(progress.final_eval[i]),
                "best_eval_return": finite_or_none(progress.best_eval[i]),
                "env_steps": progress.env_steps[i],
            }
            for i, seed in enumerate(cfg.seeds)
        ],
    }
