"""The stop request's signal routing (`jaxrl.interrupt`): SIGTERM asks for a stop as Ctrl-C
does unless something else handles it, and a scheduler's preemption handler is deferred until
the run has stopped, then called once as the signal would have called it."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from jaxrl.interrupt import exit_code, signals_request_stop


@pytest.fixture
def scheduler_handler() -> Iterator[list[int]]:
    """A Python handler on USR2 as submitit installs one in a job; the signals it was given."""
    calls: list[int] = []
    handler = lambda signum, frame: calls.append(signum)
    previous = signal.signal(signal.SIGUSR2, handler)
    yield calls
    assert signal.getsignal(signal.SIGUSR2) is handler  # restored when the run ended
    signal.signal(signal.SIGUSR2, previous)


def test_a_preemption_signal_asks_for_a_stop_and_reaches_its_handler_after_it(
    scheduler_handler: list[int],
) -> None:
    with signals_request_stop() as stop:
        os.kill(os.getpid(), signal.SIGUSR2)
        assert stop.requested and scheduler_handler == []
        assert stop.reason == "stopped by SIGUSR2 (preemption)"
    assert scheduler_handler == [signal.SIGUSR2]


def test_a_second_preemption_signal_reaches_its_handler_at_once(
    scheduler_handler: list[int],
) -> None:
    with signals_request_stop():
        os.kill(os.getpid(), signal.SIGUSR2)
        os.kill(os.getpid(), signal.SIGUSR2)
        assert scheduler_handler == [signal.SIGUSR2]
    assert scheduler_handler == [signal.SIGUSR2]  # once: not again when the run ends


def test_signals_without_a_python_handler_are_left_alone() -> None:
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL
    with signals_request_stop() as stop:
        assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL
        assert stop.reason == "interrupted" and stop.preemption is None


def test_sigterm_asks_for_a_stop_with_its_exit_status() -> None:
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    with signals_request_stop() as stop:
        assert signal.getsignal(signal.SIGTERM) == stop.handle  # else the kill ends pytest
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.requested and stop.reason == "stopped by SIGTERM"
        assert exit_code(stop.signum) == 143
        with pytest.raises(KeyboardInterrupt):  # a second one, from the Python API
            os.kill(os.getpid(), signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_sigterm_handled_by_another_is_left_to_it() -> None:
    """Under submitit SIGTERM is its (logging) handler's; so it stays."""
    calls: list[int] = []
    handler = lambda signum, frame: calls.append(signum)
    previous = signal.signal(signal.SIGTERM, handler)
    try:
        with signals_request_stop() as stop:
            os.kill(os.getpid(), signal.SIGTERM)
            assert calls == [signal.SIGTERM] and not stop.requested
    finally:
        signal.signal(signal.SIGTERM, previous)
