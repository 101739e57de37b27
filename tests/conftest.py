"""Suite-wide settings. The persistent XLA cache is the CLI's own: a run of the same program
(resume tests, repeated configs, a second suite run) loads its executable instead of compiling."""

from __future__ import annotations

from jaxrl.cli import enable_compilation_cache

enable_compilation_cache()
