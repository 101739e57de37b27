"""Checkpoints: the whole training carry (all seeds) through orbax, plus host-side progress as JSON.

Orbax writes each step into a temporary directory and renames it when complete, so a crash or a
Ctrl-C while saving never leaves a half-written checkpoint as the latest one. The replay
buffers' items are an item of that step of their own (`replay/`: the filled rows of each array
as a raw file, written from zero-copy views of the array's shards), because orbax's array
writer holds about two extra copies of what it writes and a replay buffer is most of a run's
memory (benchmarks/results/design_notes.md). With `replay_buffers=False` the items are not
written; a restore gives back the empty buffers of the structure it restores into.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import errno
import itertools
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

from jaxrl.config import ConfigError
from jaxrl.distributed import is_distributed
from jaxrl.prng import data_to_keys, keys_to_data
from jaxrl.replay import ReplayState

# orbax logs every save at INFO through absl; the run's own console output says enough.
logging.getLogger("absl").setLevel(logging.WARNING)


class CheckpointError(OSError):
    """A checkpoint could not be written (a full disk, a read-only directory); the message says
    which and why in one line. The previous checkpoints are intact."""


@contextlib.contextmanager
def _quiet_orbax() -> Iterator[None]:
    """A failed write is reported once, by the error orbax raises. Around it orbax logs the
    failure at ERROR from each of its threads; the save's event loop is closed while tensorstore
    still finishes the other writes in flight, whose completions then report "Event loop is
    closed" as unraisable exceptions and asyncio logs their never-retrieved failures (a
    traceback each). Those writes belong to the failed checkpoint, which is discarded, and the
    run stops: after a failure the filters stay in place, since the reports arrive late."""
    loggers = [logging.getLogger("absl"), logging.getLogger("asyncio")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    previous_hook = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        value = unraisable.exc_value
        if isinstance(value, RuntimeError) and str(value) == "Event loop is closed":
            return
        previous_hook(unraisable)

    sys.unraisablehook = hook
    yield
    sys.unraisablehook = previous_hook
    for logger, level in zip(loggers, levels, strict=True):
        logger.setLevel(level)


def _os_reason(e: BaseException) -> str:
    """The operating system's reason inside an orbax/tensorstore error, else its first line."""
    text = str(e)
    if isinstance(e, OSError) and e.strerror:
        return f"{e.strerror} (errno {e.errno})" if e.errno else e.strerror
    # Tensorstore versions word it differently: an errno number (`[os_error_code='27']`,
    # `[OS error 27]`), or only the OS's text.
    found = re.search(r"(?:os_error_code|OS error|errno)\D{0,4}(\d+)", text, re.IGNORECASE)
    if found and int(found.group(1)) in errno.errorcode:
        return f"{os.strerror(int(found.group(1)))} (errno {found.group(1)})"
    for number in sorted(errno.errorcode):
        if os.strerror(number) in text:
            return f"{os.strerror(number)} (errno {number})"
    lines = text.strip().splitlines()
    return lines[0][:200] if lines else type(e).__name__


def _is_buffer(x: Any) -> bool:
    return isinstance(x, ReplayState)


def _without_buffer_items(tree: Any) -> Any:
    return jax.tree.map(
        lambda x: x._replace(data=None) if _is_buffer(x) else x, tree, is_leaf=_is_buffer
    )


def _empty(buffer: ReplayState) -> ReplayState:
    return jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), buffer)


def _buffers(tree: Any) -> list[ReplayState]:
    return [x for x in jax.tree.leaves(tree, is_leaf=_is_buffer) if _is_buffer(x)]


def _filled_rows(buffer: ReplayState) -> int:
    """Rows of the buffer's arrays that hold items (the most of any run): the rest are zeros."""
    return int(np.max(np.asarray(buffer.size)))


def _host_parts(x: jax.Array, batch_axes: int) -> list[np.ndarray]:
    """The array's bytes on the host, in order: views of its shards where they already are (CPU
    devices), without a copy. `np.asarray` of an array spread over devices assembles a whole host
    copy and keeps it with the array: it is the fall-back only."""
    shards = _shards_in_order(x, batch_axes)
    if shards is not None and all(shard.device.platform == "cpu" for shard in shards):
        return [np.from_dlpack(shard.data) for shard in shards]
    return [np.asarray(x)]


def _shards_in_order(x: jax.Array, batch_axes: int) -> list[Any] | None:
    """Shards holding each byte once, in order: one copy of a replicated array (one process's,
    or the carry every process of a distributed run holds), or one shard per slice of an array
    split over the runs' axis alone, in run order. None for any other layout."""
    if x.is_fully_replicated:
        return x.addressable_shards[:1]
    if not x.is_fully_addressable or batch_axes == 0:
        return None
    shards = [shard for shard in x.addressable_shards if shard.replica_id == 0]
    if any(index != slice(None) for shard in shards for index in shard.index[1:]):
        return None
    return sorted(shards, key=lambda shard: shard.index[0].start or 0)


class _ReplayItemsHandler(ocp.CheckpointHandler):
    """The filled rows of every replay buffer's arrays as raw files `<buffer>_<leaf>.bin`,
    written from host views of the arrays (no copy on a CPU), the runs of a batch in order."""

    def save(self, directory: Any, args: ReplayItemsSave) -> None:
        Path(directory).mkdir(parents=True, exist_ok=True)
        for b, buffer in enumerate(args.buffers):
            rows, batch_axes = _filled_rows(buffer), np.ndim(buffer.size)
            for i, item in enumerate(jax.tree.leaves(buffer.data)):
                with open(Path(directory) / f"{b}_{i}.bin", "wb") as f:
                    for view in _host_parts(item, batch_axes):
                        for index in np.ndindex(view.shape[:batch_axes]):
                            part = np.ascontiguousarray(view[index][:rows])
                            if part.size:  # memoryview cannot cast an empty array
                                f.write(memoryview(part).cast("B"))
                    f.flush()
                    os.fsync(f.fileno())

    def restore(self, directory: Any, args: ReplayItemsRestore) -> Any:
        """`args.restored` (buffers without items, their counters restored) with the items put
        back into buffers shaped like `args.like`'s; rows past the filled ones are zeros."""
        directory = Path(directory)
        buffer_numbers = itertools.count()  # in tree order, as they were saved

        def refill(saved: Any, fresh: Any) -> Any:
            if not _is_buffer(saved):
                return saved
            b = next(buffer_numbers)
            rows, batch_axes = _filled_rows(saved), np.ndim(saved.size)
            leaves = []
            for i, shape in enumerate(jax.tree.leaves(fresh.data)):
                items = np.zeros(shape.shape, shape.dtype)
                with open(directory / f"{b}_{i}.bin", "rb") as f:
                    for index in np.ndindex(items.shape[:batch_axes]):
                        part = items[index][:rows]
                        part[...] = np.fromfile(f, shape.dtype, part.size).reshape(part.shape)
                leaves.append(jnp.asarray(items))
            return saved._replace(data=jax.tree.unflatten(jax.tree.structure(fresh.data), leaves))

        return jax.tree.map(refill, args.restored, args.like, is_leaf=_is_buffer)

    def metadata(self, directory: Any) -> None:
        return None


@ocp.args.register_with_handler(_ReplayItemsHandler, for_save=True)
@dataclasses.dataclass
class ReplayItemsSave(ocp.args.CheckpointArgs):
    buffers: list[ReplayState]


@ocp.args.register_with_handler(_ReplayItemsHandler, for_restore=True)
@dataclasses.dataclass
class ReplayItemsRestore(ocp.args.CheckpointArgs):
    restored: Any  # the restored tree, buffers without items
    like: Any  # arrays or ShapeDtypeStructs of the full tree


def _leaf_shapes(tree: Any) -> dict[str, tuple[int, ...] | None]:
    """Each leaf's dotted path and shape (None where the leaf has none)."""
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {
        jax.tree_util.keystr(path, simple=True, separator="."): getattr(leaf, "shape", None)
        for path, leaf in leaves
    }


def state_differences(saved: Any, wanted: Any) -> str:
    """What a restore's tree (`wanted`) and the checkpoint's (`saved`, orbax's metadata) do not
    share: paths one side lacks, shapes that differ; "" when they agree."""
    have, want = _leaf_shapes(saved), _leaf_shapes(wanted)
    parts = []
    if missing := sorted(want.keys() - have.keys()):
        parts.append(f"the checkpoint lacks {', '.join(missing)}")
    if extra := sorted(have.keys() - want.keys()):
        parts.append(f"it holds {', '.join(extra)}, which this version does not")
    reshaped = [
        f"{path} is {have[path]} there, {want[path]} here"
        for path in sorted(have.keys() & want.keys())
        if have[path] is not None and want[path] is not None and tuple(have[path]) != want[path]
    ]
    if reshaped:
        parts.append("; ".join(reshaped))
    return "; ".join(parts)


class Checkpointer:
    def __init__(self, directory: Path, keep: int, replay_buffers: bool = True) -> None:
        self.directory = Path(directory).absolute()
        self.replay_buffers = replay_buffers
        self._manager = ocp.CheckpointManager(
            self.directory,
            # A write cut short (full disk, kill) leaves a temporary directory: removed here.
            options=ocp.CheckpointManagerOptions(
                max_to_keep=keep, enable_async_checkpointing=False, cleanup_tmp_directories=True
            ),
        )
        # Background writes (`save(background=True)`) run here, one at a time.
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="jaxrl-checkpoint")
        self._writing: Future[None] | None = None

    def save(
        self,
        step: int,
        state: Any,
        meta: dict[str, Any],
        written: Callable[[], None] = lambda: None,
        background: bool = False,
    ) -> None:
        """Write checkpoint `step` of `state`, then call `written`. A write still in flight
        completes first (its CheckpointError is raised here).

        With `background`, where the state holds no replay items and the run is one process,
        only the host copy is made before this returns: the files are written on a thread of
        their own while training goes on (`wait` for them; `written` is called from that
        thread): orbax's write of even a small state is a share of a short run
        (benchmarks/results/checkpoint_overlap.md). Replay items are written from views of the
        device arrays, which the next chunk reuses, and a distributed save is a collective every
        process makes in order: those write before this returns."""
        self.wait()
        buffers = _buffers(state) if self.replay_buffers else []
        saved = keys_to_data(_without_buffer_items(state))
        background = background and not buffers and not is_distributed()
        if not is_distributed():
            # One transfer of the whole tree: orbax takes numpy leaves in about half the time of
            # device arrays, whose host copies it makes one slice at a time. (The arrays of
            # several processes stay global: each writes its own shards.) A background write
            # takes copies: a CPU array's host view would be the buffer the next chunk reuses.
            saved = jax.device_get(saved)
            if background:
                saved = jax.tree.map(np.array, saved)
        if background:  # the caller's totals move on while the files are written
            meta = copy.deepcopy(meta)
        parts = {
            "state": ocp.args.StandardSave(saved),
            "meta": ocp.args.JsonSave(meta),
        }
        if buffers:
            parts["replay"] = ReplayItemsSave(buffers)
        if background:
            self._writing = self._writer.submit(self._write, step, parts, written)
        else:
            self._write(step, parts, written)

    def wait(self) -> None:
        """Until the background write in flight (if any) is on disk; raises its
        CheckpointError."""
        writing, self._writing = self._writing, None
        if writing is not None:
            writing.result()

    def raise_failed_write(self) -> None:
        """The CheckpointError of a background write that has already failed; nothing while it
        is in flight or once it succeeded. Polled between chunks, so that a run whose writes
        fail stops at the next chunk rather than at its next checkpoint."""
        if self._writing is not None and self._writing.done():
            self.wait()

    def _write(self, step: int, parts: dict[str, Any], written: Callable[[], None]) -> None:
        try:
            with _quiet_orbax():
                self._manager.save(step, args=ocp.args.Composite(**parts), force=True)
                self._manager.wait_until_finished()
        except Exception as e:
            if is_distributed() and isinstance(e, jax.errors.JaxRuntimeError):
                raise  # a collective whose peer stopped: `jaxrl.distributed` names it
            raise CheckpointError(
                f"could not write the checkpoint of iteration {step} to {self.directory}: "
                f"{_os_reason(e)}"
            ) from e
        written()

    def latest_step(self) -> int | None:
        return self._manager.latest_step()

    def restore(self, like: Any, step: int | None = None) -> tuple[Any, dict[str, Any]]:
        """Restore into the structure of `like` (arrays or ShapeDtypeStructs)."""
        step = self.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"no checkpoint in {self.directory}")
        saved_like = _without_buffer_items(like)
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, keys_to_data(saved_like))
        # A checkpoint written by a version whose state differs, checked on its metadata before
        # any read: orbax refuses other paths mid-read and hands back other shapes as saved.
        handler = ocp.StandardCheckpointHandler()
        try:
            saved = handler.metadata(self.directory / str(step) / "state")
        finally:
            handler.close()
        if differences := state_differences(saved, abstract):
            raise ConfigError(
                f"the checkpoint of iteration {step} in {self.directory} holds another state "
                f"than this jaxrl builds for the run ({differences}): it was written by another "
                "version; continue it with that version, or start a fresh run"
            )
        restored = self._manager.restore(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardRestore(abstract), meta=ocp.args.JsonRestore()
            ),
        )
        state = data_to_keys(restored.state, saved_like)
        replay = self.directory / str(step) / "replay"
        if self.replay_buffers and replay.is_dir():
            state = self._manager.restore(
                step, args=ocp.args.Composite(replay=ReplayItemsRestore(state, like))
            ).replay
        else:  # empty buffers shaped like those of `like`
            state = jax.tree.map(
                lambda saved, fresh: _empty(fresh) if _is_buffer(saved) else saved,
                state,
                like,
                is_leaf=_is_buffer,
            )
        return state, restored.meta

    def close(self) -> None:
        """Waits for a background write in flight: a run left by an error keeps its last
        checkpoint (the error of that write, if any, is the run's second and not raised)."""
        with contextlib.suppress(CheckpointError):
            self.wait()
        self._writer.shutdown()
        self._manager.close()


def saved_steps(directory: Path) -> list[int]:
    """The iterations of the finished checkpoints in `directory`, oldest first (temporary
    directories of a write in progress are left out), read without a CheckpointManager: a
    read-only manager logs two warnings per load."""
    directory = Path(directory).absolute()
    return sorted(ocp.utils.checkpoint_steps(directory)) if directory.is_dir() else []


def saved_meta(directory: Path, step: int) -> dict[str, Any]:
    """The host-side totals saved beside the state of checkpoint `step` (`Checkpointer.save`'s
    `meta`: each run's env steps, its last evaluation)."""
    return json.loads((Path(directory) / str(step) / "meta" / "metadata").read_text())


def restore_agent_states(directory: Path, like: Any, step: int | None = None) -> Any:
    """Only the agents' states (`Carry.agent_state`) of checkpoint `step` (default: the latest)
    in `directory`, without their replay buffers' items (those become None): what a policy
    needs, read without knowing the env state's structure and without reading a buffer of
    gigabytes. Read-only: a run still writing there is left alone (no cleanup of its temporary
    directories)."""
    directory = Path(directory).absolute()
    steps = saved_steps(directory)
    if not steps:
        raise FileNotFoundError(f"no checkpoint in {directory}")
    step = steps[-1] if step is None else step
    device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
    target = {"agent_state": _without_buffer_items(like)}
    abstract = jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=device), keys_to_data(target)
    )
    with ocp.PyTreeCheckpointer() as reader:
        restored = reader.restore(
            directory / str(step) / "state",
            args=ocp.args.PyTreeRestore(
                abstract,
                restore_args=ocp.checkpoint_utils.construct_restore_args(abstract),
                partial_restore=True,
            ),
        )
    return data_to_keys(restored["agent_state"], target["agent_state"])
