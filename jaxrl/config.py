"""Structured-config schemas shared by every run, and the error type bad input is reported with.

Hydra composes YAML + command-line overrides onto these dataclasses; `jaxrl.run` converts the
result once into frozen instances (whose `__post_init__` checks ranges) that `make_train` closes
over. Nothing here is ever traced.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any

from omegaconf import MISSING


class ConfigError(ValueError):
    """Bad user input: the message names what was wrong and what is valid; shown without a
    traceback."""


def install_hint(extra: str) -> str:
    """How to add an optional dependency group: from the clone, as the README installs jaxrl
    (it is not on PyPI, so `pip install 'jaxrl[...]'` does not find it)."""
    return f'pip install -e ".[{extra}]"'


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """The hint a refusal puts before its list of valid values when `name` looks like a typo of
    one of `choices` ("did you mean X? "), else "": a near miss is fixed without reading a list."""
    return suggest(difflib.get_close_matches(name, list(choices), n=3, cutoff=0.75))


def suggest(names: Sequence[str]) -> str:
    """The hint naming `names`, "did you mean A, B or C? "; "" for none."""
    if not names:
        return ""
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
    return f"did you mean {listed}? "


def require(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


@dataclass(frozen=True)
class EnvConfig:
    id: str = "CartPole-v1"
    # Envs per seed for agents that keep one env batch running (PPO, A2C, REINFORCE...); null:
    # the agent's default (agents.REGISTRY). ES and ERL size theirs from their population and
    # refuse it (their configs' `OWN_ENV_BATCHES`).
    num_envs: int | None = None
    # None: the env's registered cap (CartPole-v1: 500, Pendulum-v1: 200...). Reaching it is a
    # truncation, never a termination.
    max_episode_steps: int | None = None

    def __post_init__(self) -> None:
        require(
            self.num_envs is None or self.num_envs >= 1,
            f"env.num_envs={self.num_envs} must be >= 1 (or null: the agent's default)",
        )
        require(
            self.max_episode_steps is None or self.max_episode_steps >= 1,
            f"env.max_episode_steps={self.max_episode_steps} must be >= 1 (or null: the default)",
        )


# Env steps are counted in int32 on the device: the budget stays well below 2^31.
MAX_ENV_STEPS = 2e9
# Seeds JAX's keys tell apart without 64-bit mode (`jax.random.key` keeps a seed's low 32 bits).
MAX_SEED = 2**32


@dataclass(frozen=True)
class BudgetConfig:
    env_steps: float = 1e6  # env steps (that counted toward episodes) per seed; floats allow 2e6
    # Stop early once the evaluation return, averaged over seeds, reaches this. null: never.
    target_return: float | None = None

    def __post_init__(self) -> None:
        require(
            math.isfinite(self.env_steps) and 1 <= self.env_steps <= MAX_ENV_STEPS,
            f"budget.env_steps={self.env_steps} must be a number of env steps per seed from 1 "
            f"to {MAX_ENV_STEPS:.0e}",
        )
        require(
            self.target_return is None or math.isfinite(self.target_return),
            f"budget.target_return={self.target_return} must be a finite return (or null)",
        )


@dataclass(frozen=True)
class EvalConfig:
    # Training iterations (ES generations, gradient updates) between evaluations. null: sized to
    # the budget, so that a run makes about `per_run` evaluations (every iteration for agents
    # whose iterations are whole episodes of unknown length, as ES and ERL generations are).
    every: int | None = None
    per_run: int = 20
    episodes: int = 10  # deterministic episodes per evaluation, run in parallel

    def __post_init__(self) -> None:
        require(
            self.every is None or self.every >= 1, f"eval.every={self.every} must be >= 1 (or null)"
        )
        require(self.per_run >= 1, f"eval.per_run={self.per_run} must be >= 1")
        require(self.episodes >= 1, f"eval.episodes={self.episodes} must be >= 1")


@dataclass(frozen=True)
class LogConfig:
    # Where the run writes everything; empty: Hydra's run dir (runs/<agent>/<env>/<time>) from
    # the CLI, the same pattern from the Python API.
    dir: str = ""
    tensorboard: bool = True
    progress: bool = True  # the live console display (its first line: the preset)


@dataclass(frozen=True)
class CheckpointConfig:
    # A checkpoint after every `every`-th evaluation once `min_seconds` of training have passed
    # since the last one (0: after every `every`-th); one is always written at the start, at the
    # end and on Ctrl-C. A kill -9 loses at most about `min_seconds` of training; a checkpoint
    # after every evaluation made a short run's saves a large share of it
    # (benchmarks/results/ppo_purejaxrl.md).
    every: int = 1
    min_seconds: float = 60.0
    # An evaluation interval that would take longer runs as calls of the compiled program of
    # about this many seconds of training: between them a stop signal is answered and, once
    # `min_seconds` have passed, a checkpoint written (a whole Atari interval took 50 minutes).
    call_seconds: float = 10.0
    keep: int = 2  # newest checkpoints kept on disk
    # False: checkpoints leave the replay buffers out (an Atari buffer is GBs); a resumed run then
    # refills its buffer with the current policy before it learns again.
    replay_buffer: bool = True

    def __post_init__(self) -> None:
        require(self.every >= 1, f"checkpoint.every={self.every} must be >= 1")
        require(
            math.isfinite(self.min_seconds) and self.min_seconds >= 0,
            f"checkpoint.min_seconds={self.min_seconds} must be a number of seconds >= 0",
        )
        require(
            math.isfinite(self.call_seconds) and self.call_seconds > 0,
            f"checkpoint.call_seconds={self.call_seconds} must be a number of seconds > 0",
        )
        require(self.keep >= 1, f"checkpoint.keep={self.keep} must be >= 1")


@dataclass(frozen=True)
class GridConfig:
    # agent key -> values: every combination of them (times `num_seeds`) trains in one compiled
    # program. Only the agent's `HYPERPARAMETERS` (values that change no array shape) may vary.
    agent: dict[str, list[float]] = field(default_factory=dict)


# HOST:PORT, the host a name, an IPv4 address or a bracketed IPv6 address.
COORDINATOR = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9.\-]*):(\d{1,5})")


@dataclass(frozen=True)
class DistributedConfig:
    """One run trained by several processes, each on its own devices (docs/distributed.md)."""

    # Where process 0 serves the coordination service, HOST:PORT (every process names the same);
    # `auto`: JAX reads it, and the two keys below, from the cluster's variables (SLURM, Open
    # MPI); null: one process.
    coordinator: str | None = None
    num_processes: int | None = None
    process_id: int | None = None  # 0 .. num_processes - 1; process 0 writes the run's files
    # Seconds without a heartbeat after which a process counts as dead and the others stop.
    timeout: int = 60
    # Seconds the processes wait for each other to connect at start-up.
    connect_timeout: int = 300

    @property
    def enabled(self) -> bool:
        return self.coordinator is not None

    def __post_init__(self) -> None:
        given = [k for k in ("num_processes", "process_id") if getattr(self, k) is not None]
        require(
            self.enabled or not given,
            f"distributed.{given[0] if given else ''} needs distributed.coordinator=HOST:PORT "
            f"(or auto)",
        )
        if self.coordinator is not None and self.coordinator != "auto":
            found = COORDINATOR.fullmatch(self.coordinator)
            require(
                found is not None and 1 <= int(found.group(2)) <= 65535,
                f"distributed.coordinator='{self.coordinator}' is not HOST:PORT (e.g. "
                f"10.0.0.1:12345, a port from 1 to 65535) or auto",
            )
            require(
                len(given) == 2,
                f"distributed.coordinator={self.coordinator} needs distributed.num_processes and "
                f"distributed.process_id",
            )
        n, i = self.num_processes, self.process_id
        require(n is None or n >= 1, f"distributed.num_processes={n} must be >= 1")
        require(
            i is None or 0 <= i < (n if n is not None else i + 1),
            f"distributed.process_id={i} must be from 0 to "
            + (
                f"{n - 1} (distributed.num_processes={n})" if n else "distributed.num_processes - 1"
            ),
        )
        require(self.timeout >= 1, f"distributed.timeout={self.timeout} must be >= 1 second")
        require(
            self.connect_timeout >= 1,
            f"distributed.connect_timeout={self.connect_timeout} must be >= 1 second",
        )


@dataclass(frozen=True)
class RunConfig:
    agent: Any = MISSING  # one of the agents' own config dataclasses
    env: EnvConfig = field(default_factory=EnvConfig)
    seed: int = 0
    num_seeds: int = 1  # seeds seed, seed+1, ... trained together in one compiled program
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    log: LogConfig = field(default_factory=LogConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    grid: GridConfig = field(default_factory=GridConfig)
    distributed: DistributedConfig = field(default_factory=DistributedConfig)
    # Settings and budget for the agent on this env (jaxrl/presets.py): auto (the preset of the
    # chosen agent and env), none (the agent's bare defaults) or a preset's name; a composed
    # config holds the name of the one applied.
    preset: str = "auto"
    resume: str | None = None  # a run directory to continue
    # Record one evaluation episode of each seed's final policy as <run dir>/videos/seed_<n>.mp4.
    video: bool = False

    def __post_init__(self) -> None:
        own_batches = getattr(self.agent, "OWN_ENV_BATCHES", None)
        require(
            self.env.num_envs is None or own_batches is None,
            f"env.num_envs={self.env.num_envs}: agent '{getattr(self.agent, 'name', '?')}' runs "
            f"its own env batches ({own_batches} a generation); leave env.num_envs unset",
        )
        require(self.num_seeds >= 1, f"num_seeds={self.num_seeds} must be >= 1")
        require(self.seed >= 0, f"seed={self.seed} must be >= 0")
        last = self.seed + self.num_seeds - 1
        which = f"seed={self.seed}"
        if self.num_seeds > 1:
            which += f" with num_seeds={self.num_seeds} (its last seed {last})"
        require(
            last < MAX_SEED,
            f"{which} must be below 2^32 = {MAX_SEED}: JAX keeps a seed's low 32 bits, so larger "
            f"seeds would repeat smaller ones' numbers",
        )

    @property
    def seeds(self) -> list[int]:
        return list(range(self.seed, self.seed + self.num_seeds))


def own_checkpoint_config(agent_cfg: Any) -> Any:
    """The agent config of a run whose learner comes from its own checkpoint (resumed, or
    loaded as a policy): `init_from` dropped, so the run it started from is not read again (nor
    needed: it may have moved)."""
    if getattr(agent_cfg, "init_from", ""):
        return replace(agent_cfg, init_from="")
    return agent_cfg


def to_dict(obj: Any) -> Any:
    """A config as plain JSON-able data (tuples become lists)."""
    if is_dataclass(obj):
        return {f.name: to_dict(getattr(obj, f.name)) for f in fields(obj)}
    if isinstance(obj, list | tuple):
        return [to_dict(v) for v in obj]
    return obj


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """`{"a": {"b": 1}}` as `{"a.b": 1}`: configs compared key by key."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out
