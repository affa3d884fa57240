"""The tuner's compile wait (CPU, NVRTC stood in for by threads): a chunk's compile still
running ``wait_s`` after the start is left unwaited for once another one is done, a compile
error comes back as that variant's error, and without a wait limit every compile is waited
for."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from mirage_formal import workloads
from mirage_formal.codegen import Schedule, launches
from mirage_formal.codegen import autotune as at
from mirage_formal.codegen.compiled import CompiledGraph
from mirage_formal.errors import MirageError

SLOW_S = 0.6


def _variants() -> tuple[Any, list[dict[str, Schedule]]]:
    g = workloads.handwritten("rmsnorm", 1)
    keys = [la.graph.key for la in launches(g, 128)]
    return g, [{k: Schedule(threads=t) for k in keys} for t in (128, 256, 512)]


@pytest.fixture
def stand_in_nvrtc(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Threads for the compile processes; the 256-thread kernels compile slowly, the
    512-thread ones fail. Returns the sources whose compiles finished."""
    finished: list[str] = []
    pool = ThreadPoolExecutor(4)

    def job(args: tuple[str, str, str | None]) -> bytes:
        src = args[0]
        if "__launch_bounds__(512" in src:
            raise MirageError("stand-in compile error")
        if "__launch_bounds__(256" in src:
            time.sleep(SLOW_S)
        finished.append(src)
        return b"cubin"

    monkeypatch.setattr(at, "_pool", lambda jobs: pool)
    monkeypatch.setattr(at, "_compile_job", job)
    yield finished
    pool.shutdown(wait=True)


def test_a_slow_compile_is_not_waited_for_once_another_is_done(stand_in_nvrtc: list[str]) -> None:
    g, variants = _variants()
    t = time.monotonic()
    got = at.compile_each(g, variants, "sm_90", jobs=4, wait_s=0.1)
    assert time.monotonic() - t < SLOW_S
    assert isinstance(got[0], CompiledGraph) and got[0].cubin == b"cubin"
    assert got[1] is None
    assert isinstance(got[2], MirageError)


def test_without_a_limit_every_compile_is_waited_for(stand_in_nvrtc: list[str]) -> None:
    g, variants = _variants()
    got = at.compile_each(g, variants, "sm_90", jobs=4)
    assert [type(x) for x in got] == [CompiledGraph, CompiledGraph, MirageError]
    with pytest.raises(MirageError, match="stand-in"):
        at.compile_variants(g, variants, "sm_90", jobs=4)


def test_one_compile_is_waited_for_even_past_the_limit(stand_in_nvrtc: list[str]) -> None:
    g, variants = _variants()
    got = at.compile_each(g, variants[1:2] * 2, "sm_90", jobs=4, wait_s=0.0)
    assert any(isinstance(x, CompiledGraph) for x in got)  # (the other may finish with it)


def _running(proc: Any) -> bool:
    """Whether process ``pid`` still runs (a zombie, reaped by whichever thread waits for it
    first, has stopped running), checked for up to 10 s."""
    pid = proc.pid
    if not os.path.isdir("/proc"):  # (not Linux: the process object's own view)
        proc.join(timeout=10)
        return bool(proc.is_alive())
    deadline = time.monotonic() + 10
    while True:
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return False
        if state in ("Z", "X") or time.monotonic() > deadline:
            return state not in ("Z", "X")
        time.sleep(0.1)


def test_dropping_the_pool_kills_its_running_jobs_and_the_next_pool_works() -> None:
    """A compile left running would hold the process at exit (a process pool waits for its
    jobs): the pool is stopped with its processes, and the next call starts a fresh one."""
    ex = at._pool(2)
    running = ex.submit(time.sleep, 60)
    while not running.running():
        time.sleep(0.05)
    procs = list(ex._processes.values())
    t = time.monotonic()
    at._drop_pool(2)
    assert time.monotonic() - t < 20
    assert all(not _running(p) for p in procs)
    assert at._pool(2) is not ex
    assert at._pool(2).submit(pow, 2, 10).result(timeout=60) == 1024
    at._drop_pool(2)
