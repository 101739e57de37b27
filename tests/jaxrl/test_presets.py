"""Per agent × env presets (jaxrl/presets.py): which one a run gets, that the user's keys win one
by one, and that the CLI names it in a run's first line and records it in config.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from cli_helpers import cli, error_lines

from agents.dqn import DQNConfig
from jaxrl import presets
from jaxrl.cli import compose
from jaxrl.config import ConfigError, flatten, to_dict

QUIET = ("log.tensorboard=false",)  # with the console display: the preset line is its first
REINFORCE_LINE = (
    "preset reinforce/cartpole: env.num_envs=8 -- the reference PyBullet cart-pole experiment's "
    "settings; mean final 415 over 4 seeds at 250k env steps "
    "(benchmarks/results/learning_tests.md); "
    "your overrides win, preset=none for the agent's defaults"
)


def label(agent: str, env_id: str, choice: str = presets.AUTO) -> str | None:
    preset = presets.choose(agent, env_id, choice)
    return None if preset is None else preset.label


def test_auto_picks_the_preset_of_the_agent_and_env() -> None:
    assert label("dqn", "ALE/Pong-v5") == "dqn/atari"
    assert label("ppo", "ALE/Breakout-v5") == "ppo/atari"
    assert label("dqn", "CartPole-v1") == "dqn/cartpole"
    assert label("pdqn", "Goal-v0") == "pdqn/goal"  # before the hybrid family's
    assert label("pdqn", "CatchPoint-v0") == "pdqn/hybrid"
    assert label("hyar", "HardMove-v0") == "hyar/hard-move"
    assert label("sac", "brax/ant") is None  # Brax's Ant is not Gymnasium's MuJoCo Ant
    assert label("ppo", "brax/ant") == "ppo/ant"
    assert label("ppo", "brax/hopper") is None
    assert label("sac", "gym/HalfCheetah-v5") == "sac/mujoco"
    assert label("td3", "gym/Walker2d-v4") == "td3/mujoco"
    assert label("td3", "gym/HalfCheetah-v5") == "td3/halfcheetah"  # before the family's
    assert label("td3", "gym/Hopper-v5") == "td3/hopper"  # before the family's
    assert label("sac", "gym/Hopper-v5") == "sac/mujoco"
    assert label("ddpg", "gym/Hopper-v5") == "ddpg/mujoco"
    assert label("erl", "gym/HalfCheetah-v5") == "erl/mujoco"
    assert label("erl", "Pendulum-v1") == "erl/pendulum"
    assert label("sac", "gym/Humanoid-v5") is None
    assert label("es", "bullet/RaceCar-v0") == "es/racecar"
    assert label("dqn", "CartPole-v1", presets.NONE) is None
    assert label("dqn", "pixel/CartPole-v1") == "dqn/pixel-cartpole"
    assert label("dqn", "pixel/CartPole-v1", "atari") == "dqn/atari"  # by name, on any env
    with pytest.raises(ConfigError, match=r"^preset=pong is not a preset of agent=ppo; valid: "):
        presets.choose("ppo", "ALE/Pong-v5", "pong")


def test_values_are_read_as_the_config_holds_them() -> None:
    assert presets.value("agent.learning_rate=1e-4") == pytest.approx(1e-4)
    assert presets.value("agent.hidden_sizes=[256]") == [256]
    assert presets.value("agent.loss=huber") == "huber"
    assert presets.value("agent.double_q=false") is False
    preset = presets.Preset("p", "dqn", ("*",), ("a.x=1e-4", "a.y=[2,3]", "a.z=huber"), "")
    held = presets.in_effect(preset, {"a.x": 1e-4, "a.y": (2, 3), "a.z": "mse"})
    assert held == ["a.x=1e-4", "a.y=[2,3]"]


def test_the_users_keys_win_one_by_one() -> None:
    cfg = compose(
        ["agent=dqn", "env=ALE/Pong-v5", "agent.learning_rate=3e-4", "budget.env_steps=5000"]
    )
    assert cfg.preset == "atari"
    assert (cfg.agent.learning_rate, cfg.budget.env_steps) == (3e-4, 5000)
    assert (cfg.agent.train_freq, cfg.agent.batch_size, cfg.env.num_envs) == (4, 32, 1)
    line = presets.announce(cfg)
    assert line.startswith("preset dqn/atari: env.num_envs=1 agent.train_freq=4 ")
    assert "learning_rate" not in line and "budget" not in line


def test_preset_none_keeps_the_agents_defaults() -> None:
    cfg = compose(["agent=dqn", "env=ALE/Pong-v5", "preset=none"])
    assert cfg.agent == DQNConfig() and cfg.budget.env_steps == 1e6 and cfg.preset == "none"
    assert presets.announce(cfg) == (
        "preset=none (not dqn/atari): the agent's defaults, budget.env_steps=1,000,000"
    )
    cfg = compose(["agent=sac", "env=MountainCarContinuous-v0"])
    assert presets.announce(cfg) == (
        "no preset for agent=sac on env=MountainCarContinuous-v0: the agent's defaults, "
        "budget.env_steps=1,000,000"
    )


EXAMPLE_ENV = {"ALE/*": "ALE/Pong-v5"}
EXPERT = {"bc", "dagger", "aggrevated"}  # they need an expert run to compose


@pytest.mark.parametrize("preset", presets.PRESETS, ids=lambda p: p.label)
def test_every_preset_composes_with_every_setting_in_effect(preset: presets.Preset) -> None:
    for env_id in (EXAMPLE_ENV.get(e, e.replace("-v*", "-v5")) for e in preset.envs):
        extra = ["agent.expert=runs/expert"] if preset.agent in EXPERT else []
        cfg = compose([f"agent={preset.agent}", f"env={env_id}", f"preset={preset.name}", *extra])
        assert presets.in_effect(preset, flatten(to_dict(cfg))) == list(preset.settings)


def test_the_cli_prints_the_preset_first_and_records_it(tmp_path: Path) -> None:
    """A single run and a -m job: the first stderr line names the preset and what it set; the
    run trains with it; `--cfg job` shows it."""
    run = cli("agent=reinforce", "budget.env_steps=2000", *QUIET, f"log.dir={tmp_path / 'one'}")
    assert run.returncode == 0, run.stderr
    assert error_lines(run.stderr)[0] == REINFORCE_LINE
    saved = json.loads((tmp_path / "one" / "config.json").read_text())
    assert (saved["preset"], saved["env"]["num_envs"]) == ("cartpole", 8)

    sweep = cli(
        "-m",
        "agent=reinforce",
        "budget.env_steps=2000",
        "env.num_envs=2",
        *QUIET,
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
    )
    assert sweep.returncode == 0, sweep.stderr
    saved = json.loads((tmp_path / "sweep" / "0" / "config.json").read_text())
    assert (saved["preset"], saved["env"]["num_envs"]) == ("cartpole", 2)  # the user's key won
    assert "preset reinforce/cartpole: every setting overridden -- " in sweep.stderr

    shown = cli("agent=ppo", "env=ALE/Pong-v5", "agent.clip_eps=0.2", "--cfg", "job")
    assert shown.returncode == 0, shown.stderr
    composed = yaml.safe_load(shown.stdout)
    assert composed["preset"] == "atari" and composed["env"]["num_envs"] == 8
    assert composed["agent"]["clip_eps"] == 0.2 and composed["agent"]["shared_torso"] is True


def test_the_readme_lists_every_preset() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    rows = [line.split(" | ") for line in readme.splitlines() if line.startswith("| ")]
    listed = {
        (agent, row[2].strip("`"))
        for row in rows
        if len(row) == 5
        for agent in row[0].removeprefix("| ").split(", ")
    }
    missing = [p.label for p in presets.PRESETS if (p.agent, p.name) not in listed]
    assert not missing, f"README.md's preset table lacks {missing}"
