"""Checkpoints without replay buffers (`checkpoint.replay_buffer=false`): what is written, what a
restore gives back, and that an off-policy learner waits for its buffer to refill."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cli_helpers import TINY_ES, read_evals
from jax.sharding import Mesh, NamedSharding, PartitionSpec

import envs
from agents.dqn import DQNConfig, make_dqn
from jaxrl import replay
from jaxrl.checkpoint import Checkpointer, CheckpointError, _os_reason
from jaxrl.config import ConfigError, EnvConfig
from jaxrl.prng import make_key

CAPACITY = 50_000


def carry_with_a_buffer() -> dict:
    buffer = replay.init(jnp.zeros((8,), jnp.float32), CAPACITY)
    items = jnp.arange(CAPACITY * 8, dtype=jnp.float32).reshape(CAPACITY, 8)
    return {"params": jnp.arange(5.0), "buffer": replay.add(buffer, items), "key": make_key(3)}


def disk_bytes(directory: Path) -> int:
    return sum(f.stat().st_size for f in directory.rglob("*") if f.is_file())


def test_a_checkpoint_without_buffers_restores_them_empty(tmp_path: Path) -> None:
    carry = carry_with_a_buffer()
    sizes = {}
    for keep_buffers in (True, False):
        ckpt = Checkpointer(tmp_path / str(keep_buffers), 1, replay_buffers=keep_buffers)
        ckpt.save(1, carry, {"note": 1})
        restored, meta = ckpt.restore(jax.eval_shape(lambda: carry))
        ckpt.close()
        sizes[keep_buffers] = disk_bytes(tmp_path / str(keep_buffers))
        assert meta == {"note": 1}
        np.testing.assert_array_equal(restored["params"], carry["params"])
        np.testing.assert_array_equal(
            jax.random.key_data(restored["key"]), jax.random.key_data(carry["key"])
        )
        buffer = restored["buffer"]
        if keep_buffers:
            np.testing.assert_array_equal(buffer.data, carry["buffer"].data)
            assert int(buffer.size) == CAPACITY
        else:
            assert buffer.data.shape == (CAPACITY, 8)
            assert int(buffer.size) == 0 and int(buffer.position) == 0
            assert not np.asarray(buffer.data).any()
    # The buffer is 1.6 MB of float32; the rest is a few bytes and orbax's metadata.
    assert sizes[False] < sizes[True] - 1_000_000


@pytest.mark.parametrize("spread", [False, True], ids=["one-device", "runs-over-devices"])
def test_buffers_of_several_runs_keep_only_their_filled_rows_on_disk(
    tmp_path: Path, spread: bool
) -> None:
    """A batch of 4 runs' buffers holding 5, 0, 2 and 3 items of 4 float32: the file holds each
    run's first max(size) = 5 rows in run order (4 x 5 x 4 x 4 bytes = 320), and a restore gives
    back every item and zeros past them, bit for bit, with the counters. Spread over two CPU
    devices (the trainer's runs over the cores), the runs' shards are written as they lie."""
    one = replay.init(jnp.zeros((4,), jnp.float32), 16)
    counts = (5, 0, 2, 3)
    filled = [
        replay.add(one, jnp.arange(n * 4, dtype=jnp.float32).reshape(n, 4) + 100 * r) if n else one
        for r, n in enumerate(counts)
    ]
    buffers = jax.tree.map(lambda *xs: jnp.stack(xs), *filled)
    if spread:
        devices = jax.local_devices()[:2]
        if len(devices) < 2:
            pytest.skip("one CPU device: the runs cannot spread")
        runs = NamedSharding(Mesh(np.array(devices), ("runs",)), PartitionSpec("runs"))
        buffers = jax.device_put(buffers, runs)
        assert len(buffers.data.addressable_shards) == 2
    carry = {"buffer": buffers, "step": jnp.int32(7)}
    ckpt = Checkpointer(tmp_path, 1)
    ckpt.save(3, carry, {})
    restored, _ = ckpt.restore(jax.eval_shape(lambda: carry))
    ckpt.close()
    written = np.fromfile(tmp_path / "3" / "replay" / "0_0.bin", np.float32)
    np.testing.assert_array_equal(written, np.asarray(buffers.data)[:, :5].ravel())
    assert written.nbytes == 4 * 5 * 4 * 4
    np.testing.assert_array_equal(restored["buffer"].data, buffers.data)
    np.testing.assert_array_equal(restored["buffer"].size, counts)
    assert not np.asarray(restored["buffer"].data)[:, 5:].any()


def test_the_learner_waits_for_an_emptied_buffer_to_refill() -> None:
    """Past learning_starts (env_steps 10k) with an empty buffer, an iteration of 16 env steps
    does not update (100 are needed); the same state with a full buffer does."""
    cfg = DQNConfig(
        learning_starts=100,
        batch_size=32,
        buffer_size=1000,
        train_freq=8,
        gradient_steps=1,
        iteration_steps=16,
    )
    env = envs.make(EnvConfig(id="CartPole-v1"), 2)
    agent = make_dqn(cfg, env, total_env_steps=20_000)
    state = agent.init(make_key(0))._replace(env_steps=jnp.asarray(10_000, jnp.int32))
    full = state._replace(buffer=state.buffer._replace(size=jnp.asarray(1000, jnp.int32)))
    env_state = env.reset(make_key(1))
    step = jax.jit(agent.train_step)
    before = agent.params(state)
    after_empty = agent.params(step(state, env_state, make_key(2))[0])
    after_full = agent.params(step(full, env_state, make_key(2))[0])
    np.testing.assert_array_equal(after_empty, before)
    assert np.abs(np.asarray(after_full - before)).max() > 0


def test_a_chunk_reuses_the_carry_it_was_given() -> None:
    """The loop donates the carry to each chunk, so a replay buffer is updated in place rather
    than held twice: the arrays passed in are gone afterwards, for one run and for several."""
    from jaxrl.cli import compose
    from jaxrl.loop import Trainer

    for seeds in (1, 2):
        trainer = Trainer(
            compose(["agent=dqn", "agent.buffer_size=1000", "eval.every=1", f"num_seeds={seeds}"])
        )
        carry = trainer.initial_carry()
        new_carry, _ = trainer.chunk(carry, trainer.hyper, 1, True)
        assert all(leaf.is_deleted() for leaf in jax.tree.leaves(carry.agent_state.buffer))
        assert not any(leaf.is_deleted() for leaf in jax.tree.leaves(new_carry))


def test_an_off_policy_run_resumed_from_its_buffer_equals_the_run_uninterrupted(
    tmp_path: Path,
) -> None:
    """DQN, 2 seeds: 1024 env steps, then resumed to 2048 from that checkpoint (replay items read
    back from their raw files), against 2048 in one go: the same parameters and buffers, bit for
    bit, and the buffer does hold items at the checkpoint."""
    import jaxrl

    overrides = (
        "agent=dqn",
        "agent.learning_starts=256",
        "agent.anneal_lr=false",  # else the learning rate's horizon is the budget, which differs
        "num_seeds=2",
        "eval.every=1",  # a chunk per 1024-step iteration: the resume starts at a chunk boundary
    )
    quiet = ("log.progress=false", "log.tensorboard=false")
    full = jaxrl.train(*overrides, *quiet, "budget.env_steps=2048", run_dir=tmp_path / "full")
    part_dir = tmp_path / "part"
    part = jaxrl.train(*overrides, *quiet, "budget.env_steps=1024", run_dir=part_dir)
    assert int(np.min(part.carry.agent_state.buffer.size)) > 0
    resumed = jaxrl.train(f"resume={part_dir}", "budget.env_steps=2048", run_dir=part_dir)
    assert resumed.status == "completed"
    for got, want in zip(
        jax.tree.leaves(resumed.carry.agent_state),
        jax.tree.leaves(full.carry.agent_state),
        strict=True,
    ):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_a_checkpoint_of_another_state_is_refused_naming_what_differs(tmp_path: Path) -> None:
    """A checkpoint written by a version whose state had other fields or shapes: the restore is a
    ConfigError naming what differs, not orbax's ValueError (other fields) or a state of the
    saved shapes (which orbax gives back as they were) that the run's program cannot take."""
    ckpt = Checkpointer(tmp_path, 1)
    ckpt.save(1, {"params": jnp.arange(3.0), "old": jnp.zeros(2)}, {})
    newer = {"params": jnp.zeros(3), "episodes": jnp.zeros((), jnp.int32)}
    with pytest.raises(ConfigError) as refused:
        ckpt.restore(jax.eval_shape(lambda: newer))
    ckpt.close()
    message = str(refused.value)
    assert "\n" not in message and "iteration 1" in message
    assert "(the checkpoint lacks episodes; it holds old, which this version does not)" in message
    with pytest.raises(ConfigError, match=r"\(params is \(3,\) there, \(4,\) here\)"):
        ckpt = Checkpointer(tmp_path, 1)
        ckpt.restore(jax.eval_shape(lambda: {"params": jnp.zeros(4), "old": jnp.zeros(2)}))
    ckpt.close()


def test_a_background_write_holds_the_state_and_totals_it_was_given(tmp_path: Path) -> None:
    """`save(background=True)` returns once it has host copies; the files written after it hold
    the state and totals as they were then, though the caller moves on (`written` is called once
    they are on disk). A buffer's items are written before it returns."""
    ckpt = Checkpointer(tmp_path / "plain", 2)
    state = {"params": jnp.arange(4.0), "key": make_key(1)}
    meta = {"progress": {"iteration": 1}}
    done = []
    ckpt.save(1, state, meta, lambda: done.append(1), background=True)
    meta["progress"]["iteration"] = 2  # the loop's totals move on while the files are written
    ckpt.wait()
    assert done == [1] and ckpt.latest_step() == 1
    restored, saved = ckpt.restore(jax.eval_shape(lambda: state))
    ckpt.close()
    assert saved == {"progress": {"iteration": 1}}
    np.testing.assert_array_equal(restored["params"], np.arange(4.0))
    buffered = Checkpointer(tmp_path / "buffer", 2)
    buffered.save(1, carry_with_a_buffer(), {}, lambda: done.append(2), background=True)
    assert done == [1, 2]  # written before save returned
    buffered.close()


def test_a_failed_background_write_is_raised_between_chunks(tmp_path: Path, monkeypatch) -> None:
    """A background write that failed raises its CheckpointError at the next poll between
    chunks (`raise_failed_write`) or wait, once; `written` is not called."""
    ckpt = Checkpointer(tmp_path, 2)

    def full_disk(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ckpt._manager, "save", full_disk)
    done = []
    ckpt.save(3, {"params": jnp.ones(2)}, {}, lambda: done.append(3), background=True)
    with pytest.raises(
        CheckpointError, match=r"iteration 3 .*No space left on device \(errno 28\)"
    ):
        ckpt._writing.exception()  # until the write has failed
        ckpt.raise_failed_write()
    ckpt.raise_failed_write()  # reported once
    ckpt.wait()
    assert done == [] and ckpt.latest_step() is None
    ckpt.close()


def test_a_failed_write_names_the_operating_systems_reason_in_every_wording() -> None:
    """The reason a checkpoint could not be written, from the texts tensorstore versions give
    (the CPU image's and the GPU image's differ) or an OSError."""
    disk = "File too large (errno 27)"
    current = "OUT_OF_RANGE: Error writing \"x\": File too large [os_error_code='27'] [source...]"
    assert _os_reason(RuntimeError(current)) == disk
    numbered = 'OUT_OF_RANGE: Error writing "agent_state/0" in OCDBT database [OS error 27]'
    assert _os_reason(RuntimeError(numbered)) == disk
    worded = 'OUT_OF_RANGE: Error writing "agent_state/0" in OCDBT database: File too large'
    assert _os_reason(RuntimeError(worded)) == disk
    full = "No space left on device"
    assert _os_reason(OSError(28, full)) == f"{full} (errno 28)"
    assert _os_reason(RuntimeError("first line\nsecond")) == "first line"


@pytest.mark.parametrize(
    "overrides",
    [
        ("agent=ppo", "agent.num_steps=32", "agent.num_minibatches=2", "budget.env_steps=2048"),
        ("agent=es", *TINY_ES, "num_seeds=2", "budget.env_steps=8000"),
    ],
    ids=["ppo", "es"],
)
def test_an_interval_run_as_many_calls_gives_the_numbers_of_one_call(
    tmp_path: Path, overrides: tuple[str, ...]
) -> None:
    """A tiny `checkpoint.call_seconds`: every call of the compiled program trains one iteration
    and only the interval's last evaluates. Parameters and evaluations equal those of one call
    per interval, for iterations of fixed env steps (PPO, 16 iterations in intervals of 5) and
    for whole episodes, where each seed stops at its own budget inside an interval and is
    evaluated when the interval ends (ES, 2 seeds)."""
    import jaxrl

    common = (*overrides, "eval.every=5", "log.progress=false", "log.tensorboard=false")
    results = {}
    for name, call_seconds in (("one call", 10.0), ("many calls", 1e-9)):
        run_dir = tmp_path / name.replace(" ", "_")
        result = jaxrl.train(*common, f"checkpoint.call_seconds={call_seconds}", run_dir=run_dir)
        rows = [
            {k: v for k, v in row.items() if k != "elapsed_seconds"} for row in read_evals(run_dir)
        ]
        results[name] = result, rows
    (one, one_rows), (many, many_rows) = results["one call"], results["many calls"]
    assert one.status == many.status == "completed"
    assert many_rows == one_rows and len(one_rows) >= 4
    steps = {row["seed"]: int(row["env_steps"]) for row in one_rows}
    assert min(steps.values()) >= one.trainer.budget  # each seed's last row: at its budget
    for got, want in zip(
        jax.tree.leaves(many.carry.agent_state), jax.tree.leaves(one.carry.agent_state), strict=True
    ):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_calls_are_timed_afresh_where_an_off_policy_warm_up_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DQN, 1,024 env steps an iteration, updates from 4,096 (`learn_after`), intervals of 8
    iterations, calls of up to 1,000 s: a first call of one iteration times them, the next ends
    where the warm-up does (iteration 4), one iteration times the slower ones, and the rest of
    the interval is one call; the next interval is one call. Only each interval's last call
    evaluates."""
    import jaxrl
    from jaxrl import loop

    calls: list[tuple[int, bool]] = []
    run_chunk = loop._run_chunk

    def recorded(*args: Any) -> Any:  # (compiled, carry, hyperparameters, iterations, evaluate)
        calls.append(args[3:])
        return run_chunk(*args)

    monkeypatch.setattr(loop, "_run_chunk", recorded)
    result = jaxrl.train(
        "agent=dqn",
        "agent.learning_starts=4096",
        "budget.env_steps=16384",
        "eval.every=8",
        "checkpoint.call_seconds=1000",
        "log.progress=false",
        "log.tensorboard=false",
        run_dir=tmp_path / "run",
    )
    assert result.status == "completed"
    assert result.trainer.agent.slower_from == 4096
    assert calls == [(1, False), (3, False), (1, False), (3, True), (8, True)]
    assert loop._call_size(50, None, None, 10.0) == 1  # nothing timed yet
    assert loop._call_size(50, None, 0.1, 10.0) == 50  # 100 fit; the interval's rest is 50
    assert loop._call_size(50, None, 0.5, 10.0) == 20
    assert loop._call_size(50, 7, 0.1, 10.0) == 7  # iterations turn slower after 7
    assert loop._call_size(50, None, 30.0, 10.0) == 1  # one iteration takes longer than a call
