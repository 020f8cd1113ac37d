"""The mechanism behind RUN_SWITCH_S (screens/runner.py), on its own: an asyncio loop (the UI
thread) doing 40 small steps of ~0.2 ms of Python each, yielding to the loop between them (a
select each time, which lets the GIL go), while another thread runs pure Python (the run's
thread handling a result). Prints the loop's wall ms per switch interval, medians of 7.

    .venv/bin/python results/history/cpu/2026-12-06-keymax/gil_convoy.py
"""
import asyncio
import json
import statistics
import sys
import threading
import time


def busy(stop: threading.Event) -> None:
    x = 0
    while not stop.is_set():
        for i in range(1000):
            x += i * i


async def steps(n: int = 40) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        end = time.perf_counter() + 0.0002
        while time.perf_counter() < end:
            pass
        await asyncio.sleep(0)
    return (time.perf_counter() - t0) * 1e3


def measure(interval: float, other_thread: bool) -> float:
    sys.setswitchinterval(interval)
    stop = threading.Event()
    worker = threading.Thread(target=busy, args=(stop,))
    if other_thread:
        worker.start()
    try:
        return statistics.median(asyncio.run(steps()) for _ in range(7))
    finally:
        stop.set()
        if other_thread:
            worker.join()


if __name__ == "__main__":
    before = sys.getswitchinterval()
    out = {"alone_ms": round(measure(before, False), 1)}
    for interval in (0.005, 0.001):
        out[f"busy_thread_switch_{interval * 1e3:g}ms_ms"] = round(measure(interval, True), 1)
    sys.setswitchinterval(before)
    print(json.dumps(out))
