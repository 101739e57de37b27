"""Every bad input and fault of docs/reliability.md, through the CLI as a user meets it
(`python -m jaxrl.run` in a subprocess): one line naming what was wrong and what is valid, the
right exit status, and nothing lost. The docs table lists each case's test; a test below checks
that every case here has its row there."""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import (
    QUICK_PPO,
    REPO,
    TINY_ES,
    cli,
    error_lines,
    pythonpath,
    read_evals,
    start,
    tensorboard_events,
    wait_for_evals,
)
from trees import tree_equal


def assert_one_error_line(result: subprocess.CompletedProcess, code: int, start: str) -> None:
    lines = error_lines(result.stderr)
    assert result.returncode == code, result.stderr
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(start), lines[0]
    assert "Traceback" not in result.stderr


# ---------------------------------------------------------------------------------------------
# Bad input: refused in one line with exit status 2, before anything is written or compiled.
# (id, overrides, start of the one stderr line); {run}, {file}, {dir}... are filled in below.

BAD_INPUT: list[tuple[str, tuple[str, ...], str]] = [
    ("unknown-agent", ("agent=foo",), "error: unknown agent 'foo'; valid agents: es, ppo, a2c"),
    ("unknown-env", ("env=Foo-v0",), "error: unknown env 'Foo-v0'; valid envs: CartPole-v1"),
    (
        "agent-typo",
        ("agent=ppo2",),
        "error: unknown agent 'ppo2'; did you mean ppo or ppoc? valid agents: es, ppo",
    ),
    (
        "env-typo",
        ("env=CartPol-v1",),
        "error: unknown env 'CartPol-v1'; did you mean CartPole-v1? valid envs: CartPole-v1",
    ),
    ("gymnasium-id-without-gym/", ("env=LunarLander-v3",), "error: unknown env 'LunarLander-v3'"),
    ("unknown-brax-env", ("env=brax/foo",), "error: unknown env 'brax/foo'; valid envs:"),
    (
        "unknown-gymnasium-env",
        ("env=gym/NoSuchEnv-v0",),
        "error: unknown env 'gym/NoSuchEnv-v0': Environment `NoSuchEnv` doesn't exist.",
    ),
    ("unknown-atari-game", ("env=ALE/Foo-v5",), "error: env 'ALE/Foo-v5' is not an Atari game"),
    (
        "custom-env-module-missing",
        ("env=gym/no_such_module:Foo-v0",),
        "error: env 'gym/no_such_module:Foo-v0' needs no_such_module",
    ),
    ("unknown-agent-key", ("agent.foo=1",), "error: unknown config key 'agent.foo'; valid keys"),
    (
        "agent-key-typo",
        ("agent=ppo", "agent.learning_rte=1e-3"),
        "error: unknown config key 'agent.learning_rte'; did you mean learning_rate? valid keys "
        "under 'agent': name, learning_rate",
    ),
    (
        "key-of-another-section",
        ("agent=ppo", "agent.num_envs=8"),
        "error: unknown config key 'agent.num_envs'; did you mean env.num_envs? valid keys under "
        "'agent': name",
    ),
    (
        "top-level-key-in-a-section",
        ("agent.num_seeds=4",),
        "error: unknown config key 'agent.num_seeds'; did you mean num_seeds? valid keys under",
    ),
    (
        "top-level-key-of-a-section",
        ("env_steps=1000",),
        "error: unknown config key 'env_steps'; did you mean budget.env_steps? valid keys: agent",
    ),
    (
        "added-agent-key-typo",
        ("agent=ppo", "+agent.learnin_rate=1e-3"),
        "error: unknown config key 'agent.learnin_rate'; did you mean learning_rate? valid keys",
    ),
    ("unknown-key", ("foo=1",), "error: unknown config key 'foo'; valid keys: agent, env, seed"),
    ("unknown-env-key", ("env.foo=1",), "error: unknown config key 'env.foo'; valid keys under"),
    (
        "kwargs-on-jax-env",
        ("+env.kwargs.foo=1",),
        "error: unknown config key 'env.kwargs'; valid keys under 'env': id, num_envs",
    ),
    (
        "kwargs-the-env-refuses",
        ("env=gym/Pendulum-v1", "+env.kwargs.bad_kwarg=1"),
        "error: env 'gym/Pendulum-v1': env.kwargs {{'bad_kwarg': 1}}:",
    ),
    ("seed-not-a-number", ("seed=abc",), "error: invalid value for 'seed'"),
    ("seed-negative", ("seed=-1",), "error: seed=-1 must be >= 0"),
    (
        "seeds-beyond-32-bits",
        ("seed=4294967295", "num_seeds=2"),
        "error: seed=4294967295 with num_seeds=2 (its last seed 4294967296) must be below 2^32",
    ),
    ("no-seeds", ("num_seeds=0",), "error: num_seeds=0 must be >= 1"),
    ("fractional-seeds", ("num_seeds=1.5",), "error: invalid value for 'num_seeds'"),
    ("not-a-bool", ("video=maybe",), "error: invalid value for 'video'"),
    ("override-without-value", ("agent.sigma",), "error: cannot use overrides ['agent.sigma']"),
    ("override-unparsable", ("agent.sigma=[",), "error: cannot use overrides ['agent.sigma=[']"),
    (
        "odd-population",
        ("agent.population_size=63",),
        "error: agent.population_size=63 must be even: members come in antithetic pairs (try 64)",
    ),
    ("population-too-small", ("agent.population_size=0",), "error: agent.population_size=0"),
    ("sigma-negative", ("agent.sigma=-0.1",), "error: agent.sigma=-0.1 must be > 0"),
    (
        "unknown-choice",
        ("agent.fitness_shaping=raw",),
        "error: agent.fitness_shaping='raw' is not one of: centered_ranks, zscore",
    ),
    ("hidden-size-zero", ("agent.hidden_sizes=[0]",), "error: agent.hidden_sizes=[0]"),
    (
        "unknown-activation",
        ("agent.activation=foo",),
        "error: agent.activation='foo' is not one of: tanh, relu",
    ),
    ("budget-zero", ("budget.env_steps=0",), "error: budget.env_steps=0.0 must be a number"),
    ("budget-negative", ("budget.env_steps=-5",), "error: budget.env_steps=-5.0 must be"),
    ("budget-infinite", ("budget.env_steps=inf",), "error: budget.env_steps=inf must be"),
    ("budget-nan", ("budget.env_steps=nan",), "error: budget.env_steps=nan must be"),
    ("budget-beyond-counters", ("budget.env_steps=1e30",), "error: budget.env_steps=1e+30"),
    ("target-return-nan", ("budget.target_return=nan",), "error: budget.target_return=nan"),
    ("eval-every-zero", ("eval.every=0",), "error: eval.every=0 must be >= 1"),
    ("eval-per-run-zero", ("eval.per_run=0",), "error: eval.per_run=0 must be >= 1"),
    ("eval-episodes-zero", ("eval.episodes=0",), "error: eval.episodes=0 must be >= 1"),
    ("checkpoint-every-zero", ("checkpoint.every=0",), "error: checkpoint.every=0 must be >= 1"),
    (
        "checkpoint-min-seconds-negative",
        ("checkpoint.min_seconds=-1",),
        "error: checkpoint.min_seconds=-1.0 must be a number of seconds >= 0",
    ),
    (
        "checkpoint-call-seconds-zero",
        ("checkpoint.call_seconds=0",),
        "error: checkpoint.call_seconds=0.0 must be a number of seconds > 0",
    ),
    ("checkpoint-keep-zero", ("checkpoint.keep=0",), "error: checkpoint.keep=0 must be >= 1"),
    ("no-envs", ("env.num_envs=0",), "error: env.num_envs=0 must be >= 1"),
    (
        "an-env-batch-for-es",
        ("agent=es", "env.num_envs=8"),
        "error: env.num_envs=8: agent 'es' runs its own env batches (agent.population_size x "
        "agent.episodes_per_member episodes a generation); leave env.num_envs unset",
    ),
    (
        "grid-of-a-shape-key",
        ("agent=ppo", "grid.agent.num_steps=[64,128]"),
        "error: grid.agent.num_steps: 'num_steps' changes the compiled program's shapes or "
        "structure, so it cannot vary inside one program; sweep it with Hydra's multirun "
        "instead (one program per value, composes with grid.*): -m agent.num_steps=64,128",
    ),
    (
        "grid-of-an-unknown-key",
        ("agent=ppo", "grid.agent.foo=[1,2]"),
        "error: grid.agent.foo: 'foo' is not a key of agent ppo; keys a grid may vary: "
        "learning_rate,",
    ),
    (
        "grid-value-out-of-range",
        ("agent=ppo", "grid.agent.learning_rate=[1e-3,-1]"),
        "error: grid point learning_rate=-1: agent.learning_rate=-1.0 must be > 0",
    ),
    (
        "grid-not-a-list",
        ("agent=ppo", "grid.agent.learning_rate=1e-3"),
        "error: grid.agent.learning_rate=1e-3: a grid takes a list of values, e.g. "
        "grid.agent.learning_rate=[1e-3]",
    ),
    ("grid-empty", ("agent=ppo", "grid.agent.gamma=[]"), "error: grid.agent.gamma=[]: give a"),
    ("grid-of-env-keys", ("grid.env.num_envs=[1,2]",), "error: unknown config key 'grid.env'"),
    ("episode-cap-zero", ("env.max_episode_steps=0",), "error: env.max_episode_steps=0"),
    (
        "unknown-pool",
        ("env=gym/CartPole-v1", "env.pool=foo"),
        "error: env.pool='foo' is not a pool mode of env 'gym/CartPole-v1'; valid: sync, async, "
        "ray",
    ),
    (
        "ray-workers-zero",
        ("env=gym/CartPole-v1", "env.pool=ray", "env.ray.num_workers=0"),
        "error: env.ray.num_workers=0 must be >= 1",
    ),
    (
        "timeout-negative",
        ("env=gym/CartPole-v1", "env.timeout=-1"),
        "error: env.timeout=-1.0 must be > 0 seconds",
    ),
    (
        # pybullet's import prints a line on stderr: kept from the one-line answer.
        "bullet-timeout-zero",
        ("env=bullet/CartPole-v0", "env.timeout=0"),
        "error: env.timeout=0.0 must be > 0 seconds",
    ),
    (
        "atari-frame-skip-zero",
        ("env=ALE/Pong-v5", "env.frame_skip=0"),
        "error: env.frame_skip=0 must be >= 1",
    ),
    (
        "unknown-brax-backend",
        ("env=brax/hopper", "env.backend=foo"),
        "error: env.backend='foo' is not a Brax physics backend",
    ),
    (
        "discrete-agent-on-box-env",
        ("agent=dqn", "env=Pendulum-v1"),
        "error: agent 'dqn' needs a Discrete action space; env 'Pendulum-v1' has Box actions",
    ),
    (
        "box-agent-on-discrete-env",
        ("agent=sac", "env=CartPole-v1"),
        "error: agent 'sac' needs continuous (Box) actions; env 'CartPole-v1' has 2 discrete",
    ),
    (
        "discrete-agent-on-hybrid-env",
        ("agent=dqn", "env=Platform-v0"),
        "error: agent 'dqn' needs a Discrete action space; env 'Platform-v0' has hybrid actions "
        "(a choice among 3, each with its continuous parameters: 3 in all)",
    ),
    (
        "box-agent-on-hybrid-env",
        ("agent=sac", "env=Platform-v0"),
        "error: agent 'sac' needs continuous (Box) actions; env 'Platform-v0' has hybrid actions",
    ),
    (
        "policy-gradient-on-hybrid-env",
        ("agent=ppo", "env=Platform-v0"),
        "error: agent 'ppo' supports Discrete and flat (1-D) Box action spaces; the env has hybrid "
        "actions",
    ),
    (
        "hybrid-agent-on-discrete-env",
        ("agent=pdqn", "env=CartPole-v1"),
        "error: agent 'pdqn' needs hybrid (parameterised) actions: a discrete choice with "
        "continuous parameters (Platform-v0, Goal-v0, HardMove-v0, CatchPoint-v0); env "
        "'CartPole-v1' has 2 discrete actions",
    ),
    (
        "hybrid-agent-on-box-env",
        ("agent=paddpg", "env=Pendulum-v1"),
        "error: agent 'paddpg' needs hybrid (parameterised) actions: a discrete choice with "
        "continuous parameters (Platform-v0, Goal-v0, HardMove-v0, CatchPoint-v0); env "
        "'Pendulum-v1' has Box actions of shape (1,)",
    ),
    (
        "hyar-on-box-env",
        ("agent=hyar", "env=Pendulum-v1"),
        "error: agent 'hyar' needs hybrid (parameterised) actions: a discrete choice with "
        "continuous parameters (Platform-v0, Goal-v0, HardMove-v0, CatchPoint-v0); env "
        "'Pendulum-v1' has Box actions of shape (1,)",
    ),
    (
        "hyar-without-a-parameter-latent",
        ("agent=hyar", "env=Platform-v0", "agent.parameter_latent_size=0"),
        "error: agent.parameter_latent_size=0 must be >= 1",
    ),
    (
        "parameter-prior-on-an-env-without-one",
        ("agent=pdqn", "env=Platform-v0", "agent.parameter_prior=true"),
        "error: agent.parameter_prior=true: env 'Platform-v0' has no hand-made parameter policy "
        "(Goal-v0 has one, MP-DQN's); set agent.parameter_prior=false",
    ),
    (
        "preset-of-another-agent",
        ("agent=es", "preset=atari"),
        "error: preset=atari is not a preset of agent=es; valid: auto, none, cartpole",
    ),
    (
        "preset-typo",
        ("agent=ppo", "preset=atar"),
        "error: preset=atar is not a preset of agent=ppo; did you mean atari? valid: auto, none",
    ),
    (
        "hard-move-without-actuators",
        ("env=HardMove-v0", "env.kwargs.num_actuators=0"),
        "error: env.kwargs.num_actuators=0 must be a whole number of actuators in [1, 16]",
    ),
    (
        "squash-discrete-actions",
        ("agent=reinforce", "agent.squash_actions=true"),
        "error: agent 'reinforce': squash_actions=true applies to Box action spaces",
    ),
    ("unknown-torso", ("agent=ppo", "agent.torso=foo"), "error: agent.torso='foo' is not one"),
    (
        "cnn-on-vectors",
        ("agent=ppo", "agent.torso=nature_cnn"),
        "error: agent 'ppo': torso=nature_cnn needs image observations",
    ),
    (
        "minibatches-do-not-divide",
        ("agent=ppo", "agent.num_minibatches=3"),
        "error: agent.num_minibatches=3 must divide agent.num_steps=128",
    ),
    ("gamma-above-one", ("agent=ppo", "agent.gamma=1.5"), "error: agent.gamma=1.5 must be in"),
    (
        "buffer-smaller-than-batch",
        ("agent=dqn", "agent.buffer_size=10"),
        "error: agent.batch_size=64 must be <= agent.buffer_size=10",
    ),
    (
        "warm-up-beyond-buffer",
        ("agent=dqn", "agent.learning_starts=200000"),
        "error: agent.learning_starts=200000 must be <= agent.buffer_size=100000",
    ),
    (
        "iteration-not-a-multiple",
        ("agent=dqn", "agent.iteration_steps=10"),
        "error: agent.iteration_steps=10 must be a multiple of env.num_envs",
    ),
    (
        "cnn-on-small-images",
        ("agent=ppo", "env=FourRooms-v0", "env.observation=grid"),
        "error: agent 'ppo': the Nature CNN needs images of at least 36x36",
    ),
    (
        "mlp-on-images",
        ("agent=ppo", "agent.torso=mlp", "env=FourRooms-v0", "env.observation=grid"),
        "error: agent 'ppo': torso=mlp takes flat observations",
    ),
    (
        "option-critic-without-options",
        ("agent=option_critic", "env=FourRooms-v0", "agent.num_options=0"),
        "error: agent.num_options=0 must be >= 1",
    ),
    (
        "option-critic-zero-temperature",
        ("agent=option_critic", "env=FourRooms-v0", "agent.temperature=0"),
        "error: agent.temperature=0.0 must be > 0",
    ),
    (
        "option-critic-negative-deliberation-cost",
        ("agent=option_critic", "env=FourRooms-v0", "agent.deliberation_cost=-0.1"),
        "error: agent.deliberation_cost=-0.1 must be >= 0",
    ),
    (
        "option-critic-on-box-actions",
        ("agent=option_critic", "env=Pendulum-v1"),
        "error: agent 'option_critic' needs a Discrete action space; env 'Pendulum-v1' has Box",
    ),
    ("unknown-erl-learner", ("agent=erl", "agent.learner=foo"), "error: agent.learner='foo'"),
    (
        "erl-buffer-below-a-generation",
        ("agent=erl", "agent.buffer_size=100", "agent.batch_size=64", "agent.learning_starts=64"),
        "error: agent.buffer_size=100 must hold a generation's rollouts",
    ),
    (
        "frames-once-on-vectors",
        ("agent=dqn", "agent.frame_storage=once"),
        "error: agent.frame_storage=once needs frame-stacked image observations",
    ),
    (
        "unknown-frame-storage",
        ("agent=dqn", "agent.frame_storage=packed"),
        "error: agent.frame_storage='packed' is not one of: full, compact, once",
    ),
    (
        # 10^11 CartPole transitions of 42 bytes (obs and next_obs 16 each, action and reward 4,
        # the two end flags 1): 4,200 GB, more than any machine this suite runs on.
        "a-state-larger-than-memory",
        ("agent=dqn", "env=CartPole-v1", "agent.buffer_size=100000000000"),
        "error: the state of 1 run(s) needs 4,200.0 GB, more than the",
    ),
    (
        # 16,384 envs x 65,536 steps of PPO: a rollout of 10^9 transitions and minibatches of
        # 268M rows (their activations), ~615 GB that XLA's buffer assignment counts once the
        # chunk has compiled; the state (the envs, the networks) is a few MB. Known only after
        # the compile, with the progress display on: the run's first line (its preset) waits
        # for the compile, so the refusal is the only line.
        "a-chunk-larger-than-memory",
        (
            "agent=ppo",
            "env=CartPole-v1",
            "env.num_envs=16384",
            "agent.num_steps=65536",
            "budget.env_steps=2e9",
        ),
        # (XLA's count, 615.3 GB with jax 0.10.2 on an Intel Xeon, is not asserted: its buffer
        # assignment may differ by version and CPU)
        "error: a chunk of 1 run(s) needs ",
    ),
    ("log-dir-is-a-file", ("log.dir={file}",), "error: log.dir={file}: cannot be a run directory"),
    (
        "log-dir-below-a-file",
        ("log.dir={file}/run",),
        "error: log.dir={file}/run: cannot be a run directory: Not a directory",
    ),
    (
        "log-dir-holds-a-run",
        ("log.dir={run}",),
        "error: log.dir={run} already holds a run; continue it with resume={run}",
    ),
    ("resume-nowhere", ("resume={tmp}/nowhere",), "error: resume={tmp}/nowhere: no config.json"),
    (
        "resume-no-checkpoint",
        ("resume={unstarted}",),
        "error: resume={unstarted}: no checkpoint in",
    ),
    (
        "resume-unreadable-config",
        ("resume={garbled}",),
        "error: resume={garbled}: config.json is not readable",
    ),
    (
        "resume-a-checkpoint-of-another-state",
        ("resume={skewed}",),
        "error: the checkpoint of iteration 2 in {skewed}/checkpoints holds another state than "
        "this jaxrl builds for the run (",
    ),
    (
        "resume-changes-what-is-learned",
        ("resume={run}", "agent.sigma=0.5"),
        "error: resume={run}: 'agent.sigma' cannot change when a run continues",
    ),
    ("bad-key-with---cfg", ("foo=1", "--cfg", "job"), "error: unknown config key 'foo'"),
    ("bad-value-in-a-sweep", ("-m", "agent.sigma=0.02,-1"), "error: agent.sigma=-1.0 must be > 0"),
    (
        "one-log-dir-for-a-sweep",
        ("-m", "log.dir={tmp}/x", "agent.sigma=0.1,0.2"),
        "error: log.dir names one run directory; with -m each job gets its own",
    ),
    ("resume-in-a-sweep", ("-m", "resume={run}"), "error: resume= continues one run"),
    (
        "hydra-setting-on-a-single-run",
        ("hydra.job.chdir=true",),
        "error: hydra.job.chdir=true: Hydra's settings take effect with -m",
    ),
]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small completed ES run (its directory holds config, checkpoints, evals, summary)."""
    run_dir = tmp_path_factory.mktemp("finished") / "run"
    result = cli(*TINY_ES, "budget.env_steps=1e3", "log.progress=false", f"log.dir={run_dir}")
    assert result.returncode == 0, result.stderr
    return run_dir


@pytest.fixture(scope="module")
def bad_input_results(
    tmp_path_factory: pytest.TempPathFactory, finished_run: Path
) -> dict[str, tuple[subprocess.CompletedProcess, str, Path]]:
    """Every BAD_INPUT case run once, three processes at a time (each is mostly start-up)."""
    tmp = tmp_path_factory.mktemp("bad_input")
    places = {"tmp": tmp, "file": tmp / "a_file", "run": finished_run}
    places["file"].write_text("not a directory\n")
    unstarted = tmp / "unstarted"  # a run stopped before its first checkpoint
    unstarted.mkdir()
    (unstarted / "config.json").write_text((finished_run / "config.json").read_text())
    garbled = tmp / "garbled"
    garbled.mkdir()
    (garbled / "config.json").write_text("{not json")
    # As a version whose network differed would have written it: the config builds another
    # state than its checkpoint holds.
    skewed = tmp / "skewed"
    shutil.copytree(finished_run, skewed)
    config = json.loads((skewed / "config.json").read_text())
    config["agent"]["hidden_sizes"] = [16]
    (skewed / "config.json").write_text(json.dumps(config))
    places.update(unstarted=unstarted, garbled=garbled, skewed=skewed)
    cwd = tmp / "cwd"
    cwd.mkdir()

    def run(case: tuple[str, tuple[str, ...], str]) -> tuple[str, subprocess.CompletedProcess]:
        name, args, _ = case
        return name, cli(*(a.format(**places) for a in args), cwd=cwd, timeout=120)

    with ThreadPoolExecutor(3) as pool:
        results = dict(pool.map(run, BAD_INPUT))
    return {name: (results[name], start.format(**places), cwd) for name, _, start in BAD_INPUT}


@pytest.mark.parametrize("case", [c[0] for c in BAD_INPUT])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    case: str, bad_input_results: dict[str, tuple[subprocess.CompletedProcess, str, Path]]
) -> None:
    result, start, cwd = bad_input_results[case]
    assert_one_error_line(result, 2, start)
    assert result.stdout == ""
    assert not (cwd / "runs").exists()  # no run directory was made for a refused run


def test_a_refused_resume_leaves_the_run_as_it_was(
    bad_input_results: dict[str, tuple[subprocess.CompletedProcess, str, Path]],
    finished_run: Path,
) -> None:
    """The version that wrote a checkpoint can still continue it: a resume refused for its state
    rewrites neither its config nor its checkpoints."""
    _, _, cwd = bad_input_results["resume-a-checkpoint-of-another-state"]
    skewed = cwd.parent / "skewed"
    assert json.loads((skewed / "config.json").read_text())["agent"]["hidden_sizes"] == [16]

    def files(run: Path) -> list[tuple[str, int]]:
        edited = {"config.json", ".lock"}  # the edit above; the lock the refused run took
        found = [p for p in run.rglob("*") if p.is_file() and p.name not in edited]
        return sorted((str(p.relative_to(run)), p.stat().st_size) for p in found)

    assert files(skewed) == files(finished_run)


def test_every_case_has_its_row_in_the_docs() -> None:
    table = (REPO / "docs" / "reliability.md").read_text()
    tests = [name for name in dir(sys.modules[__name__]) if name.startswith("test_")]
    missing = [c[0] for c in BAD_INPUT if f"`{c[0]}`" not in table]
    missing += [
        t for t in tests if t != "test_every_case_has_its_row_in_the_docs" and t not in table
    ]
    assert not missing, f"docs/reliability.md lacks: {missing}"


# ---------------------------------------------------------------------------------------------
# Faults while running.


@pytest.mark.parametrize(
    "signum, code, says",
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "stopped by SIGTERM")],
    ids=["ctrl-c", "sigterm"],
)
def test_ctrl_c_checkpoints_and_resume_continues_with_a_new_budget(
    tmp_path: Path, signum: int, code: int, says: str
) -> None:
    """First Ctrl-C (or SIGTERM, what `kill`, Docker and SLURM send before they kill): the chunk
    in flight finishes, a checkpoint is written, the hint says how to continue (also with
    log.progress=false), exit 128 + the signal's number. `resume=` from the CLI with a changed
    budget then goes on from there to the new budget."""
    run_dir = tmp_path / "run"
    proc = start(
        *QUICK_PPO,
        "budget.env_steps=1e8",
        "eval.every=2",
        "log.progress=false",
        f"log.dir={run_dir}",
    )
    wait_for_evals(run_dir, 2, proc)
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == code, stderr
    lines = error_lines(stderr)
    assert len(lines) == 1 and lines[0].startswith(f"{says}: checkpoint at iteration "), stderr
    assert lines[0].endswith(f"continue with resume={run_dir}")
    stopped = json.loads((run_dir / "summary.json").read_text())
    assert stopped["status"] == "interrupted"

    budget = stopped["env_steps"] + 6 * 128  # 6 more iterations of 4 envs x 32 steps
    result = cli(f"resume={run_dir}", f"budget.env_steps={budget}", "log.progress=false")
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith(f"resumed from iteration {stopped['iterations']} in {run_dir}")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed"
    assert summary["iterations"] == stopped["iterations"] + 6
    assert json.loads((run_dir / "config.json").read_text())["budget"]["env_steps"] == budget
    iterations = [int(r["iteration"]) for r in read_evals(run_dir)]
    assert iterations == sorted(set(iterations)) and iterations[-1] == summary["iterations"]


def test_sigterm_inside_a_long_evaluation_interval_stops_after_one_call(tmp_path: Path) -> None:
    """An evaluation interval longer than `checkpoint.call_seconds` runs as calls of about that
    long (before, as one: a SIGTERM with its 30-second grace, or a kill -9, lost up to a whole
    interval, 50 minutes of Pong): SIGTERM is answered after the call in flight with a
    checkpoint inside the interval, and checkpoints come between calls once `min_seconds` have
    passed. Resumed, the run ends with the parameters and the evaluation of the run left
    alone."""
    import jaxrl

    iterations = 3000  # of 4 envs x 32 steps; one evaluation, at the budget
    common = (
        *QUICK_PPO,
        f"budget.env_steps={iterations * 128}",
        "eval.every=100000",
        "log.progress=false",
        "log.tensorboard=false",
    )
    run_dir = tmp_path / "run"
    proc = start(
        *common, "checkpoint.call_seconds=0.2", "checkpoint.min_seconds=0", f"log.dir={run_dir}"
    )
    deadline = time.monotonic() + 240
    saved: list[int] = []
    while max(saved, default=0) == 0 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
        if (run_dir / "checkpoints").is_dir():
            saved = [int(p.name) for p in (run_dir / "checkpoints").iterdir() if p.name.isdigit()]
    assert max(saved, default=0) > 0, "no checkpoint inside the interval"
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr
    lines = error_lines(stderr)
    assert len(lines) == 1 and lines[0].startswith("stopped by SIGTERM: checkpoint at iteration ")
    stopped_at = int(lines[0].split("checkpoint at iteration ")[1].split()[0])
    assert 0 < stopped_at < iterations, stderr
    assert read_evals(run_dir) == []  # the interval's evaluation is still to come

    resumed = cli(f"resume={run_dir}", "log.progress=false")
    assert resumed.returncode == 0, resumed.stderr
    alone = tmp_path / "alone"
    assert cli(*common, f"log.dir={alone}").returncode == 0
    rows = {
        name: [{k: v for k, v in r.items() if k != "elapsed_seconds"} for r in read_evals(d)]
        for name, d in (("resumed", run_dir), ("alone", alone))
    }
    assert rows["resumed"] == rows["alone"] and len(rows["alone"]) == 1
    assert int(rows["alone"][0]["iteration"]) == iterations
    assert tree_equal(jaxrl.load(run_dir).params, jaxrl.load(alone).params)


def test_second_ctrl_c_stops_at_once_and_keeps_the_last_checkpoint(tmp_path: Path) -> None:
    """Two presses in a row: the second stops the process inside the chunk in flight (exit 130,
    one line, no traceback); the last checkpoint is intact and resumes. When the first press
    lands between chunks the run stops at once with its checkpoint, and the second, during
    shutdown, adds nothing (it used to add a KeyboardInterrupt traceback from JAX's atexit)."""
    run_dir = tmp_path / "run"
    # 40 iterations a chunk (a second or more): the second press lands inside one.
    proc = start(
        *QUICK_PPO,
        "budget.env_steps=1e8",
        "eval.every=40",
        "log.progress=false",
        f"log.dir={run_dir}",
    )
    wait_for_evals(run_dir, 1, proc)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    lines = error_lines(stderr)
    assert len(lines) == 1, stderr
    resume = f"continue with resume={re.escape(str(run_dir))}"
    assert re.fullmatch(
        rf"interrupted again: stopped at once; the checkpoint of iteration (\d+) is kept; {resume}"
        rf"|interrupted: checkpoint at iteration (\d+) in {re.escape(str(run_dir))}/checkpoints; "
        rf"{resume}",
        lines[0],
    ), lines[0]
    kept = int(re.search(r"iteration (\d+)", lines[0]).group(1))
    budget = (kept + 2) * 128
    result = cli(f"resume={run_dir}", f"budget.env_steps={budget}", "log.progress=false")
    assert result.returncode == 0, result.stderr
    assert f"resumed from iteration {kept} " in result.stderr


def test_second_ctrl_c_stops_a_chunk_of_host_envs_at_once(tmp_path: Path) -> None:
    """A program with host callbacks holds the thread that calls it until the chunk returns, and
    Python runs signal handlers only in the main thread: the second press waited for the whole
    chunk (50 minutes of Pong). The chunks run in a thread of their own, so the second press,
    landing in the first chunk (5,000 iterations, 640k host steps), stops the run there: one
    line naming the iteration-0 checkpoint, exit 130, and the async pool's workers, left with a
    broken pipe, end without a traceback or the resource tracker's warning."""
    from jaxrl.rundir import holds_run

    run_dir = tmp_path / "run"
    proc = start(
        *QUICK_PPO,
        "env=gym/CartPole-v1",
        "env.pool=async",
        "env.num_envs=2",
        "budget.env_steps=1e8",
        "eval.every=5000",
        "log.progress=false",
        f"log.dir={run_dir}",
    )
    deadline = time.monotonic() + 240
    while not holds_run(run_dir) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)  # the iteration-0 checkpoint: written just before the first chunk
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert error_lines(stderr) == [
        "interrupted again: stopped at once; the checkpoint of iteration 0 is kept; "
        f"continue with resume={run_dir}"
    ], stderr


API_SECOND_CTRL_C = """
import os, signal, sys, threading, time
from pathlib import Path
import jaxrl
from jaxrl.rundir import holds_run

run_dir = Path(sys.argv[1])

def press_twice():
    while not holds_run(run_dir):  # the iteration-0 checkpoint: just before the first chunk
        time.sleep(0.05)
    time.sleep(0.5)
    for _ in range(2):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)

threading.Thread(target=press_twice, daemon=True).start()
try:
    jaxrl.train("agent=ppo", "agent.num_steps=32", "agent.num_minibatches=2",
                "budget.env_steps=1e8", "eval.every=100000", "log.progress=false", run_dir=run_dir)
except KeyboardInterrupt:
    chunks = [t for t in threading.enumerate() if t.name.startswith("jaxrl-chunk")]
    print("KeyboardInterrupt, the chunk still running:", any(t.is_alive() for t in chunks))
    sys.stdout.flush()
    os._exit(0)
"""


def test_second_ctrl_c_from_the_python_api_raises_without_waiting_for_the_chunk(
    tmp_path: Path,
) -> None:
    """From `jaxrl.train` (a notebook) the second press raises KeyboardInterrupt in the caller
    while the chunk in flight (100,000 iterations, about a minute) is still running: the run's
    clean-up does not wait for it (the chunk thread is let go, not joined)."""
    script = tmp_path / "press.py"
    script.write_text(API_SECOND_CTRL_C)
    result = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": pythonpath()},
    )
    assert result.stdout.splitlines() == ["KeyboardInterrupt, the chunk still running: True"], (
        result.stdout + result.stderr
    )


def test_ctrl_c_during_start_up_stops_the_run(tmp_path: Path) -> None:
    """Pressed while Python imports and XLA compiles: the run does not go on (it used to, to
    exit 0, the KeyboardInterrupt swallowed in a JAX callback); one line, exit 130."""
    run_dir = tmp_path / "run"
    proc = start(*QUICK_PPO, "budget.env_steps=1e8", "log.progress=false", f"log.dir={run_dir}")
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    lines = error_lines(stderr)
    assert len(lines) == 1 and lines[0].startswith("interrupted"), stderr
    assert "Exception ignored" not in stderr and "Traceback" not in stderr


def test_nan_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path: Path) -> None:
    """σ = 3e38 overflows the perturbed weights: the run stops with one line, exit 1, leaving
    only the finite initial checkpoint."""
    run_dir = tmp_path / "nan"
    result = cli(
        "env=Pendulum-v1",
        "agent.sigma=3e38",
        *TINY_ES,
        "eval.every=1",
        "log.progress=false",
        f"log.dir={run_dir}",
    )
    assert_one_error_line(result, 1, "error: non-finite parameters")
    assert "last good checkpoint (iteration 0) is kept" in result.stderr
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["0"]
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "nan"


def cli_with_files_limited_to(
    max_bytes: int, tmp_path: Path, *args: str
) -> subprocess.CompletedProcess:
    """A CLI run whose files may not grow past `max_bytes` (RLIMIT_FSIZE: writes fail as on a
    full disk, not with a killed process), its XLA cache in `tmp_path` (entries hit the limit
    too, and their warnings are not the run's)."""

    def limit_file_size() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, resource.RLIM_INFINITY))

    return cli(
        *args,
        preexec_fn=limit_file_size,
        extra_env={"JAXRL_CACHE_DIR": str(tmp_path / "xla")},
    )


def test_a_full_disk_keeps_the_last_checkpoint(tmp_path: Path) -> None:
    """Files may not grow past 150 kB (RLIMIT_FSIZE: writes fail as on a full disk). DQN's
    replay buffer grows every iteration, so a checkpoint soon cannot be written: one line naming
    the reason, exit 1, summary.json with status failed, and the last complete checkpoint
    resumes once there is room."""
    run_dir = tmp_path / "run"
    result = cli_with_files_limited_to(
        150_000,
        tmp_path,
        "agent=dqn",
        "budget.env_steps=2e4",
        "eval.every=1",
        "checkpoint.min_seconds=0",
        "log.progress=false",
        f"log.dir={run_dir}",
    )
    assert result.returncode == 1, result.stderr
    errors = [line for line in error_lines(result.stderr) if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    found = re.fullmatch(
        r"error: could not write the checkpoint of iteration (\d+) to .*: File too large "
        r"\(errno 27\); the checkpoint of iteration (\d+) is kept",
        errors[0],
    )
    assert found, errors[0]
    assert "Traceback" not in result.stderr
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "failed"
    kept = int(found.group(2))
    resumed = cli(
        f"resume={run_dir}", f"budget.env_steps={(kept + 1) * 1024}", "log.progress=false"
    )
    assert resumed.returncode == 0, resumed.stderr
    assert f"resumed from iteration {kept} " in resumed.stderr


def test_a_first_checkpoint_that_cannot_be_written_stops_the_run(tmp_path: Path) -> None:
    """Files may not grow past 30 kB: the run directory's small files are written (the
    checkpoint's _METADATA is 12 kB), PPO's first checkpoint is not: with 128-unit layers each
    hidden kernel is 64 kB of random weights, which orbax writes whole into one data file (with
    the default 64 units the largest data file was 34 kB here, barely over the limit, and one CI
    run wrote its checkpoint under it). The first chunks train while it is written (in the
    background); the chunk that ends after the write failed stops the run, long before its
    budget of 1e8 steps: one line naming the reason, exit 1, summary.json with status failed."""
    run_dir = tmp_path / "run"
    result = cli_with_files_limited_to(
        30_000,
        tmp_path,
        *QUICK_PPO,
        "agent.hidden_sizes=[128,128]",
        "budget.env_steps=1e8",
        "log.progress=false",
        f"log.dir={run_dir}",
    )
    assert result.returncode == 1, result.stderr
    errors = [line for line in error_lines(result.stderr) if line.startswith("error:")]
    assert errors == [
        f"error: could not write the checkpoint of iteration 0 to {run_dir / 'checkpoints'}: "
        "File too large (errno 27); no checkpoint was written"
    ], result.stderr
    assert "Traceback" not in result.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["env_steps"] < 1e6


def test_memory_that_runs_out_while_training_keeps_the_first_checkpoint(tmp_path: Path) -> None:
    """The process may map at most 8 GiB (RLIMIT_AS), where the machine has more: the checks
    before the run pass, and the first chunk's ~9.6 GB rollout (16,384 envs x 1,024 steps)
    cannot be allocated. One line naming XLA's failed allocation and what to lower, exit 1,
    summary.json with status failed, the checkpoint of iteration 0 kept, no traceback."""
    import jax

    from jaxrl.loop import device_memory_bytes
    from jaxrl.rundir import holds_run

    if (device_memory_bytes(jax.devices("cpu")[0]) or 0) < 16 * 2**30:
        pytest.skip("the chunk must fit this machine's memory for its check to pass")
    limit = 8 * 2**30
    run_dir = tmp_path / "run"
    result = cli(
        "agent=ppo",
        "env=CartPole-v1",
        "env.num_envs=16384",
        "agent.num_steps=1024",
        "budget.env_steps=2e8",
        "log.progress=false",
        f"log.dir={run_dir}",
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)),
    )
    assert result.returncode == 1, result.stderr
    errors = [line for line in error_lines(result.stderr) if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    assert re.fullmatch(
        r"error: out of memory running iteration 1 \(RESOURCE_EXHAUSTED: Out of memory "
        r"allocating \d+ bytes\.\): lower env\.num_envs, .*; the checkpoint of iteration 0 "
        r"is kept",
        errors[0],
    ), errors[0]
    assert "Traceback" not in result.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["env_steps"] < 1e6
    assert holds_run(run_dir)


@pytest.mark.parametrize(
    ("pool", "callback"), [("sync", "auto"), ("async", "auto"), ("sync", "io")]
)
def test_an_env_that_raises_is_one_line_with_its_own_message(
    tmp_path: Path, pool: str, callback: str
) -> None:
    """callback=io is the host call GPUs and TPUs take, where JAX also logs the callback's failure
    and keeps it in a runtime token that its exit handlers wait on."""
    run_dir = tmp_path / "run"
    result = cli(
        *QUICK_PPO,
        "env=gym/faulty_envs:BreaksAtStep-v0",
        f"env.pool={pool}",
        f"env.callback={callback}",
        "env.num_envs=2",
        "log.progress=false",
        f"log.dir={run_dir}",
    )
    assert_one_error_line(
        result,
        1,
        "error: gym/faulty_envs:BreaksAtStep-v0: step raised RuntimeError: the pole snapped "
        "(step 30)",
    )
    assert (run_dir / "checkpoints" / "0").is_dir()


def test_a_killed_async_worker_is_one_line(tmp_path: Path) -> None:
    result = cli(
        *QUICK_PPO,
        "env=gym/faulty_envs:DiesAtStep-v0",
        "env.pool=async",
        "env.num_envs=2",
        "log.progress=false",
        f"log.dir={tmp_path / 'run'}",
    )
    assert_one_error_line(
        result, 1, "error: gym/faulty_envs:DiesAtStep-v0: async worker 0 died during step"
    )
    assert "killed by SIGKILL" in result.stderr


def test_kill_9_then_resume_logs_every_iteration_once(tmp_path: Path) -> None:
    """Killed between checkpoints (every 4th evaluation here), the run had logged evaluations
    the checkpoint does not hold; the resumed run redoes them, so evals.csv drops them first
    (each iteration once, in order) and TensorBoard is told to hide them (purge_step)."""
    from tensorboardX.proto.event_pb2 import Event

    run_dir = tmp_path / "run"
    proc = start(
        *QUICK_PPO,
        "budget.env_steps=1e8",
        "eval.every=1",
        "checkpoint.every=4",
        "checkpoint.min_seconds=0",
        "log.progress=false",
        f"log.dir={run_dir}",
    )
    wait_for_evals(run_dir, 6, proc)
    # Killed where it had logged past its last checkpoint: stopped (SIGSTOP) to look, so that
    # the run cannot reach its next checkpoint between the look and the kill.
    deadline = time.monotonic() + 120
    while True:
        proc.send_signal(signal.SIGSTOP)
        checkpoints = sorted(
            int(p.name) for p in (run_dir / "checkpoints").iterdir() if p.name.isdigit()
        )
        logged = [int(r["iteration"]) for r in read_evals(run_dir)]
        if logged[-1] > checkpoints[-1] or time.monotonic() > deadline:
            break
        proc.send_signal(signal.SIGCONT)
        time.sleep(0.02)
    proc.kill()
    proc.communicate(timeout=60)
    assert logged[-1] > checkpoints[-1]  # there is something to drop

    target = (max(logged) + 3) * 128
    result = cli(f"resume={run_dir}", f"budget.env_steps={target}", "log.progress=false")
    assert result.returncode == 0, result.stderr
    rows = list(read_evals(run_dir))
    iterations = [int(r["iteration"]) for r in rows]
    assert iterations == list(range(1, max(logged) + 4)), iterations
    events = sorted((run_dir / "tb" / "seed_0").iterdir(), key=lambda p: p.stat().st_mtime)
    records = [Event.FromString(r) for r in tensorboard_events(events[-1])]
    (first,) = [e for e in records if e.session_log.status == e.session_log.START]
    assert first.step == checkpoints[-1] * 128 + 1  # events past the checkpoint are hidden


def test_a_refused_run_removes_only_the_directories_it_made(tmp_path: Path) -> None:
    """A run refused once claimed (its program cannot fit) leaves no trace: `claim` removes the
    directories the run made, deepest first, while nothing but its lock is in them, and keeps
    those it found (even empty) and any it wrote into."""
    from jaxrl.config import ConfigError
    from jaxrl.rundir import LOCK_FILE, claim, missing_dirs

    found = tmp_path / "found"
    found.mkdir()
    run_dir = found / "a" / "b"
    made = missing_dirs(run_dir)
    assert made == [run_dir, found / "a"]
    with pytest.raises(ConfigError), claim(run_dir, resume=False, made_here=made):
        raise ConfigError("refused")
    assert found.is_dir() and list(found.iterdir()) == []

    made = missing_dirs(run_dir)
    with pytest.raises(RuntimeError), claim(run_dir, resume=False, made_here=made):
        (run_dir / "config.json").write_text("{}")
        raise RuntimeError("failed once written")
    assert sorted(p.name for p in run_dir.iterdir()) == [LOCK_FILE, "config.json"]

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError), claim(empty, resume=False, made_here=missing_dirs(empty)):
        raise ConfigError("refused")
    assert [p.name for p in empty.iterdir()] == [LOCK_FILE]


def test_one_run_directory_has_one_writer(tmp_path: Path) -> None:
    """A second run, or a resume, into a directory a live run is writing is refused (exit 2)
    and the live run is unharmed; the lock is the kernel's, released however the run ends."""
    run_dir = tmp_path / "run"
    proc = start(
        *QUICK_PPO,
        "budget.env_steps=1e8",
        "eval.every=5",
        "log.progress=false",
        f"log.dir={run_dir}",
    )
    wait_for_evals(run_dir, 1, proc)
    for args in ([*QUICK_PPO, f"log.dir={run_dir}"], [f"resume={run_dir}"]):
        result = cli(*args)
        label = f"resume={run_dir}" if args[0].startswith("resume") else f"log.dir={run_dir}"
        assert_one_error_line(result, 2, f"error: {label}: another run (process {proc.pid})")
    proc.kill()
    proc.communicate(timeout=60)
    result = cli(f"resume={run_dir}", "budget.env_steps=1e3", "log.progress=false")
    assert result.returncode == 0, result.stderr  # kill -9 left no stale lock


def test_load_refuses_observations_of_the_wrong_shape(finished_run: Path) -> None:
    import jaxrl

    policy = jaxrl.load(finished_run)
    assert policy(np.zeros(4)).shape == () and policy(np.zeros((3, 4))).shape == (3,)
    for bad in (np.float32(1.0), np.zeros(3), np.zeros((2, 5))):
        with pytest.raises(ValueError, match=r"takes an observation of shape \(4,\) or a batch"):
            policy(bad)
