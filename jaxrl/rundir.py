"""A run directory belongs to one run: one process writes it at a time, and a new run never
writes into the directory of another (it would interleave `evals.csv` and overwrite the config,
summary and checkpoints). `resume=<dir>` is how a run continues in its own directory.

The lock is `flock` on `<dir>/.lock`: the kernel drops it when the process ends, however it ends
(kill -9 included), so a dead run never leaves a stale lock behind.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import itertools
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from jaxrl.config import ConfigError

LOCK_FILE = ".lock"
CHECKPOINTS = "checkpoints"
ENV_SPEC = "env_spec.json"  # the env's spaces: a policy is rebuilt from it without the env


def default_run_parent(agent: str, env_id: str, parent: Path = Path("runs")) -> Path:
    return parent / agent / env_id


def default_run_dir(agent: str, env_id: str, parent: Path = Path("runs")) -> Path:
    """`runs/<agent>/<env>/<time>`, made now; `-1`, `-2`... are appended when runs start in the
    same second, so every run started without `log.dir` gets a directory of its own."""
    stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    base = default_run_parent(agent, env_id, parent) / stamp
    try:
        base.parent.mkdir(parents=True, exist_ok=True)
        for n in itertools.count():
            path = base if n == 0 else base.with_name(f"{stamp}-{n}")
            with contextlib.suppress(FileExistsError):
                path.mkdir()
                return path
    except OSError as e:
        raise ConfigError(f"cannot create a run directory under {parent}: {_reason(e)}") from None
    raise AssertionError("unreachable")


def missing_dirs(path: Path) -> list[Path]:
    """`path` and those of its parents that do not exist yet, deepest first: what making it
    would make."""
    return [p for p in (path, *path.parents) if not p.exists()]


@contextlib.contextmanager
def claim(
    run_dir: Path, resume: bool, writer: bool = True, made_here: Sequence[Path] = ()
) -> Iterator[None]:
    """Hold `run_dir` for this process while the block runs. ConfigError if it cannot be a run
    directory (a file, not creatable or not writable), if another process holds it, or if it
    already holds a run and this is not a resume of it. `writer=False`: a process of a
    distributed run other than process 0, which holds the lock for them all; only the last check
    is made, so that every process refuses the same directory. `made_here`: the directories
    (`run_dir` and parents, deepest first) that this run made; a block that raises before
    writing anything into `run_dir` (a run refused once compiled) removes those left empty, so
    that a refusal leaves no trace."""
    label = f"resume={run_dir}" if resume else f"log.dir={run_dir}"
    if not writer:
        _refuse_a_used_directory(run_dir, resume, label)
        yield
        return
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(run_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise ConfigError(f"{label}: cannot be a run directory: {_reason(e)}") from None
    try:
        _lock_or_refuse(fd, fcntl.LOCK_EX, label)
        _refuse_a_used_directory(run_dir, resume, label)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as e:
            raise ConfigError(f"{label}: cannot write there: {_reason(e)}") from None
        try:
            yield
        except BaseException:
            _remove_if_unused(run_dir, made_here)
            raise
    finally:
        os.close(fd)  # releases the lock


def _remove_if_unused(run_dir: Path, made_here: Sequence[Path]) -> None:
    """Remove the directories in `made_here` if `run_dir` holds nothing but the lock and they
    are then empty; called while the lock is held, so no other run is using it."""
    if run_dir not in made_here:
        return
    with contextlib.suppress(OSError):  # a directory that is not empty stops it
        if [p.name for p in run_dir.iterdir()] == [LOCK_FILE]:
            (run_dir / LOCK_FILE).unlink()
            for directory in made_here:
                directory.rmdir()


def refuse_early(run_dir: Path, resume: bool, check_lock: bool = True) -> None:
    """`claim`'s refusals made when the command is read, writing nothing: a path that cannot
    be a directory, a directory that holds another run or that a live run is writing is refused
    before the env and agent are built. `claim` still decides (another run may start in
    between). `check_lock=False` for the processes of a distributed run, whose process 0 may
    already hold the lock for them all."""
    label = f"resume={run_dir}" if resume else f"log.dir={run_dir}"
    for path in (run_dir, *run_dir.parents):
        if path.exists():
            if not path.is_dir():
                code = errno.EEXIST if path == run_dir else errno.ENOTDIR
                raise ConfigError(f"{label}: cannot be a run directory: {os.strerror(code)}")
            break
    lock = run_dir / LOCK_FILE
    if check_lock and lock.is_file():
        with contextlib.suppress(FileNotFoundError, PermissionError):  # `claim` says why
            fd = os.open(lock, os.O_RDONLY)
            try:
                _lock_or_refuse(fd, fcntl.LOCK_SH, label)  # taken for an instant, then let go
            finally:
                os.close(fd)
    _refuse_a_used_directory(run_dir, resume, label)


def _lock_or_refuse(fd: int, kind: int, label: str) -> None:
    try:
        fcntl.flock(fd, kind | fcntl.LOCK_NB)
    except BlockingIOError:
        owner = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        raise ConfigError(
            f"{label}: another run (process {owner}) is writing this directory; one run "
            f"writes a run directory at a time"
        ) from None


def _refuse_a_used_directory(run_dir: Path, resume: bool, label: str) -> None:
    if not resume and holds_run(run_dir):
        raise ConfigError(
            f"{label} already holds a run; continue it with resume={run_dir}, or choose "
            f"another log.dir"
        )


def holds_run(run_dir: Path) -> bool:
    """A run has trained here: it wrote a checkpoint (every run writes one before its first
    chunk). A run that failed before that left nothing a new one could lose."""
    directory = run_dir / CHECKPOINTS
    return directory.is_dir() and any(p.name.isdigit() for p in directory.iterdir())


def _reason(e: OSError) -> str:
    return e.strerror or str(e)
