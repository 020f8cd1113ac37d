"""cuda_build.build_lock: load_inline's FileBaton `lock` left by a build killed half-way must not
hang the next build (torch polls it forever), and builds of one module wait for each other."""

from __future__ import annotations

import threading
import time

from workbench.cuda_build import build_lock


def test_an_orphaned_filebaton_lock_is_removed_once_the_build_lock_is_held(tmp_path):
    (tmp_path / "lock").write_text("")  # fresh: the age rule alone would keep it for 300 s
    with build_lock(tmp_path):
        assert not (tmp_path / "lock").exists()


def test_a_second_build_waits_for_the_first(tmp_path):
    order: list[str] = []
    entered = threading.Event()

    def first():
        with build_lock(tmp_path):
            order.append("first in")
            entered.set()
            time.sleep(0.3)
            (tmp_path / "lock").write_text("")  # the first build's own FileBaton, still held
            order.append("first out")
            (tmp_path / "lock").unlink()

    thread = threading.Thread(target=first)
    thread.start()
    entered.wait(5)
    with build_lock(tmp_path):  # flock is per open file description: a second open waits
        order.append("second in")
    thread.join()
    assert order == ["first in", "first out", "second in"]
