"""The command line behind `python -m jaxrl.run` (whose module is only the entry point).

A single run composes its config once, with Hydra's compose API, and runs it; `-m` sweeps go
through Hydra's app (launchers, sweepers), each job composing its own. Every override is checked
before anything is written or compiled (for sweeps: every job's), so bad input ends in one line
naming what was wrong and what is valid (exit status 2), never in a traceback from Hydra or JAX.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import json
import math
import os
import sys
from collections.abc import Collection, Sequence
from dataclasses import fields
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import hydra
import yaml
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

import agents
import envs
from jaxrl import distributed, presets, rundir, speedups
from jaxrl.config import (
    ConfigError,
    DistributedConfig,
    EnvConfig,
    RunConfig,
    did_you_mean,
    flatten,
    install_hint,
    suggest,
    to_dict,
)
from jaxrl.hyper import grid_points
from jaxrl.interrupt import STOPPED_BY_SIGNAL, exit_code
from jaxrl.multirun import failed_job_ends_sweep

EXIT_BAD_INPUT = 2
EXIT_FAILED = 1
CONFIG_MODULE = "jaxrl.conf"


def register_configs(env_ids: Collection[str], agent_names: Collection[str]) -> None:
    """The run config's schema and a node per env name and agent, so that `env=<any valid name>`
    composes without a YAML file per env (open-ended families too: `gym/<any Gymnasium id>`).

    Only the envs in `env_ids` and the agents in `agent_names` get their schema (`needed`): every
    node slows each of Hydra's look-ups, which copy the whole store. The others get an empty
    stand-in that keeps their names in `--help`'s lists and never replaces a schema stored
    before."""
    cs = ConfigStore.instance()
    base = _schema(RunConfig)
    # `grid.agent.<key>=[...]` adds keys (Hydra's struct mode would ask for `+grid.agent.<key>`);
    # which keys are valid is checked against the agent's HYPERPARAMETERS (jaxrl/hyper.py).
    OmegaConf.set_struct(base.grid.agent, False)
    cs.store(name="base_config", node=base)
    for name, entry in agents.REGISTRY.items():
        _store("schema/agent", name, _schema(entry.config) if name in agent_names else None)
    for env_id in dict.fromkeys((*envs.registered(), *env_ids)):
        # `brax/hopper` is option `hopper` of the nested group `env/brax`.
        group, _, name = f"env/{env_id}".rpartition("/")
        node = _schema(envs.config_for(env_id)) if env_id in env_ids else None
        if node is not None and "kwargs" in node:
            # `env.kwargs.<k>=v` adds a keyword as `+env.kwargs.<k>=v` does (the env checks them).
            OmegaConf.set_struct(node.kwargs, False)
        _store(group, name, node)


_STORED: set[str] = set()  # the ConfigStore paths that hold a schema, not a stand-in


def _store(group: str, name: str, node: DictConfig | None) -> None:
    """`node` as option `name` of `group`; None: a stand-in, unless a schema is there."""
    path = f"{group}/{name}"
    if node is None:
        if path in _STORED:
            return
        node = OmegaConf.create()
    else:
        _STORED.add(path)
    ConfigStore.instance().store(group=group, name=name, node=node)


def _schema(obj: Any) -> DictConfig:
    """A structured node Hydra may merge into: OmegaConf makes frozen dataclasses read-only, but
    ours are frozen only so that compiled code can close over them safely."""
    node = OmegaConf.structured(obj)

    def unfreeze(n: Any) -> None:
        OmegaConf.set_readonly(n, None)
        if isinstance(n, DictConfig):
            for key in n:
                child = n._get_node(key)
                if isinstance(child, DictConfig):
                    unfreeze(child)

    unfreeze(node)
    return node


def to_run_config(cfg: DictConfig) -> RunConfig:
    """The composed Hydra config as frozen dataclasses; range checks run in their __post_init__."""
    _refuse_added_keys(cfg)
    try:
        run_cfg = OmegaConf.to_object(cfg)
    except OmegaConfBaseException as e:
        cause = e.__cause__ or e.__context__
        if isinstance(cause, ConfigError):
            raise cause from None
        raise ConfigError(_omegaconf_message(e)) from None
    assert isinstance(run_cfg, RunConfig)
    grid_points(run_cfg.agent, run_cfg.grid.agent)  # a bad grid is bad input like any other
    return run_cfg


def _refuse_added_keys(cfg: DictConfig) -> None:
    """Keys `+key=value` added that the schema does not have (`+env.kwargs.g=1` on an env without
    kwargs): the same message as any unknown key, before OmegaConf trips over them."""
    for section in ("agent", "env"):
        node = cfg.get(section)
        schema = OmegaConf.get_type(node) if isinstance(node, DictConfig) else None
        if schema is None or not dataclasses.is_dataclass(schema):
            continue
        known = {f.name for f in fields(schema)}
        extra = [k for k in node if k not in known]
        if extra:
            chosen = [f"agent={cfg.agent.name}", f"env={cfg.env.id}"]  # the schemas they read
            raise ConfigError(unknown_key_message(f"{section}.{extra[0]}", chosen))


def compose(overrides: list[str]) -> RunConfig:
    """Compose and validate a run config from command-line style overrides (also the Python API)."""
    check_group_choices(overrides)
    try:
        cfg = _compose_node(with_preset(overrides))
    except (HydraException, OmegaConfBaseException) as e:
        raise ConfigError(_explain_composition_error(e, overrides)) from None
    return to_run_config(cfg)


def with_preset(overrides: list[str]) -> list[str]:
    """The settings of the preset that `overrides` choose (jaxrl/presets.py) before them, so that
    the user's own win, and `preset=` naming the one applied (`none` where there is none)."""
    agent, env_id = (_choices(g, overrides)[-1:] or [default_choice(g)] for g in ("agent", "env"))
    choice = next((v for k, v in reversed(_key_values(overrides)) if k == "preset"), presets.AUTO)
    preset = presets.choose(agent[0], env_id[0], choice)
    rest = [o for o in overrides if _key(o) != "preset"]
    return [
        *(preset.settings if preset else ()),
        *rest,
        f"preset={preset.name if preset else presets.NONE}",
    ]


def _compose_node(overrides: list[str]) -> DictConfig:
    """Hydra's composition of `config.yaml` with the overrides, schemas registered first (so it
    also works in a fresh process that only loads or resumes a run)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    register_configs(*needed(overrides))
    if GlobalHydra.instance().is_initialized():  # inside a Hydra job: its search path is ours
        return hydra_compose("config", overrides=overrides)
    with initialize_config_module(CONFIG_MODULE, version_base="1.3"):
        return hydra_compose("config", overrides=overrides)


def check_group_choices(overrides: list[str]) -> None:
    """Unknown `agent=`/`env=` names, said with the valid ones (Hydra's own message is a page),
    and grid values that are not a list."""
    for override in overrides:
        key, _, value = override.partition("=")
        key = key.lstrip("+~")
        if key.startswith("grid.agent.") and not value.strip().startswith("["):
            raise ConfigError(
                f"{override}: a grid takes a list of values, e.g. {key}=[{value or '1e-3,3e-4'}]"
            )
        if key == "agent" and value not in agents.REGISTRY:
            raise ConfigError(
                f"unknown agent '{value}'; {did_you_mean(value, agents.REGISTRY)}valid agents: "
                f"{', '.join(agents.REGISTRY)}"
            )
    for env_id in env_choices(overrides):
        envs.check_id(env_id)


def env_choices(overrides: Sequence[str]) -> list[str]:
    """The env names `env=` overrides choose, sweeps (`env=a,b`) included."""
    return _choices("env", overrides)


def needed(
    overrides: Sequence[str], everything: bool = False, defaults: bool = False
) -> tuple[list[str], list[str]]:
    """The envs and agents whose schemas composing `overrides` may use: those `env=` / `agent=`
    choose (sweeps included), else config.yaml's defaults; with `defaults`, those too (a `-m`
    multirun composes its own config with the swept groups at their defaults); with
    `everything`, every registered one (for what Hydra may compose beyond the overrides)."""
    env_ids = env_choices(overrides)
    try:
        agent_names = _choices("agent", overrides)
    except HydraException:  # `agent=glob(*)`: only Hydra's config loader can list it
        everything, agent_names = True, []
    if everything:
        return [*envs.registered(), *env_ids], list(agents.REGISTRY)
    if defaults or not env_ids:
        env_ids.append(default_choice("env"))
    if defaults or not agent_names:
        agent_names.append(default_choice("agent"))
    return env_ids, agent_names


def _choices(group: str, overrides: Sequence[str]) -> list[str]:
    """The options of `group` that its overrides choose, sweeps (`a,b`) expanded."""
    choices = []
    for override in overrides:
        key, sep, value = override.partition("=")
        if key.lstrip("+~") != group or not sep:
            continue
        try:
            (parsed,) = OverridesParser.create().parse_overrides([override])
        except HydraException:
            choices.append(value)
            continue
        if parsed.is_sweep_override():
            choices.extend(parsed.sweep_string_iterator())
        else:  # the value as written: `gym/my_module:MyEnv-v0` keeps its colon
            choices.append(str(parsed.value()))
    return choices


@functools.cache
def default_choice(group: str) -> str:
    """The option of `group` that config.yaml's defaults list picks, read there so that it is
    set in one place."""
    primary = OmegaConf.load(Path(__file__).parent / "conf" / "config.yaml")
    return next(d[group] for d in primary.defaults if isinstance(d, DictConfig) and group in d)


def _find_omegaconf_error(e: BaseException) -> OmegaConfBaseException | None:
    seen = e
    while seen is not None:
        if isinstance(seen, OmegaConfBaseException):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _explain_composition_error(e: BaseException, overrides: list[str]) -> str:
    inner = _find_omegaconf_error(e)
    if inner is None:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return f"cannot use overrides {overrides}: {first}"
    if isinstance(inner, ConfigAttributeError | ConfigKeyError):
        return unknown_key_message(inner.full_key or "", overrides)
    return _omegaconf_message(inner)


def unknown_key_message(full_key: str, overrides: list[str]) -> str:
    """The one line for a key no schema has: the hint, then the keys its section accepts."""
    parent = full_key.rpartition(".")[0]
    valid = ", ".join(valid_keys(parent, overrides))
    hint = key_hint(full_key, overrides)
    return f"unknown config key '{full_key}'; {hint}valid keys{_under(parent)}: {valid}"


def _under(parent: str) -> str:
    return f" under '{parent}'" if parent else ""


def _omegaconf_message(e: OmegaConfBaseException) -> str:
    full_key = getattr(e, "full_key", None) or "?"
    reason = str(getattr(e, "msg", e)).strip().splitlines()[0]
    return f"invalid value for '{full_key}': {reason}"


def key_hint(full_key: str, overrides: list[str]) -> str:
    """The hint for an unknown key: the same key at the top or in another section
    (`agent.num_seeds` is `num_seeds`, `agent.num_envs` is `env.num_envs`), else a near miss in
    its own section (`agent.learning_rte`), else ""."""
    parent, _, leaf = full_key.rpartition(".")
    top = [f.name for f in fields(RunConfig)]
    sections = [  # agent's schema is the chosen agent's; the others have a default factory
        f.name for f in fields(RunConfig) if f.name == "agent" or callable(f.default_factory)
    ]
    elsewhere = [leaf] if parent and leaf in top else []
    elsewhere += [
        f"{section}.{leaf}"
        for section in sections
        if section != parent and leaf in valid_keys(section, overrides)
    ]
    return suggest(elsewhere) or did_you_mean(leaf, valid_keys(parent, overrides))


def valid_keys(parent: str, overrides: list[str]) -> list[str]:
    """The keys a section accepts, read off the schema of the chosen agent (or the run config)."""
    node: Any = RunConfig
    if parent:
        head = parent.split(".")[0]
        if head == "agent":
            chosen = (o.split("=", 1)[1] for o in overrides if o.startswith("agent="))
            choice = next(chosen, default_choice("agent"))
            node = agents.REGISTRY[choice].config
        elif head == "env":
            choice = next(iter(env_choices(overrides)), None)
            node = EnvConfig
            if choice is not None:
                with contextlib.suppress(ConfigError):
                    node = type(envs.config_for(choice))
        else:
            node = {f.name: f for f in fields(RunConfig)}.get(head)
            node = (
                node.default_factory
                if node is not None and callable(node.default_factory)
                else None
            )
        if node is None:
            return [f.name for f in fields(RunConfig)]
    return [f.name for f in fields(node)]


def plan(overrides: list[str], run_dir: str | Path | None = None) -> tuple[RunConfig, Path | None]:
    """The validated config of a single run and its directory (None: a new one under `runs/`,
    made once the run is known to be valid). `resume=<dir>` continues that run with its own
    config; the keys in `RESUMABLE` may be overridden beside it."""
    # A bad switch value is refused before any work (each call raises ConfigError on one).
    speedups.enabled()
    speedups.timing_enabled()
    resume = next((v for k, v in _key_values(overrides) if k == "resume" and v), None)
    if resume is not None:
        others = [o for o in overrides if _key(o) != "resume"]
        cfg, path = resumed_config(resume, others), Path(resume).expanduser()
        rundir.refuse_early(path, resume=True, check_lock=not cfg.distributed.enabled)
        return cfg, path
    hydra_dir = [v for k, v in _key_values(overrides) if k == "hydra.run.dir"]
    others = [o for o in overrides if not _key(o).startswith(("hydra.", "hydra/"))]
    stray = [
        o
        for o in overrides
        if _key(o).startswith(("hydra.", "hydra/"))
        and o not in [f"hydra.run.dir={d}" for d in hydra_dir]
    ]
    if stray:
        raise ConfigError(
            f"{stray[0]}: Hydra's settings take effect with -m (multirun) only, except "
            f"hydra.run.dir; a single run's directory is log.dir"
        )
    cfg = compose(others)
    chosen = run_dir or cfg.log.dir or (hydra_dir[-1] if hydra_dir else None)
    if cfg.distributed.enabled and not chosen:
        raise ConfigError(
            f"distributed.coordinator={cfg.distributed.coordinator}: a distributed run needs "
            f"log.dir=<a directory every process sees> (each would make its own runs/<time>)"
        )
    if chosen:
        path = Path(chosen).expanduser()
        rundir.refuse_early(path, resume=False, check_lock=not cfg.distributed.enabled)
        cfg = dataclasses.replace(cfg, log=dataclasses.replace(cfg.log, dir=str(path)))
        return cfg, path
    return cfg, None


# What a resumed run may change: how long it goes on and what it writes, never what it learns;
# and how its processes are launched (`distributed.*`, taken from the command line alone).
LAUNCH_KEYS = "distributed."
RESUMABLE = (
    "budget.env_steps",
    "budget.target_return",
    "eval.every",
    "eval.per_run",
    "eval.episodes",
    "log.progress",
    "log.tensorboard",
    "checkpoint.every",
    "checkpoint.min_seconds",
    "checkpoint.call_seconds",
    "checkpoint.keep",
    "video",
)


def resumed_config(
    run_dir: str | Path, overrides: Sequence[str] = (), origin: str | None = None
) -> RunConfig:
    """The config a run was started with (its `config.json`), with `overrides` of `RESUMABLE`
    keys applied: a resumed run continues the same training. Refusals start with `origin`, what
    named the run (default `resume=<run_dir>`; `agent.expert=<dir>` when a config key did)."""
    run_dir = Path(run_dir).expanduser()
    origin = origin or f"resume={run_dir}"
    path = run_dir / "config.json"
    if not path.exists():
        raise ConfigError(f"{origin}: no config.json there (is it a jaxrl run directory?)")
    try:
        saved = json.loads(path.read_text())
        name, env_id = saved["agent"]["name"], saved["env"]["id"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"{origin}: config.json is not readable: {e}") from None
    changed = [_key(o).lstrip("+~") for o in overrides]
    for key in changed:
        if key not in RESUMABLE and not key.startswith(LAUNCH_KEYS):
            raise ConfigError(
                f"{origin}: '{key}' cannot change when a run continues (it would not be "
                f"the same run); keys that can: {', '.join(RESUMABLE)}, {LAUNCH_KEYS}*"
            )
    # The processes of the launch that wrote config.json are gone: this launch's are given here.
    saved["distributed"] = to_dict(DistributedConfig())
    if changed:
        fresh = to_dict(compose([f"agent={name}", f"env={env_id}", *overrides]))
        for key in changed:
            section, _, leaf = key.rpartition(".")
            source, target = (fresh, saved) if not section else (fresh[section], saved[section])
            target[leaf] = source[leaf]
    saved["resume"] = str(run_dir)
    saved["log"]["dir"] = str(run_dir)
    return config_from_dict(saved, origin)


def with_env_options(cfg: RunConfig, options: Sequence[str], origin: str) -> RunConfig:
    """`cfg` with the `env.*` options of `options` (`env.max_episode_steps=1000`,
    `env.repeat_action_probability=0`, `+env.kwargs.<k>=…`) set as a fresh run of its agent on
    its env would take them, checked the same way: how `jaxrl.evaluate` scores a run under other
    env settings. The rest of `cfg` is kept as it is."""
    saved = to_dict(cfg)
    fresh = to_dict(compose([f"agent={cfg.agent.name}", f"env={cfg.env.id}", *options]))
    for option in options:
        *parents, leaf = _key(option).split(".")
        source, target = fresh, saved
        for part in parents:
            source, target = source[part], target.setdefault(part, {})
        target[leaf] = source[leaf]
    return config_from_dict(saved, origin)


def continued_job(cfg: RunConfig, run_dir: Path) -> RunConfig:
    """A `-m` job whose directory holds a run already: that run continued (`resume=`) when it
    was started with this job's config — a SLURM job requeued after preemption or its time
    limit, or the same sweep launched again into its `hydra.sweep.dir` — with this job's values
    of the `RESUMABLE` keys (a larger budget goes on training). A different run there is refused
    in one line, as a single run's used `log.dir` is."""
    data = to_dict(resumed_config(run_dir))
    mine, theirs = flatten(to_dict(cfg)), flatten(data)
    ignored = {*RESUMABLE, "resume", "log.dir"}
    differing = [
        k
        for k in dict.fromkeys([*mine, *theirs])
        if k not in ignored and not k.startswith(LAUNCH_KEYS) and mine.get(k) != theirs.get(k)
    ]
    if differing:
        raise ConfigError(
            f"log.dir={run_dir} already holds another run (it differs in "
            f"{', '.join(differing[:4])}); launch the sweep into another hydra.sweep.dir"
        )
    changes = {key: mine[key] for key in RESUMABLE if mine.get(key) != theirs.get(key)}
    for key, value in changes.items():
        section, _, leaf = key.rpartition(".")
        (data[section] if section else data)[leaf] = value
    return config_from_dict(data, f"resume={run_dir}")


def config_from_dict(data: dict[str, Any], origin: str) -> RunConfig:
    """A `RunConfig` from its `to_dict` form (a run's config.json), checked like any other."""
    try:
        agent_cls = agents.REGISTRY[data["agent"]["name"]].config
    except KeyError:
        raise ConfigError(
            f"{origin}: the run's agent '{data['agent'].get('name')}' is not one of this jaxrl's: "
            f"{', '.join(agents.REGISTRY)}"
        ) from None
    env_cls = type(envs.config_for(data["env"]["id"]))
    nested = {"agent": _dataclass_from(agent_cls, data["agent"], origin)}
    nested["env"] = _dataclass_from(env_cls, data["env"], origin)
    return _dataclass_from(RunConfig, {**data, **nested}, origin)


def _dataclass_from(cls: type, data: dict[str, Any], origin: str) -> Any:
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ConfigError(
            f"{origin}: config.json has keys this jaxrl does not know ({', '.join(unknown)}): "
            f"it was written by another version"
        )
    values = {}
    for name, value in data.items():
        factory = known[name].default_factory
        if isinstance(value, dict) and dataclasses.is_dataclass(factory):
            value = _dataclass_from(factory, value, origin)
        values[name] = value
    return cls(**values)


def _key(override: str) -> str:
    return override.partition("=")[0].lstrip("+~")


def _key_values(overrides: Sequence[str]) -> list[tuple[str, str]]:
    return [(_key(o), o.partition("=")[2]) for o in overrides]


def enable_compilation_cache(min_compile_seconds: float = 0.5) -> None:
    """Persistent XLA cache: a second run of the same config skips most of its compile time.
    Programs that compiled faster than `min_compile_seconds` are not kept (a CLI run gains
    nothing measurable from keeping them; the test suite keeps all)."""
    import jax

    from jaxrl.autotune import default_cache_dir

    jax.config.update("jax_compilation_cache_dir", str(default_cache_dir()))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", min_compile_seconds)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def execute(cfg: RunConfig, run_dir: Path | None) -> int:
    """Train, print the one-line result, and return the exit status."""
    # Imported here: JAX comes with them, and bad input is answered without it.
    from envs.host import HostEnvError
    from jaxrl.loop import Interrupted, train

    try:
        result = train(cfg, run_dir)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (HostEnvError, distributed.DistributedError) as e:  # the last checkpoint is kept
        print(f"error: {e}", file=sys.stderr)
        return EXIT_FAILED
    except Interrupted as e:
        print(str(e), file=sys.stderr)
        return exit_code(e.signum)
    s = result.summary
    code = 0 if result.status == "completed" else EXIT_FAILED
    if result.stop_signal is not None:
        code = exit_code(result.stop_signal)
    if not distributed.is_primary():  # process 0 says how the run ended
        return code
    # Envs whose episodes report success (the hybrid-action ones) give its last rate too.
    success = ""
    if "final_eval_success_rate" in s:
        success = f", success {format_rate(s['final_eval_success_rate'])}"
    print(
        f"{result.status}: {s['agent']} on {s['env']} | final eval return "
        f"{format_return(s['final_eval_return'])} (best {format_return(s['best_eval_return'])})"
        f"{success} | {s['env_steps']:,} env steps | compile "
        f"{s['compile_seconds']:.1f}s, run {s['run_seconds']:.1f}s, "
        f"{s['env_steps_per_second']:,.0f} steps/s | {result.run_dir}"
        + (f" | videos in {Path(s['videos'][0]).parent}" if s.get("videos") else "")
    )
    return code


def format_return(value: float | None) -> str:
    """Two decimals below 10 in size, where one would hide what separates returns on a [0, 1]
    scale (Platform's 0.96 from its goal's 1.0); one above."""
    if value is None:
        return "n/a"
    return f"{value:.2f}" if abs(value) < 10 else f"{value:.1f}"


def format_rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def _hydra_job(cfg: DictConfig) -> float:
    """One job of a `-m` sweep (or a run with Hydra's own flags): its directory is Hydra's. It
    returns the run's `sweep_objective` (jaxrl.sweep.objective), which Optuna's sweeper
    optimises; the basic sweeper ignores it. A run that fails returns NaN and the sweep goes on
    (jaxrl.multirun), except under Optuna's sweeper and on Ctrl-C."""
    enable_compilation_cache()  # a launcher's job may be a process of its own
    try:
        # Composed again from the job's overrides, with the preset they choose (`with_preset`).
        run_cfg = compose(list(HydraConfig.get().overrides.task))
        run_dir = Path(run_cfg.log.dir or HydraConfig.get().runtime.output_dir)
        if (run_dir / "config.json").is_file():
            run_cfg = continued_job(run_cfg, run_dir)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    code = execute(run_cfg, run_dir)
    if code in STOPPED_BY_SIGNAL or (code and failed_job_ends_sweep()):
        sys.exit(code)
    if code:
        return math.nan
    from jaxrl.sweep import objective

    return objective(run_dir, os.environ.get(OBJECTIVE_ENV, "final"))


def _submitit_failure(e: Exception) -> str:
    """submitit's report of a job that died without a result (killed, out of memory, past its
    time limit), in one line: which job, its state, the last line of its error stream."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    last = next((line for line in reversed(lines) if not line.startswith("---")), "")
    return f"{' '.join(lines[:2])}; its error stream ended: {last}"


# Hydra's flags: those that print and exit, those that take a value, and multirun.
# Flags that name another primary config or config directory (each takes a value).
CONFIG_SOURCE_FLAGS = ("--config-path", "-cp", "--config-name", "-cn", "--config-dir", "-cd")
SHELL_COMPLETION_FLAGS = ("--shell-completion", "-sc")
HYDRA_INFO_FLAGS = (
    "--help",
    "-h",
    "--hydra-help",
    "--info",
    "-i",
    "--version",
    *SHELL_COMPLETION_FLAGS,
)
HYDRA_VALUE_FLAGS = ("--cfg", "-c", "--package", "-p", *CONFIG_SOURCE_FLAGS)
MULTIRUN_FLAGS = ("-m", "--multirun")
# Flags, and overrides of keys starting with these, after which what Hydra composes cannot be
# read off the overrides: another primary config (its own defaults), a shell-completion query
# (overrides inside it), a sweeper's own search space (`hydra.sweeper.params.agent=...`), more
# config directories.
EVERY_OPTION_KEYS = ("hydra.sweeper.params", "hydra.searchpath")
EVERY_OPTION_FLAGS = (*CONFIG_SOURCE_FLAGS, *SHELL_COMPLETION_FLAGS)
MAX_VALIDATED_JOBS = 1000
# `sweep_objective=` reaches every job through the environment, in a launcher's processes too.
OBJECTIVE_ENV = "JAXRL_SWEEP_OBJECTIVE"


def split_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(Hydra flags with their values, overrides)."""
    flags, overrides = [], []
    tokens = iter(argv)
    for token in tokens:
        if token.startswith("-"):
            flags.append(token)
            if token in HYDRA_VALUE_FLAGS:
                flags.append(next(tokens, ""))
        else:
            overrides.append(token)
    return flags, overrides


def validate_sweep(overrides: list[str]) -> None:
    """Every job of a basic `-m` sweep, composed and checked before the first one runs (an
    interval, which a sweeper such as Optuna's samples, at both of its ends)."""
    parsed = OverridesParser.create().parse_overrides(overrides)
    choices: list[list[str]] = []
    for override, item in zip(overrides, parsed, strict=True):
        key = _key(override)
        if key == "resume":
            raise ConfigError("resume= continues one run; it cannot be swept with -m")
        if key.startswith(LAUNCH_KEYS):
            raise ConfigError(
                f"{override}: distributed.* trains one run across processes; it cannot be "
                f"swept with -m"
            )
        if key == "log.dir":
            raise ConfigError(
                "log.dir names one run directory; with -m each job gets its own under "
                "hydra.sweep.dir"
            )
        optuna = key == "hydra/sweeper" and item.value() == "optuna"
        if optuna and not find_spec("hydra_plugins.hydra_optuna_sweeper"):
            raise ConfigError(
                f"hydra/sweeper=optuna needs Hydra's Optuna sweeper: {install_hint('optuna')}"
            )
        if key.startswith(("hydra.", "hydra/")):
            continue
        if item.is_interval_sweep():  # the sweeper samples it (Optuna's): its ends are checked
            values = [str(item.value().start), str(item.value().end)]
        else:
            values = list(item.sweep_string_iterator()) if item.is_sweep_override() else None
        prefix = override.partition("=")[0]
        choices.append([f"{prefix}={v}" for v in values] if values else [override])
    jobs = itertools.islice(itertools.product(*choices), MAX_VALIDATED_JOBS)
    for job in jobs:
        compose(list(job))


def take_sweep_objective(overrides: list[str], multirun: bool) -> list[str]:
    """`sweep_objective=final|best|auc` (jaxrl.sweep.objective) is what each `-m` job returns to
    its sweeper, not a run setting: it leaves the overrides for the environment of the jobs."""
    chosen = [value for key, value in _key_values(overrides) if key == "sweep_objective"]
    if not chosen:
        return overrides
    from jaxrl.sweep import OBJECTIVES

    if not multirun:
        raise ConfigError(
            "sweep_objective= is what each -m job returns to its sweeper (hydra/sweeper=optuna); "
            "a single run has none"
        )
    if chosen[-1] not in OBJECTIVES:
        raise ConfigError(
            f"sweep_objective={chosen[-1]}: valid objectives: {', '.join(OBJECTIVES)}"
        )
    os.environ[OBJECTIVE_ENV] = chosen[-1]
    return [o for o in overrides if _key(o) != "sweep_objective"]


HELP_FLAGS = ("--help", "-h")


def help_text(overrides: list[str]) -> str:
    """`--help`: the groups to choose from and the config the overrides compose. Written here,
    not by Hydra, whose help lists each group by composing once per group (a copy of the whole
    config store each time: most of `--help`'s second)."""
    env_names = [*envs.registered(), *envs.OPEN_ENDED]
    config = yaml.safe_dump(to_dict(compose(overrides)), sort_keys=False)
    return "\n".join(
        [
            "python -m jaxrl.run [overrides] [-m]: train an agent on an env (jaxrl).",
            "",
            "== Choices ==",
            f"agent: {', '.join(agents.REGISTRY)}",
            f"env: {', '.join(env_names)}",
            "",
            "== Config ==",
            "Override anything in the config (foo.bar=value); -m sweeps comma-separated values,",
            "grid.agent.<key>=[v1,v2] trains a grid in one program; --hydra-help: Hydra's flags.",
            "",
            "== A trained run ==",
            "python -m jaxrl.run resume=<run dir>: continue it",
            "python -m jaxrl.evaluate <run dir> episodes=100: score it on fresh episodes",
            "python -m jaxrl.sweep <run dir>: its seeds' and grid points' report",
            "",
            config,
        ]
    )


def main(argv: list[str] | None = None) -> None:
    """`python -m jaxrl.run [overrides]`: exits with 0 (completed), 1 (failed: NaN, env error,
    write error), 2 (bad input), or 128 + the signal's number when a signal stopped the run
    with a checkpoint (130 Ctrl-C, 143 SIGTERM)."""
    argv = sys.argv[1:] if argv is None else argv
    flags, overrides = split_argv(argv)
    flag_names = [f.partition("=")[0] for f in flags]
    info = any(f in HYDRA_INFO_FLAGS for f in flag_names)
    multirun = any(f in MULTIRUN_FLAGS for f in flags)
    every_option = any(f in EVERY_OPTION_FLAGS for f in flag_names) or any(
        _key(o).startswith(EVERY_OPTION_KEYS) for o in overrides
    )
    try:
        overrides = take_sweep_objective(overrides, multirun=bool(set(flags) & {*MULTIRUN_FLAGS}))
        if flag_names and all(f in HELP_FLAGS for f in flag_names):
            try:
                print(help_text(overrides), flush=True)
            except BrokenPipeError:  # a reader that stopped early (`| head`) is no error
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(0)
        if not flags:
            cfg, run_dir = plan(overrides)  # first: bad input is answered without importing JAX
            if cfg.distributed.enabled and distributed.WORKER_ENV not in os.environ:
                assert run_dir is not None  # `plan` asks a distributed run for its directory
                sys.exit(distributed.supervise(argv, cfg.distributed, run_dir))
            if distributed.WORKER_ENV in os.environ:
                distributed.quiet_native_stdout()
            enable_compilation_cache()
            sys.exit(execute(cfg, run_dir))
        if not info and multirun:
            validate_sweep(overrides)
        elif not info:  # --cfg job and the like: Hydra prints the config the overrides compose
            compose([o for o in overrides if not _key(o).startswith(("hydra.", "hydra/"))])
            overrides = with_preset(overrides)  # ... with their preset, as a run would
        # Hydra composes from here on (help, each job of a sweep, even past MAX_VALIDATED_JOBS).
        register_configs(*needed(overrides, everything=every_option, defaults=multirun))
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except HydraException as e:
        print(f"error: cannot parse overrides: {_first_line(e)}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    if not info and not {"--cfg", "-c"} & set(flag_names):  # these print, compile nothing
        enable_compilation_cache()
    sys.argv = [sys.argv[0], *flags, *overrides]  # Hydra's parser wants the overrides together
    if multirun:  # a launcher's error reaches here rather than Hydra's traceback printer
        os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        _hydra_job()
    except Exception as e:
        if not type(e).__module__.startswith("submitit"):
            raise
        print(f"error: {_submitit_failure(e)}", file=sys.stderr)
        sys.exit(EXIT_FAILED)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
