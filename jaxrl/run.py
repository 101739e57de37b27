"""The command line: `python -m jaxrl.run agent=es env=Pendulum-v1 seed=3 agent.sigma=0.05`.

Overrides are checked before Hydra starts the job, so bad input ends in one line naming what was
wrong and what is valid (exit status 2), never in a traceback from deep inside Hydra or JAX.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import hydra
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

import agents
import envs
from envs.host import HostEnvError
from jaxrl.config import ConfigError, EnvConfig, RunConfig

EXIT_BAD_INPUT = 2
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130
CONFIG_MODULE = "jaxrl.conf"
# Overrides that steer Hydra itself, not the run config.
HYDRA_FLAGS = ("-m", "--multirun", "--cfg", "--help", "-h", "--hydra-help", "--info", "-c", "-p")


def register_configs(env_ids: Sequence[str] = ()) -> None:
    """Schemas and one env node per registered env name and per name in `env_ids` (open-ended
    families: `gym/<any Gymnasium id>`, `ALE/<Game>-v5`), so `env=<any valid name>` composes
    without a YAML file per env (DESIGN.md §6)."""
    cs = ConfigStore.instance()
    cs.store(name="base_config", node=_schema(RunConfig))
    for name, entry in agents.REGISTRY.items():
        cs.store(group="schema/agent", name=name, node=_schema(entry.config))
    for env_id in dict.fromkeys((*envs.registered(), *env_ids)):
        # `brax/hopper` is option `hopper` of the nested group `env/brax`.
        group, _, name = f"env/{env_id}".rpartition("/")
        cs.store(group=group, name=name, node=_schema(envs.config_for(env_id)))


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
    try:
        run_cfg = OmegaConf.to_object(cfg)
    except OmegaConfBaseException as e:
        cause = e.__cause__ or e.__context__
        if isinstance(cause, ConfigError):
            raise cause from None
        raise ConfigError(_omegaconf_message(e)) from None
    assert isinstance(run_cfg, RunConfig)
    return run_cfg


def compose(overrides: list[str]) -> RunConfig:
    """Compose and validate a run config from command-line style overrides (also the Python API)."""
    check_group_choices(overrides)
    try:
        cfg = _compose_node(overrides)
    except (HydraException, OmegaConfBaseException) as e:
        raise ConfigError(_explain_composition_error(e, overrides)) from None
    return to_run_config(cfg)


def _compose_node(overrides: list[str]) -> DictConfig:
    """Hydra's composition of `config.yaml` with the overrides, schemas registered first (so it
    also works in a fresh process that only loads or resumes a run)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    register_configs(env_choices(overrides))
    with initialize_config_module(CONFIG_MODULE, version_base="1.3"):
        return hydra_compose("config", overrides=overrides)


def check_group_choices(overrides: list[str]) -> None:
    """Unknown `agent=`/`env=` names, said with the valid ones (Hydra's own message is a page)."""
    for override in overrides:
        key, _, value = override.partition("=")
        key = key.lstrip("+~")
        if key == "agent" and value not in agents.REGISTRY:
            raise ConfigError(
                f"unknown agent '{value}'; valid agents: {', '.join(agents.REGISTRY)}"
            )
    for env_id in env_choices(overrides):
        envs.check_id(env_id)


def env_choices(overrides: Sequence[str]) -> list[str]:
    """The env names `env=` overrides choose, sweeps (`env=a,b`) included."""
    choices = []
    for override in overrides:
        key, sep, value = override.partition("=")
        if key.lstrip("+~") != "env" or not sep:
            continue
        try:
            (parsed,) = OverridesParser.create().parse_overrides([override])
        except HydraException:
            choices.append(value)
            continue
        if parsed.is_sweep_override():
            choices.extend(parsed.sweep_string_iterator())
        else:
            choices.append(parsed.get_value_element_as_str())
    return choices


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
        full_key = inner.full_key or ""
        parent = full_key.rpartition(".")[0]
        valid = ", ".join(valid_keys(parent, overrides))
        return f"unknown config key '{full_key}'; valid keys{_under(parent)}: {valid}"
    return _omegaconf_message(inner)


def _under(parent: str) -> str:
    return f" under '{parent}'" if parent else ""


def _omegaconf_message(e: OmegaConfBaseException) -> str:
    full_key = getattr(e, "full_key", None) or "?"
    reason = str(getattr(e, "msg", e)).strip().splitlines()[0]
    return f"invalid value for '{full_key}': {reason}"


def valid_keys(parent: str, overrides: list[str]) -> list[str]:
    """The keys a section accepts, read off the schema of the chosen agent (or the run config)."""
    node: Any = RunConfig
    if parent:
        head = parent.split(".")[0]
        if head == "agent":
            choice = next((o.split("=", 1)[1] for o in overrides if o.startswith("agent=")), "es")
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


def resolve_run(cfg: RunConfig, default_dir: Path | None = None) -> tuple[RunConfig, Path]:
    """The config and directory to train: a resumed run's own, else `log.dir`, else the default
    (Hydra's run dir from the CLI)."""
    if cfg.resume:
        return resumed_config(cfg.resume), Path(cfg.resume)
    if cfg.log.dir:
        return cfg, Path(cfg.log.dir)
    return cfg, default_dir or Path(HydraConfig.get().runtime.output_dir)


def resumed_config(run_dir: str) -> RunConfig:
    """The config a run was started with, to continue it exactly."""
    path = Path(run_dir) / "config.json"
    if not path.exists():
        raise ConfigError(f"resume={run_dir}: no config.json there (is it a jaxrl run directory?)")
    saved = json.loads(path.read_text())
    saved["resume"] = str(run_dir)
    saved["log"]["dir"] = str(run_dir)
    overrides = [f"agent={saved['agent']['name']}", f"env={saved['env']['id']}"]
    return to_run_config(OmegaConf.merge(_compose_node(overrides), saved))


def enable_compilation_cache() -> None:
    """Persistent XLA cache: a second run of the same config skips most of its compile time."""
    import jax

    cache_dir = os.environ.get("JAXRL_CACHE_DIR", str(Path.home() / ".cache" / "jaxrl" / "xla"))
    jax.config.update("jax_compilation_cache_dir", cache_dir)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def _execute(run_cfg: RunConfig, run_dir: Path) -> int:
    from jaxrl.loop import train

    result = train(run_cfg, run_dir)
    s = result.summary
    print(
        f"{result.status}: {s['agent']} on {s['env']} | final eval return "
        f"{_return(s['final_eval_return'])} (best {_return(s['best_eval_return'])}) | "
        f"{s['env_steps']:,} env steps | compile "
        f"{s['compile_seconds']:.1f}s, run {s['run_seconds']:.1f}s, "
        f"{s['env_steps_per_second']:,.0f} steps/s | {result.run_dir}"
        + (f" | videos in {Path(s['videos'][0]).parent}" if s.get("videos") else "")
    )
    return {"completed": 0, "interrupted": EXIT_INTERRUPTED}.get(result.status, EXIT_FAILED)


def _return(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> None:
    try:
        code = _execute(*resolve_run(to_run_config(cfg)))
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        code = EXIT_BAD_INPUT
    except HostEnvError as e:  # the env's own message; the last checkpoint is kept
        print(f"error: {e}", file=sys.stderr)
        code = EXIT_FAILED
    if code:
        sys.exit(code)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    hydra_only = any(a in HYDRA_FLAGS for a in argv)
    run_overrides = [a for a in argv if not a.startswith(("hydra.", "hydra/", "-"))]
    if not hydra_only:
        try:
            OverridesParser.create().parse_overrides(run_overrides)
            compose(run_overrides)
        except ConfigError as e:
            print(f"error: {e}", file=sys.stderr)
            sys.exit(EXIT_BAD_INPUT)
        except HydraException as e:
            print(
                f"error: cannot parse overrides: {str(e).strip().splitlines()[0]}", file=sys.stderr
            )
            sys.exit(EXIT_BAD_INPUT)
    else:
        try:
            for env_id in env_choices(run_overrides):
                envs.check_id(env_id)
        except ConfigError as e:
            print(f"error: {e}", file=sys.stderr)
            sys.exit(EXIT_BAD_INPUT)
        register_configs(env_choices(run_overrides))
    enable_compilation_cache()
    sys.argv = [sys.argv[0], *argv]
    _hydra_main()


if __name__ == "__main__":
    main()
