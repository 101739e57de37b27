"""Checkpoints: the whole training carry (all seeds) through orbax, plus host-side progress as JSON.

Orbax writes each step into a temporary directory and renames it when complete, so a crash or a
Ctrl-C while saving never leaves a half-written checkpoint as the latest one. With
`replay_buffers=False` the replay buffers' items are not written; a restore gives back the empty
buffers of the structure it restores into.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import orbax.checkpoint as ocp

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
    found = re.search(r"([A-Z][^:\[\]]*?) \[os_error_code='(\d+)'\]", text)
    if found:
        return f"{found.group(1)} (errno {found.group(2)})"
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
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

    def save(self, step: int, state: Any, meta: dict[str, Any]) -> None:
        if not self.replay_buffers:
            state = _without_buffer_items(state)
        try:
            with _quiet_orbax():
                self._manager.save(
                    step,
                    args=ocp.args.Composite(
                        state=ocp.args.StandardSave(keys_to_data(state)),
                        meta=ocp.args.JsonSave(meta),
                    ),
                    force=True,
                )
                self._manager.wait_until_finished()
        except Exception as e:
            raise CheckpointError(
                f"could not write the checkpoint of iteration {step} to {self.directory}: "
                f"{_os_reason(e)}"
            ) from e

    def latest_step(self) -> int | None:
        return self._manager.latest_step()

    def restore(self, like: Any, step: int | None = None) -> tuple[Any, dict[str, Any]]:
        """Restore into the structure of `like` (arrays or ShapeDtypeStructs)."""
        step = self.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"no checkpoint in {self.directory}")
        saved_like = like if self.replay_buffers else _without_buffer_items(like)
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, keys_to_data(saved_like))
        restored = self._manager.restore(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardRestore(abstract), meta=ocp.args.JsonRestore()
            ),
        )
        state = data_to_keys(restored.state, saved_like)
        if not self.replay_buffers:  # empty buffers shaped like those of `like`
            state = jax.tree.map(
                lambda saved, fresh: _empty(fresh) if _is_buffer(saved) else saved,
                state,
                like,
                is_leaf=_is_buffer,
            )
        return state, restored.meta

    def close(self) -> None:
        self._manager.close()


def restore_agent_states(directory: Path, like: Any) -> Any:
    """Only the agents' states (`Carry.agent_state`) of the latest checkpoint in `directory`,
    without their replay buffers' items (those become None): what a policy needs, read without
    knowing the env state's structure and without reading a buffer of gigabytes. Read-only: a
    run still writing there is left alone (no cleanup of its temporary directories)."""
    directory = Path(directory).absolute()
    with ocp.CheckpointManager(
        directory, options=ocp.CheckpointManagerOptions(read_only=True)
    ) as manager:
        step = manager.latest_step()
    if step is None:
        raise FileNotFoundError(f"no checkpoint in {directory}")
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
