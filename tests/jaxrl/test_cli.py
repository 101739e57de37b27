"""The command line's promises, as a user meets them: `python -m jaxrl.run ...` in a subprocess.
(Bad input and faults are tests/jaxrl/test_reliability.py's.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import numpy as np
import pytest
from cli_helpers import QUICK_PPO, REPO, TINY_ES, cli, read_evals

import agents
import jaxrl
from jaxrl.cli import compose, format_return

QUIET = ("log.progress=false", "log.tensorboard=false")


def test_overrides_compose_hydra_style() -> None:
    cfg = compose(
        [
            "agent=es",
            "env=Pendulum-v1",
            "seed=3",
            "agent.population_size=256",
            "agent.sigma=0.05",
            "budget.env_steps=2e6",
        ]
    )
    assert (cfg.env.id, cfg.seed, cfg.agent.population_size) == ("Pendulum-v1", 3, 256)
    assert cfg.agent.sigma == 0.05 and cfg.budget.env_steps == 2e6
    assert cfg.agent.learning_rate == 0.02  # untouched defaults stay the YAML's


def test_seed_sweep_writes_a_run_per_seed(tmp_path: Path) -> None:
    run_dir = tmp_path / "sweep"
    result = cli("num_seeds=3", "seed=5", *TINY_ES, "budget.env_steps=2e3", f"log.dir={run_dir}")
    assert result.returncode == 0, result.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert [row["seed"] for row in summary["runs"]] == [5, 6, 7]
    assert sorted(p.name for p in (run_dir / "tb").iterdir()) == ["seed_5", "seed_6", "seed_7"]
    # Different seeds really are different runs.
    assert len({row["env_steps"] for row in summary["runs"]}) > 1
    assert 0.1 < summary["peak_rss_gb"] < 8 and "peak_device_memory_gb" not in summary  # CPU


def test_peak_memory_counts_gigabytes() -> None:
    """A process that touched 0.5 GB reports at least 0.5 GB, not 1,000 times more or less,
    and not its parent's memory: the suite's own process holds GBs by now, which ru_maxrss
    would have passed on through fork and exec."""
    script = (
        "import numpy as np; from jaxrl.loop import peak_memory; "
        "a = np.ones(500_000_000 // 8); print(peak_memory()['peak_rss_gb'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert 0.5 < float(out.stdout) < 2.5


def test_budget_holds_per_seed_within_one_iteration(tmp_path: Path) -> None:
    """ES counts whole episodes, so seeds in lockstep take different steps per generation: each
    stops at the first generation that reaches the budget (it used to run on until the slowest
    seed got there: 1.3M steps for a 2e5 budget), and the summary says what each did."""
    run_dir = tmp_path / "es"
    budget = 3000
    result = cli(
        *TINY_ES,
        "num_seeds=3",
        f"budget.env_steps={budget}",
        "eval.every=1",
        *QUIET,
        f"log.dir={run_dir}",
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    rows = read_evals(run_dir)
    for seed_row in summary["runs"]:
        steps = [int(r["env_steps"]) for r in rows if int(r["seed"]) == seed_row["seed"]]
        assert steps[-2] < budget <= steps[-1] == seed_row["env_steps"], steps
        assert seed_row["iterations"] == len(steps)
    assert len({row["iterations"] for row in summary["runs"]}) > 1  # they did stop apart

    # Fixed-size iterations (PPO: 4 envs x 32 steps) end exactly at the first one past it.
    ppo_dir = tmp_path / "ppo"
    result = cli(*QUICK_PPO, "budget.env_steps=1000", "eval.every=5", *QUIET, f"log.dir={ppo_dir}")
    assert result.returncode == 0, result.stderr
    summary = json.loads((ppo_dir / "summary.json").read_text())
    assert summary["env_steps"] == 1024 and summary["iterations"] == 8
    assert [int(r["iteration"]) for r in read_evals(ppo_dir)] == [5, 8]


def test_unset_eval_every_is_sized_to_the_budget(tmp_path: Path) -> None:
    """Without `eval.every` a run makes about `eval.per_run` evaluations: PPO's 8 iterations of
    128 steps for a budget of 1000 over 3 evaluations is one every ceil(7.8 / 3) = 3."""
    result = cli(
        *QUICK_PPO, "budget.env_steps=1000", "eval.per_run=3", *QUIET, f"log.dir={tmp_path}"
    )
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "summary.json").read_text())["eval_every"] == 3
    assert [int(r["iteration"]) for r in read_evals(tmp_path)] == [3, 6, 8]


def test_checkpoints_wait_for_min_seconds(tmp_path: Path) -> None:
    """Checkpoints come after evaluations only once `checkpoint.min_seconds` have passed: a
    run of a few seconds with the default 60 writes the first and the last; with 0, one per
    evaluation."""
    for min_seconds, expected in ((None, [0, 8]), (0, list(range(9)))):
        run_dir = tmp_path / str(min_seconds)
        extra = [] if min_seconds is None else [f"checkpoint.min_seconds={min_seconds}"]
        args = (*QUICK_PPO, "budget.env_steps=1000", "eval.every=1", "checkpoint.keep=20")
        result = cli(*args, *extra, *QUIET, f"log.dir={run_dir}")
        assert result.returncode == 0, result.stderr
        saved = sorted(int(p.name) for p in (run_dir / "checkpoints").iterdir() if p.name.isdigit())
        assert saved == expected


@pytest.mark.parametrize(
    "agent_args",
    [
        pytest.param((*QUICK_PPO, "budget.env_steps=1536"), id="ppo-12-iterations"),
        pytest.param(
            ("agent=dqn", "agent.iteration_steps=256", "budget.env_steps=1536"),
            id="dqn-384-updates",
        ),
    ],
)
def test_seed_k_of_a_sweep_is_the_run_with_seed_k(tmp_path: Path, agent_args: tuple) -> None:
    """Seed 1 of `num_seeds=2` draws exactly the random numbers of the run with `seed=1` (threefry
    keys are vmap-invariant; RngBitGenerator keys were not) and computes the same steps; only
    float rounding differs, as XLA reduces a batch of seeds in another order. The two seeds run
    one per core (`parallel.run_devices`), the single run on one device. The parameters are
    asserted equal to 1e-5, above the rounding measured (benchmarks/results/learning_tests.md),
    while a different seed differs by more than 1e-2. DQN stops early because RL amplifies the
    last bit: later, a greedy action between near-equal Q-values goes the other way and the
    parameters part. On a GPU float32 matmuls round to TF32 unless told otherwise: told here, as
    the README says to for this promise."""
    sweep, single = tmp_path / "sweep", tmp_path / "single"
    common = (*agent_args, "eval.every=1000", *QUIET)
    for args in (
        (*common, "num_seeds=2", f"log.dir={sweep}"),
        (*common, "seed=1", f"log.dir={single}"),
    ):
        result = cli(*args, extra_env={"JAX_DEFAULT_MATMUL_PRECISION": "highest"})
        assert result.returncode == 0, result.stderr

    def params(policy: jaxrl.Policy) -> np.ndarray:
        return np.asarray(policy.params)

    alone = params(jaxrl.load(single))
    np.testing.assert_allclose(params(jaxrl.load(sweep, seed=1)), alone, rtol=0, atol=1e-5)
    # The two seeds ran one per core (`parallel.run_devices`) where there are two; on one GPU.
    spread = json.loads((sweep / "summary.json").read_text())["run_devices"]
    cores = len(os.sched_getaffinity(0)) if jax.default_backend() == "cpu" else 1
    assert spread == min(2, cores)
    assert np.abs(params(jaxrl.load(sweep, seed=0)) - alone).max() > 1e-2


def test_each_run_gets_its_seeds_key_up_to_the_last_seed_jax_tells_apart() -> None:
    """The runs' keys are made in one vmapped call over uint32 seeds (a stack of one key per run
    compiled a 100,000-operand concatenation for `num_seeds=100000`); each equals the key of its
    seed as a Python int, up to 2^32 - 1 (above it JAX's keys repeat: the config refuses it)."""
    from jaxrl.loop import Trainer
    from jaxrl.prng import make_key

    first = 2**32 - 3
    trainer = Trainer(compose(["agent=es", *TINY_ES, f"seed={first}", "num_seeds=3"]))
    keys = np.asarray(jax.random.key_data(trainer.run_keys()))
    np.testing.assert_array_equal(keys, [[0, first], [0, first + 1], [0, first + 2]])
    for seed in (0, 1, 2**31, 2**32 - 1):
        one = Trainer(compose(["agent=es", *TINY_ES, f"seed={seed}"])).run_keys()
        np.testing.assert_array_equal(
            jax.random.key_data(one)[0], jax.random.key_data(make_key(seed))
        )
    assert np.array_equal(
        jax.random.key_data(make_key(2**32 + 5)), jax.random.key_data(make_key(5))
    )


def test_runs_that_do_not_split_over_the_cores_are_padded_and_keep_their_numbers(
    tmp_path: Path,
) -> None:
    """3 seeds on 2 cores: the program pads a copy of seed 2 to run 2 per core, and drops it.
    Seed 2 (the copied one) is still the run with `seed=2` up to float rounding; the padded run
    resumes from its checkpoint with a larger budget, every seed logged once per evaluation."""
    sweep, single = tmp_path / "sweep", tmp_path / "single"
    common = (*QUICK_PPO, "budget.env_steps=1536", "eval.every=4", *QUIET)
    for args in (
        (*common, "num_seeds=3", f"log.dir={sweep}"),
        (*common, "seed=2", f"log.dir={single}"),
    ):
        result = cli(*args)
        assert result.returncode == 0, result.stderr
    summary = json.loads((sweep / "summary.json").read_text())
    assert summary["run_devices"] == min(2, len(os.sched_getaffinity(0)))
    assert [row["seed"] for row in summary["runs"]] == [0, 1, 2]
    alone = np.asarray(jaxrl.load(single).params)
    np.testing.assert_allclose(np.asarray(jaxrl.load(sweep, seed=2).params), alone, atol=1e-5)
    assert np.abs(np.asarray(jaxrl.load(sweep, seed=1).params) - alone).max() > 1e-2
    resumed = cli(f"resume={sweep}", "budget.env_steps=2048", *QUIET)
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads((sweep / "summary.json").read_text())
    assert [row["iterations"] for row in summary["runs"]] == [16] * 3
    rows = read_evals(sweep)
    assert len(rows) == len({(r["seed"], r["iteration"]) for r in rows}) == 3 * 4


def test_the_result_line_gives_small_returns_to_two_decimals_and_the_success_rate(
    tmp_path: Path,
) -> None:
    """The CLI's last line on a hybrid env (P-DQN on Platform, a tiny budget), whose returns lie
    in [0, 1] and whose episodes report success: the final and best returns to two decimals
    (one would print 0.96 as 1.0) and the last evaluation's success rate, as summary.json has
    them; returns of 10 or more keep one decimal."""
    run_dir = tmp_path / "run"
    tiny = ("agent.hidden_sizes=[16]", "agent.batch_size=16", "agent.learning_starts=100")
    budget = ("agent.iteration_steps=200", "budget.env_steps=400", "eval.episodes=4")
    result = cli("agent=pdqn", "env=Platform-v0", *tiny, *budget, *QUIET, f"log.dir={run_dir}")
    assert result.returncode == 0, result.stderr
    s = json.loads((run_dir / "summary.json").read_text())
    final, best, success = (
        s[key] for key in ("final_eval_return", "best_eval_return", "final_eval_success_rate")
    )
    assert 0 <= final <= best <= 1 and 0 <= success <= 1
    expected = f"final eval return {final:.2f} (best {best:.2f}), success {success:.2f} | 400 env"
    assert expected in result.stdout.splitlines()[-1]
    assert [format_return(v) for v in (0.9597, -0.004, 9.9, 10.04, -21.0, 500.0, None)] == [
        "0.96",
        "-0.00",
        "9.90",
        "10.0",
        "-21.0",
        "500.0",
        "n/a",
    ]


def test_a_run_with_env_kwargs_loads_and_resumes(tmp_path: Path) -> None:
    """`+env.kwargs.<k>` adds a keyword for `gymnasium.make`; the run's config keeps it, so
    `jaxrl.load` and `resume=` rebuild the same env (both failed on it)."""
    run_dir = tmp_path / "run"
    args = (*QUICK_PPO, "env=gym/Pendulum-v1", "+env.kwargs.g=2.0", "budget.env_steps=256")
    result = cli(*args, *QUIET, f"log.dir={run_dir}")
    assert result.returncode == 0, result.stderr
    assert json.loads((run_dir / "config.json").read_text())["env"]["kwargs"] == {"g": 2.0}
    policy = jaxrl.load(run_dir)
    assert policy(np.zeros(3)).shape == (1,)
    result = cli(f"resume={run_dir}", "budget.env_steps=512", *QUIET)
    assert result.returncode == 0, result.stderr
    assert json.loads((run_dir / "summary.json").read_text())["env_steps"] == 512
    again = cli(f"resume={run_dir}", *QUIET)  # the budget it has reached: said, not silent
    assert again.returncode == 0, again.stderr
    expected = "nothing to train: the run has 512 env steps and budget.env_steps=512; raise it"
    assert expected in again.stdout + again.stderr


CORRIDOR = '''
    """A corridor of 5 cells: step right to reach the goal (reward 1)."""
    import gymnasium
    import numpy as np


    class Corridor(gymnasium.Env):
        observation_space = gymnasium.spaces.Box(0.0, 1.0, (1,), np.float32)
        action_space = gymnasium.spaces.Discrete(2)  # 0: left, 1: right

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.cell = 0
            return np.array([0.0], np.float32), {}

        def step(self, action):
            self.cell = max(self.cell + (1 if action == 1 else -1), 0)
            done = self.cell == 5
            return np.array([self.cell / 5], np.float32), float(done), done, False, {}


    gymnasium.register("Corridor-v0", entry_point=Corridor, max_episode_steps=20)
'''


def test_a_custom_gymnasium_env_from_a_module(tmp_path: Path) -> None:
    """Gymnasium's `module:Id` form (the README's worked example): the module is imported, in
    the training process and in async workers alike, and PPO learns to walk the corridor."""
    (tmp_path / "my_corridor.py").write_text(textwrap.dedent(CORRIDOR))
    for pool in ("sync", "async"):
        run_dir = tmp_path / pool
        result = cli(
            "agent=ppo",
            "env=gym/my_corridor:Corridor-v0",
            f"env.pool={pool}",
            "budget.env_steps=20000",  # greedy evaluation reaches the goal from 7.7k steps on
            *QUIET,
            f"log.dir={run_dir}",
            cwd=tmp_path,
        )
        assert result.returncode == 0, result.stderr
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["env"] == "gym/my_corridor:Corridor-v0"
        assert summary["final_eval_return"] == 1.0  # every evaluation episode reaches the goal


def test_sweep_summarises_an_es_run(tmp_path: Path) -> None:
    """`python -m jaxrl.sweep` on ES seeds, which evaluate at different step counts (it crashed
    with an IndexError): one common step axis from the latest first evaluation on."""
    run_dir = tmp_path / "es"
    result = cli(
        *TINY_ES,
        "num_seeds=2",
        "budget.env_steps=3000",
        "eval.every=1",
        *QUIET,
        f"log.dir={run_dir}",
    )
    assert result.returncode == 0, result.stderr
    out = subprocess.run(
        [sys.executable, "-m", "jaxrl.sweep", str(run_dir)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("1. all seeds: final ") and "(2 seeds)" in out.stdout
    rows = read_evals(run_dir)
    first = max(min(int(r["env_steps"]) for r in rows if r["seed"] == s) for s in ("0", "1"))
    sweep_steps = [
        int(line.split(",")[0]) for line in (run_dir / "sweep.csv").read_text().splitlines()[1:]
    ]
    assert sweep_steps[0] == first and sweep_steps == sorted(set(sweep_steps))
    assert (run_dir / "sweep.png").read_bytes()[:4] == b"\x89PNG"


def test_hydra_multirun_composes_with_num_seeds(tmp_path: Path) -> None:
    """`-m` sweeps a hyperparameter; each job is its own run with all its seeds."""
    result = cli(
        "-m",
        "agent.sigma=0.02,0.05",
        "num_seeds=2",
        *TINY_ES,
        "budget.env_steps=2e3",
        "log.progress=false",
        f"hydra.sweep.dir={tmp_path}",
    )
    assert result.returncode == 0, result.stderr
    sigmas = []
    for job in ("0", "1"):
        summary = json.loads((tmp_path / job / "summary.json").read_text())
        assert [row["seed"] for row in summary["runs"]] == [0, 1]
        sigmas.append(json.loads((tmp_path / job / "config.json").read_text())["agent"]["sigma"])
    assert sigmas == [0.02, 0.05]


@pytest.mark.parametrize("name", list(agents.REGISTRY))
def test_an_agent_composes_to_its_config_class_defaults(name: str) -> None:
    """The config dataclass is the one source of defaults: `agent=<name>` composes to exactly
    it (the YAML files only name the schema) when no preset adds to it."""
    env = "Pendulum-v1" if name in ("td3", "ddpg", "sac", "erl") else "CartPole-v1"
    composed = compose([f"agent={name}", f"env={env}", "preset=none"]).agent
    assert composed == agents.REGISTRY[name].config()


def test_the_python_api_takes_overrides_as_strings_or_keywords() -> None:
    """Keywords become the CLI's overrides (nested dicts dotted; `agent`'s `name` first, as the
    group choice); a list passed whole is refused with how to pass it (it failed inside Hydra's
    parsing with an AttributeError)."""
    assert jaxrl.keyword_overrides(
        {
            "num_seeds": 4,
            "agent": {"ent_coef": 0.0, "name": "ppo", "hidden_sizes": [8, 8]},
            "log": {"progress": False, "dir": None},
        }
    ) == [
        "num_seeds=4",
        "agent=ppo",
        "agent.ent_coef=0.0",
        "agent.hidden_sizes=[8,8]",
        "log.progress=false",
        "log.dir=null",
    ]
    with pytest.raises(TypeError, match=r"separate strings.*got \['agent=ppo'\]"):
        jaxrl.train(["agent=ppo"])
