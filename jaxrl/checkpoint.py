"""Checkpoints: the whole training carry (all seeds) through orbax, plus host-side progress as JSON.

Orbax writes each step into a temporary directory and renames it when complete, so a crash or a
Ctrl-C while saving never leaves a half-written checkpoint as the latest one.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

from jaxrl.prng import data_to_keys, keys_to_data

# orbax logs every save at INFO through absl; the run's own console output says enough.
logging.getLogger("absl").setLevel(logging.WARNING)


class Checkpointer:
    def __init__(self, directory: Path, keep: int) -> None:
        self.directory = Path(directory).absolute()
        self._manager = ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(
                max_to_keep=keep, enable_async_checkpointing=False
            ),
        )

    def save(self, step: int, state: Any, meta: dict[str, Any]) -> None:
        self._manager.save(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardSave(keys_to_data(state)), meta=ocp.args.JsonSave(meta)
            ),
            force=True,
        )
        self._manager.wait_until_finished()

    def latest_step(self) -> int | None:
        return self._manager.latest_step()

    def restore(self, like: Any, step: int | None = None) -> tuple[Any, dict[str, Any]]:
        """Restore into the structure of `like` (arrays or ShapeDtypeStructs)."""
        step = self.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"no checkpoint in {self.directory}")
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, keys_to_data(like))
        restored = self._manager.restore(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardRestore(abstract), meta=ocp.args.JsonRestore()
            ),
        )
        return data_to_keys(restored.state, like), restored.meta

    def close(self) -> None:
        self._manager.close()
