"""Algorithms, one module each. `REGISTRY` maps the CLI's `agent=<name>` to (config class, factory,
metrics shown live); `jaxrl.loop` and `jaxrl.run` are the only places that look agents up."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from agents.es import ESConfig, make_es


class AgentEntry(NamedTuple):
    config: type
    make: Callable[..., Any]
    progress_metrics: tuple[str, ...]  # shown in the live display beside env steps and eval return


REGISTRY: dict[str, AgentEntry] = {
    "es": AgentEntry(ESConfig, make_es, ("fitness_mean", "fitness_max")),
}
