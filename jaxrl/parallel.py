"""Meshes and sharding helpers: the only module that knows about devices."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
from jax.sharding import Mesh

log = logging.getLogger(__name__)


def usable_device_count(num_items: int, devices: int | None = None) -> int:
    """The most local devices (<= `devices`) that split `num_items` evenly; ES pairs and env
    batches are sharded without padding, so e.g. 33 pairs on 4 devices use 3."""
    available = devices or jax.local_device_count()
    for d in range(min(available, num_items), 0, -1):
        if num_items % d == 0:
            if d < available:
                log.warning(
                    "%d items do not split over %d devices; using %d", num_items, available, d
                )
            return d
    return 1


def mesh_for(num_items: int, axis: str) -> Mesh:
    """A 1-D mesh over as many local devices as evenly share `num_items`."""
    d = usable_device_count(num_items)
    return jax.make_mesh((d,), (axis,), devices=jax.local_devices()[:d])


def data_mesh(num_items: int, axis: str) -> Mesh:
    """Like `mesh_for`, with an Auto-typed axis: data-parallel code shards arrays that reach it
    unsharded (the Trainer's `jit(vmap(...))` hands in plain arrays), which an Explicit axis —
    `jax.make_mesh`'s default — refuses in `shard_map`'s in_specs."""
    d = usable_device_count(num_items)
    return jax.make_mesh(
        (d,), (axis,), axis_types=(jax.sharding.AxisType.Auto,), devices=jax.local_devices()[:d]
    )


@dataclass(frozen=True)
class DataAxis:
    """The mesh axis data-parallel code splits its batch over, with its collectives.

    Why not call `jax.lax.psum` directly: on a one-device mesh XLA:CPU still keeps every
    collective in the program as a runtime all-reduce / all-gather (two per PPO minibatch step),
    dispatched like any other op. With one device the collectives here are identities and
    `shard_map` is skipped, so a one-device program is plain code.
    """

    mesh: Mesh
    name: str

    @property
    def size(self) -> int:
        return self.mesh.devices.size

    def psum(self, x: Any) -> Any:
        return x if self.size == 1 else jax.lax.psum(x, self.name)

    def all_gather(self, x: Any, tiled: bool = False) -> Any:
        """Every device's `x` stacked on a new leading axis (concatenated along axis 0 if tiled)."""
        if self.size == 1:
            return x if tiled else jax.tree.map(lambda a: a[None], x)
        return jax.lax.all_gather(x, self.name, tiled=tiled)

    def index(self) -> Any:
        """This device's position on the axis."""
        return 0 if self.size == 1 else jax.lax.axis_index(self.name)

    def shard_map(self, fn: Callable, in_specs: Any, out_specs: Any) -> Callable:
        """`fn` run per device on its shard; check_vma=False because callers sum gradients over
        devices explicitly."""
        if self.size == 1:
            return fn
        return jax.shard_map(
            fn, mesh=self.mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False
        )
