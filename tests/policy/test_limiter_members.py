"""A rate window's members differ between hits, threads and forked processes (two alike would
count as one hit in the Redis sorted set)."""

from __future__ import annotations

import os
import threading

from policy.limiter import unique_member


def test_members_differ_across_threads():
    members: list[str] = []

    def take() -> None:
        members.extend(unique_member() for _ in range(2000))

    threads = [threading.Thread(target=take) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(members)) == len(members) == 8000


def test_a_forked_child_does_not_repeat_its_parents_members():
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a Celery prefork worker starts like this
        os.write(write, unique_member().encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child = os.read(read, 200).decode()
    parent = unique_member()
    # time, process tag, counter: the child's tag is its own, whatever its clock and count.
    assert child.split("-")[1] != parent.split("-")[1]
