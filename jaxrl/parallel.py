"""Meshes and sharding helpers: the only module that knows about devices."""

from __future__ import annotations

import logging

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
