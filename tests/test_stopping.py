"""workbench/cli/stopping.py in this process: the first stop signal sets the flag, the same signal
again at once (GNU timeout's second kill, to the process group) is the same request, a later or
a different one aborts."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from workbench.cli.stopping import DUPLICATE_S, Aborted, stop_on_signals


def test_timeouts_two_sigterms_are_one_request_and_a_later_one_aborts():
    stop = threading.Event()
    with stop_on_signals(stop) as stopped:
        signal.raise_signal(signal.SIGTERM)     # timeout: kill(child, SIGTERM) ...
        signal.raise_signal(signal.SIGTERM)     # ... then kill(0, SIGTERM): the same request
        assert stop.is_set() and stopped.name == "SIGTERM"
        time.sleep(DUPLICATE_S * 2)
        with pytest.raises(Aborted) as info:
            signal.raise_signal(signal.SIGTERM)  # a second request: write what finished, now
        assert info.value.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is not None  # the previous handler is back


def test_another_signal_at_once_is_a_second_request():
    stop = threading.Event()
    with stop_on_signals(stop):
        signal.raise_signal(signal.SIGTERM)
        with pytest.raises(Aborted):
            signal.raise_signal(signal.SIGINT)
