"""The stop request's signal routing (`jaxrl.interrupt`): a scheduler's preemption handler is
deferred until the run has stopped, then called once as the signal would have called it."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from jaxrl.interrupt import ctrl_c_requests_stop


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
    with ctrl_c_requests_stop() as stop:
        os.kill(os.getpid(), signal.SIGUSR2)
        assert stop.requested and scheduler_handler == []
        assert stop.reason == "stopped by SIGUSR2 (preemption)"
    assert scheduler_handler == [signal.SIGUSR2]


def test_a_second_preemption_signal_reaches_its_handler_at_once(
    scheduler_handler: list[int],
) -> None:
    with ctrl_c_requests_stop():
        os.kill(os.getpid(), signal.SIGUSR2)
        os.kill(os.getpid(), signal.SIGUSR2)
        assert scheduler_handler == [signal.SIGUSR2]
    assert scheduler_handler == [signal.SIGUSR2]  # once: not again when the run ends


def test_signals_without_a_python_handler_are_left_alone() -> None:
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL
    with ctrl_c_requests_stop() as stop:
        assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL
        assert stop.reason == "interrupted" and stop.preemption is None
