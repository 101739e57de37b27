"""Start-up imports only what the command at hand uses: an agent module pulls in JAX and its own
machinery (its settings, in `agents/configs.py`, import neither), an env family its simulator
(gymnax without the plotting libraries its `__init__` imports), and every Hydra node slows
`--help`. Each check runs in a fresh interpreter, as a user's command does."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import REPO
from hydra.core.config_store import ConfigStore

import agents
from jaxrl import cli
from jaxrl.config import to_dict
from jaxrl.rundir import CHECKPOINTS, claim

ENV_FAMILIES = ("envs.gymnax_envs", "envs.brax_envs", "envs.gym_pool", "envs.atari")
SIMULATORS = ("gymnax", "brax", "gymnasium", "ale_py", "pybullet")
PLOTTING = ("seaborn", "matplotlib", "scipy.stats", "pandas")  # imported by gymnax's `__init__`


def modules_after(code: str, must_succeed: bool = False) -> list[str]:
    """Every module a fresh interpreter has imported once `code` ran (or exited)."""
    return _run_and_list_modules(code, must_succeed)[0]


def _run_and_list_modules(code: str, must_succeed: bool) -> tuple[list[str], str, int]:
    """The modules imported, the rest of stderr, and the exit status."""
    script = "\n".join(
        [
            "import atexit, json, sys",
            "atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.stderr))",
            code,
        ]
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env
    )
    assert result.returncode == 0 or not must_succeed, result.stderr
    *said, modules = result.stderr.strip().splitlines()
    return json.loads(modules), "\n".join(said), result.returncode


def cli_modules(*args: str) -> list[str]:
    """The modules `python -m jaxrl.run <args>` imports (run_module: the same entry point)."""
    return cli_refusal(*args)[0]


def cli_refusal(*args: str) -> tuple[list[str], str, int]:
    """`cli_modules`, with what the command printed on stderr and its exit status."""
    return _run_and_list_modules(
        f"import runpy; sys.argv = ['jaxrl.run', *{list(args)!r}]; "
        "runpy.run_module('jaxrl.run', run_name='__main__', alter_sys=True)",
        must_succeed=False,
    )


def of_agents(modules: list[str]) -> list[str]:
    return [m for m in modules if m.startswith("agents.")]


def test_looking_up_an_agent_imports_only_its_module() -> None:
    modules = modules_after("import jaxrl, agents; assert 'jax' not in sys.modules")
    assert of_agents(modules) == [] and "jax" not in modules
    modules = modules_after("import jaxrl, agents; agents.REGISTRY['ppo'].config()")
    assert of_agents(modules) == ["agents.configs"] and "jax" not in modules
    modules = modules_after("import jaxrl, agents; agents.REGISTRY['ppo'].make")
    assert of_agents(modules) == ["agents.configs", "agents.ppo"]
    assert not [m for m in modules if m.startswith(ENV_FAMILIES)]


def test_help_imports_no_agent_module_no_env_family_and_no_jax() -> None:
    """`--help` prints the default config, whose agent section is the default agent's schema:
    its settings, not its module."""
    modules = cli_modules("--help")
    assert of_agents(modules) == ["agents.configs"] and "jax" not in modules
    assert not [m for m in modules if m.startswith(ENV_FAMILIES) or m in SIMULATORS]


def test_bad_input_is_answered_without_jax() -> None:
    for bad in ("agent=nope", "env=Nope-v0"):
        modules = cli_modules(bad)
        assert "jax" not in modules and not of_agents(modules), bad
    # An env setting, a misspelt host env: checked by envs.configs and envs.host_ids alone.
    for bad in (
        ["env=gym/CartPole-v1", "env.pool=foo"],
        ["env=gym/CartPol-v1"],
        ["env=ALE/Pong-v5", "env.frame_skip=0"],
        ["env=bullet/CartPole-v0", "env.timeout=0"],
        ["env=brax/hopper", "env.backend=foo"],
        ["env=HardMove-v0", "+env.kwargs.num_actuators=99"],
    ):
        modules = cli_modules("agent=ppo", *bad)
        assert "jax" not in modules and "brax" not in modules, bad
        assert not [m for m in modules if m in ("envs.host", "envs.atari", "envs.gym_pool")], bad
    # A setting the agent's config refuses: checked by its settings alone.
    for bad in (["agent=ppo", "agent.gamma=1.5"], ["agent=dqn", "agent.frame_storage=x"]):
        modules = cli_modules(*bad)
        assert "jax" not in modules and of_agents(modules) == ["agents.configs"], bad


def test_a_run_directory_that_cannot_be_used_is_refused_without_jax(tmp_path: Path) -> None:
    """A `log.dir` that is a file, holds a run or is being written by a live run (here: this
    process holds its lock), and a `resume=` of a directory being written, are refused when the
    command is read, before the env and agent (and JAX) are built."""
    a_file, used, live = tmp_path / "file", tmp_path / "used", tmp_path / "live"
    a_file.write_text("")
    (used / CHECKPOINTS / "128").mkdir(parents=True)
    live.mkdir()
    (live / "config.json").write_text(
        json.dumps(to_dict(cli.compose(["agent=ppo", f"log.dir={live}"])))
    )
    with claim(live, resume=True):
        for args, said in (
            (["agent=ppo", f"log.dir={a_file}"], "cannot be a run directory: File exists"),
            (["agent=ppo", f"log.dir={a_file}/run"], "cannot be a run directory: Not a directory"),
            (["agent=ppo", f"log.dir={used}"], "already holds a run; continue it with resume="),
            (["agent=ppo", f"log.dir={live}"], f"another run (process {os.getpid()}) is writing"),
            ([f"resume={live}"], f"another run (process {os.getpid()}) is writing"),
        ):
            modules, stderr, status = cli_refusal(*args)
            assert status == 2 and stderr.startswith("error: ") and said in stderr, (args, stderr)
            assert "jax" not in modules and of_agents(modules) == ["agents.configs"], args


def test_a_composition_imports_no_agent_module() -> None:
    modules = cli_modules("--cfg", "job", "agent=ppo")
    assert of_agents(modules) == ["agents.configs"] and "jax" not in modules


def test_a_sweep_registers_every_agent_it_names_and_the_default() -> None:
    """Hydra composes the jobs of a sweep after validation, which stops at MAX_VALIDATED_JOBS:
    every agent the sweep names has its schema all the same, and so has the default agent, with
    which Hydra composes the multirun's own config."""
    modules = modules_after(
        "from hydra.core.config_store import ConfigStore\n"
        "from jaxrl import cli\n"
        "cli.MAX_VALIDATED_JOBS = 1\n"
        "cli._hydra_job = lambda: None\n"
        "cli.main(['-m', 'agent=ppo,a2c'])\n"
        "assert 'gae_lambda' in ConfigStore.instance().load('schema/agent/a2c.yaml').node"
    )
    assert of_agents(modules) == ["agents.configs"]


def test_needed_reads_the_choices_off_the_overrides() -> None:
    assert cli.needed(["seed=3"]) == (["CartPole-v1"], ["es"])  # config.yaml's defaults
    assert cli.needed(["agent=ppo,a2c", "env=Pendulum-v1"]) == (["Pendulum-v1"], ["ppo", "a2c"])
    assert cli.needed(["agent=ppo,a2c"], defaults=True) == (["CartPole-v1"], ["ppo", "a2c", "es"])
    env_ids, agent_names = cli.needed(["agent=glob(*)"])  # only Hydra can list it: all of them
    assert agent_names == list(agents.REGISTRY) and "brax/ant" in env_ids


def test_a_stand_in_never_replaces_a_schema() -> None:
    cli.register_configs(["Pendulum-v1"], ["ppo"])
    cli.register_configs(["CartPole-v1"], ["es"])
    store = ConfigStore.instance()
    assert "clip_eps" in store.load("schema/agent/ppo.yaml").node
    assert store.load("env/Pendulum-v1.yaml").node.id == "Pendulum-v1"
    ppo = cli.compose(["agent=ppo", "env=Pendulum-v1", "preset=none"]).agent
    assert ppo == agents.REGISTRY["ppo"].config()


def test_help_lists_the_choices_and_prints_the_composed_config() -> None:
    """`--help` is ours (Hydra's composes once per config group): every agent and env family is
    listed, the config shown is the one the overrides compose, and a bad override is refused
    as a run would refuse it."""
    from cli_helpers import cli

    result = cli("agent=ppo", "agent.ent_coef=0.05", "--help")
    assert result.returncode == 0, result.stderr
    choices = dict(
        line.split(": ", 1)
        for line in result.stdout.splitlines()
        if line.startswith(("agent: ", "env: "))
    )
    assert choices["agent"].split(", ") == list(agents.REGISTRY)
    for name in ("CartPole-v1", "brax/hopper", "bullet/RaceCar-v0", "gym/<any Gymnasium id>"):
        assert name in choices["env"].split(", ")
    assert "  name: ppo\n" in result.stdout and "  ent_coef: 0.05\n" in result.stdout
    # what to do with a trained run: continue, score, report
    assert "python -m jaxrl.evaluate <run dir> episodes=100: score it" in result.stdout
    result = cli("agent.ent_coef=-1", "agent=ppo", "-h")
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: agent.ent_coef"), result.stderr


def test_a_gymnax_env_is_built_without_gymnaxs_plotting_libraries_which_load_when_used() -> None:
    """gymnax's Pong and four-rooms import seaborn and matplotlib.pyplot for their renderers:
    they are left out of building a gymnax env, and load when such a renderer reads them."""
    modules = modules_after(
        "from envs.gymnax_envs import make_gymnax\n"
        "make_gymnax('CartPole-v1', 2, None)\n"
        f"plotting = [m for m in sys.modules if m.startswith({PLOTTING!r})]\n"
        "from gymnax.environments.misc import pong\n"
        "palette = pong.sns.color_palette('cubehelix', 3)\n"
        "cmap = pong.colors.ListedColormap(palette)\n"
        "assert plotting == [], plotting\n"
        "assert len(palette) == 3 and cmap.N == 3, (palette, cmap)\n"
        "import matplotlib.pyplot, seaborn\n"
        "assert type(seaborn) is type(sys) and pong.sns.color_palette is seaborn.color_palette",
        must_succeed=True,
    )
    assert {"gymnax", "seaborn", "matplotlib.colors", "matplotlib.pyplot"} <= set(modules)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="no torch to leave out")
def test_tensorboard_events_are_written_without_importing_torch_which_imports_after() -> None:
    """tensorboardX imports torch whenever it is installed (seconds at every run's start): a
    run's TensorBoard writer is made without it, writes its events, and torch still imports."""
    row = {"iteration": 1, "env_steps": 10, "eval_return": 2.5, "eval_return_std": 0.0}
    modules = modules_after(
        "import tempfile\n"
        "from pathlib import Path\n"
        "from jaxrl.outputs import RunLogger\n"
        "run_dir = Path(tempfile.mkdtemp())\n"
        "logger = RunLogger(run_dir, [{'seed': 0}], ['seed_0'], tensorboard=True)\n"
        f"logger.log_eval({{0: {{**{row!r}, 'elapsed_seconds': 1.0}}}})\n"
        "logger.close()\n"
        "assert 'torch' not in sys.modules\n"
        "events = list((run_dir / 'tb' / 'seed_0').glob('events.out.tfevents.*'))\n"
        "assert len(events) == 1 and events[0].stat().st_size > 0, events\n"
        "import torch\n"
        "assert torch.zeros(2).sum().item() == 0.0",
        must_succeed=True,
    )
    assert {"tensorboardX", "torch"} <= set(modules)
