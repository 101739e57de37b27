"""Hyperparameter grids: the points, every agent's hyperparameters reaching its compiled program as
data, and a grid through the CLI equal, run by run, to the single runs with the same values."""

from __future__ import annotations

import csv
import json
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cli_helpers import QUICK_PPO, cli
from jax._src.interpreters import partial_eval as pe

import agents
import jaxrl
from agents.ppo import PPOConfig
from jaxrl.agent_config import ImitationConfig
from jaxrl.cli import compose
from jaxrl.hyper import grid_points, stacked
from jaxrl.loop import Trainer


def test_grid_points_are_every_combination_last_key_fastest():
    points = grid_points(PPOConfig(), {"learning_rate": [1e-3, 3e-4], "ent_coef": [0, 0.01, 0.1]})
    assert [(p["learning_rate"], p["ent_coef"]) for p in points] == [
        (1e-3, 0.0),
        (1e-3, 0.01),
        (1e-3, 0.1),
        (3e-4, 0.0),
        (3e-4, 0.01),
        (3e-4, 0.1),
    ]
    # point-major runs: two seeds of each point
    values = stacked(points, 2)
    np.testing.assert_allclose(values["ent_coef"], [0, 0, 0.01, 0.01, 0.1, 0.1] * 2)
    assert values["learning_rate"].dtype == np.float32
    assert grid_points(PPOConfig(), {}) == []


AGENT_ENVS = {
    "ppo": "CartPole-v1",
    "a2c": "CartPole-v1",
    "reinforce": "CartPole-v1",
    "dqn": "CartPole-v1",
    "es": "CartPole-v1",
    "td3": "Pendulum-v1",
    "ddpg": "Pendulum-v1",
    "sac": "Pendulum-v1",
    "erl": "Pendulum-v1",
    "option_critic": "FourRooms-v0",
    "ppoc": "Pendulum-v1",
    "pdqn": "Platform-v0",
    "paddpg": "Platform-v0",
    "hyar": "Platform-v0",
    "bc": "Pendulum-v1",
    "dagger": "Pendulum-v1",
    "aggrevated": "Pendulum-v1",
}
# Settings under which every hyperparameter has a use (REINFORCE clips rewards only when it
# normalises them; DQN's priority keys need prioritised replay), one program each where no one
# program uses them all: AggreVaTeD's natural-gradient step takes `kl_step` in place of the
# optimiser's learning rate and clipping.
SETTINGS: dict[str, tuple[tuple[str, ...], ...]] = {
    "reinforce": (("agent.return_normalization=true",),),
    "dqn": (("agent.prioritized=true",),),  # α, β and ε are prioritised replay's
    "option_critic": (("agent.option_policy=egreedy",),),  # the softmax over options has no ε
    "aggrevated": ((), ("agent.natural_gradient=true",)),
}


@pytest.mark.parametrize("name", AGENT_ENVS)
def test_every_hyperparameter_reaches_the_compiled_program(name, request):
    """Each of the agent's HYPERPARAMETERS, passed as data, traces (no Python control flow on
    it) and is an input the program's results depend on: an input that dead-code elimination
    drops would be a grid key with no effect."""
    cls = agents.REGISTRY[name].config
    grid = [f"grid.agent.{key}=[{getattr(cls(), key)}]" for key in cls.HYPERPARAMETERS]
    small = ["agent.hidden_sizes=[8]"] if hasattr(cls, "hidden_sizes") else []  # quick compile
    overrides = [f"agent={name}", f"env={AGENT_ENVS[name]}", *small]
    if issubclass(cls, ImitationConfig):  # the suite's SAC expert (conftest.pendulum_sac_expert)
        overrides.append(f"agent.expert={request.getfixturevalue('pendulum_sac_expert').run_dir}")
    used = set()
    for settings in SETTINGS.get(name, ((),)):
        trainer = Trainer(compose([*overrides, *settings, *grid, "eval.episodes=2"]))
        keys = trainer.run_keys()
        carry = jax.eval_shape(trainer.init, keys, trainer.hyper)
        init = jax.make_jaxpr(trainer.init)(keys, trainer.hyper)
        chunk = jax.make_jaxpr(trainer.chunk)(carry, trainer.hyper, jnp.int32(1), True)
        names = sorted(trainer.hyper)  # a dict's leaves, in the order they are flattened
        for program, first in ((init, 1), (chunk, len(jax.tree.leaves(carry)))):
            _, used_inputs = pe.dce_jaxpr(program.jaxpr, [True] * len(program.jaxpr.outvars))
            used |= {n for i, n in enumerate(names) if used_inputs[first + i]}
    assert sorted(set(cls.HYPERPARAMETERS) - used) == []


GRID_RUN = (
    *QUICK_PPO,
    "budget.env_steps=1024",  # 8 iterations of 128 env steps
    "eval.every=4",
    "eval.episodes=2",
    "log.progress=false",
)


@pytest.fixture(scope="module")
def grid_run(tmp_path_factory):
    """2 learning rates x 2 seeds through the CLI, and the single run of point 1, seed 1."""
    root = tmp_path_factory.mktemp("grid")
    grid_dir, single_dir = root / "grid", root / "single"
    out = cli(
        *GRID_RUN, "grid.agent.learning_rate=[1e-3,3e-4]", "num_seeds=2", f"log.dir={grid_dir}"
    )
    assert out.returncode == 0, out.stderr
    single = cli(
        *GRID_RUN, "agent.learning_rate=3e-4", "seed=1", "log.tensorboard=false",
        f"log.dir={single_dir}",
    )  # fmt: skip
    assert single.returncode == 0, single.stderr
    return grid_dir, single_dir


def test_a_grid_writes_one_row_and_curve_per_point_and_seed(grid_run):
    grid_dir, _ = grid_run
    summary = json.loads((grid_dir / "summary.json").read_text())
    assert summary["num_runs"] == 4
    assert [(r["grid_point"], r["learning_rate"], r["seed"]) for r in summary["runs"]] == [
        (0, 1e-3, 0),
        (0, 1e-3, 1),
        (1, 3e-4, 0),
        (1, 3e-4, 1),
    ]
    assert all(r["iterations"] == 8 and r["env_steps"] == 1024 for r in summary["runs"])
    assert [(p["grid_point"], p["learning_rate"]) for p in summary["grid"]] == [
        (0, 1e-3),
        (1, 3e-4),
    ]
    point_1 = [r["final_eval_return"] for r in summary["runs"] if r["grid_point"] == 1]
    assert summary["grid"][1]["final_eval_return"] == pytest.approx(np.mean(point_1))
    with open(grid_dir / "evals.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0])[:3] == ["grid_point", "learning_rate", "seed"]
    assert sorted((r["grid_point"], r["seed"], r["iteration"]) for r in rows) == sorted(
        (p, s, i) for p in "01" for s in "01" for i in ("4", "8")
    )
    for label in ("learning_rate=0.001/seed_0", "learning_rate=0.0003/seed_1"):
        assert any((grid_dir / "tb" / label).glob("events.out.tfevents.*")), label


def test_a_grid_run_is_the_single_run_with_its_values(grid_run):
    """Point 1 (lr 3e-4), seed 1 of the grid against `agent.learning_rate=3e-4 seed=1` alone:
    the same parameters after 8 iterations up to float rounding (the grid's learning rate is a
    traced value, the single run's a constant); point 0 learned something else."""
    grid_dir, single_dir = grid_run
    flat = lambda policy: np.asarray(policy.params)
    alone = flat(jaxrl.load(single_dir))
    same = jaxrl.load(grid_dir, seed=1, grid_point=1)
    assert same.hyperparameters == {"learning_rate": 3e-4}
    np.testing.assert_allclose(flat(same), alone, atol=1e-5)
    assert np.max(np.abs(flat(jaxrl.load(grid_dir, seed=1, grid_point=0)) - alone)) > 1e-3
    with pytest.raises(ValueError, match="grid_point 2 is not one of"):
        jaxrl.load(grid_dir, grid_point=2)
    with pytest.raises(ValueError, match="trained no grid"):
        jaxrl.load(single_dir, grid_point=0)


def test_a_grid_resumes_with_a_larger_budget(grid_run, tmp_path):
    """Resume continues every (point, seed) from the checkpoint: 8 more iterations each, two
    more evaluation rows each, nothing logged twice."""
    grid_dir, _ = grid_run
    copy = tmp_path / "grid"  # the other tests' run directory stays as it was
    shutil.copytree(grid_dir, copy)
    out = cli(f"resume={copy}", "budget.env_steps=2048", "log.progress=false")
    assert out.returncode == 0, out.stderr
    summary = json.loads((copy / "summary.json").read_text())
    assert [r["iterations"] for r in summary["runs"]] == [16] * 4
    with open(copy / "evals.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4 * 4
    assert len({(r["grid_point"], r["seed"], r["iteration"]) for r in rows}) == 16
