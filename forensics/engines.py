"""Where many independent tasks run: local processes or a Ray cluster, behind one call (:func:`run_all`).

``forensics compare`` and the fleet index give :func:`run_all` a Python function defined at the top level of an
importable module (workers import it by name; Ray takes no builtins) and one tuple of positional arguments per item
(a run); it returns the results in item order and calls ``done`` in the driver as each finishes. Only the results
travel back, so they should be small (a row, binned curves).

**Local** (the default): inline when one worker is enough, else ``jobs`` spawned processes (one per CPU by default;
Polars is not fork-safe). Each process is driven by its own thread and given one item at a time, so a process that
dies (killed, out of memory, a crash in native code) names its item: that item is retried once in a fresh process
and, if it dies again, becomes ``failed(item, message)``; the other items go on. Each process may use its share of
the CPUs, ``cpus // jobs`` threads (at least one) for Polars, BLAS and OpenMP (:data:`THREAD_VARIABLES`, set before
they are imported, unless already set): each would otherwise start a thread per CPU, ``jobs`` times over-subscribing
the machine (``benchmarks/worker_threads.py``: 40 runs of 20,000 steps, 2 workers on 2 loaded CPUs, 124 s and 41
CPU-seconds of the workers without the limit, 94 to 106 s and 28 CPU-seconds with it).

**Ray**: ``import ray`` happens only here (the optional extra ``forensics[ray]``). An initialised Ray is used as it
is; otherwise ``address`` None starts a new local instance (no dashboard, quiet, shut down afterwards), or connects
to ``$RAY_ADDRESS`` when it is set (as under ``ray job submit``), and ``"auto"``, ``host:port`` or
``ray://host:port`` connect to a running cluster, whose workers must see the same paths (a shared file system or
URLs) and have ``forensics`` installed. Each item is one task of one CPU, whose Polars, BLAS and OpenMP use one
thread (a Ray worker's would start one per CPU of the node) (``max_retries=1``: a task whose worker dies is
retried once by Ray); at most ``jobs`` tasks are in flight (default: twice the cluster's CPUs, at least 64) and
results are collected with ``ray.wait`` as each finishes, so the driver holds results only. A task lost to a system
failure after its retry (``WorkerCrashedError``, ``OutOfMemoryError``, ``NodeDiedError``, ...) becomes
``failed(item, message)``. Starting a local instance costs about 2 s and shutting it down about 1.3 s (2 CPUs);
an empty task costs about 0.6 ms of the driver's time.

On both engines an exception raised by ``task`` itself is a bug, not a run's verdict: it stops the run and is
raised in the driver (tasks report bad input in their results). While Ray runs, ``sys.stdout`` is redirected to
stderr, because Ray prints its raylet's notices ("A worker died ...") on the driver's stdout, which may be JSON.

>>> run_all(pow, [(2, 3), (3, 2)], failed=lambda item, message: -1)
[8, 9]
>>> run_all(pow, [(2, 3)], engine="spark", failed=lambda item, message: -1)
Traceback (most recent call last):
parsers.errors.InputError: --engine spark: unknown engine (local or ray)
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import queue
import socket
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from enum import StrEnum
from itertools import islice
from typing import Any, TypeVar

from parsers import InputError

T = TypeVar("T")
RAY_MISSING = "--engine ray needs ray (pip install 'forensics[ray]')"
RAY_MIN_IN_FLIGHT = 64
CONNECT_TIMEOUT_S = 5.0
# the thread pools a worker process's libraries size from the environment when they are imported
THREAD_VARIABLES = ("POLARS_MAX_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


class Engine(StrEnum):
    """Where :func:`run_all` runs its tasks."""

    LOCAL = "local"
    RAY = "ray"

    @classmethod
    def named(cls, name: Engine | str) -> Engine:
        """The engine called ``name``; InputError for an unknown one.

        >>> Engine.named("ray")
        <Engine.RAY: 'ray'>
        """
        try:
            return cls(name)
        except ValueError:
            raise InputError(f"--engine {name}: unknown engine (local or ray)") from None


def run_all(task: Callable[..., T], items: Sequence[tuple], *, engine: Engine | str = Engine.LOCAL,
            jobs: int | None = None, address: str | None = None,
            failed: Callable[[tuple, str], T], done: Callable[[int, T], None] | None = None) -> list[T]:
    """``task(*item)`` for every item, in item order, on ``engine`` (see the module docstring). ``jobs``: local
    processes, or Ray tasks in flight. ``address``: the Ray cluster (``--engine ray`` only). ``done(i, result)`` is
    called in the driver as item ``i`` finishes; ``failed(item, message)`` is the result of an item whose worker
    died twice. Raises InputError for an unknown engine, ``jobs`` below 1, an address without Ray, a missing
    ``ray`` or a cluster that cannot be reached.

    >>> run_all(divmod, [(7, 2), (9, 4)], jobs=1, failed=lambda item, message: None, done=lambda i, r: print(i, r))
    0 (3, 1)
    1 (2, 1)
    [(3, 1), (2, 1)]
    """
    engine = checked(engine, jobs, address)
    results: list[Any] = [None] * len(items)

    def finish(i: int, result: T) -> None:
        results[i] = result
        if done is not None:
            done(i, result)

    if items:
        run = _run_ray if engine is Engine.RAY else _run_local
        run(task, items, jobs, address, failed, finish)
    return results


def checked(engine: Engine | str, jobs: int | None = None, address: str | None = None) -> Engine:
    """The engine named ``engine``, after checking that it exists, that ``jobs`` is at least 1 and that an
    ``address`` comes with Ray (InputError otherwise), so that callers refuse bad options before any work.

    >>> checked("local", jobs=0)
    Traceback (most recent call last):
    parsers.errors.InputError: --jobs 0: must be at least 1
    """
    named = Engine.named(engine)
    if jobs is not None and jobs < 1:
        raise InputError(f"--jobs {jobs}: must be at least 1")
    if address is not None and named is not Engine.RAY:
        raise InputError(f"--address {address}: only with --engine ray")
    return named


def one_line(exc: BaseException) -> str:
    """``Type: first line of the message``, for a row's error.

    >>> one_line(ValueError("bad\\nmore"))
    'ValueError: bad'
    """
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


# --- local processes -----------------------------------------------------------------------------------------------


def default_jobs() -> int:
    """Local worker processes when none are asked for: one per CPU."""
    return os.cpu_count() or 1


def worker_threads(workers: int) -> int:
    """The threads each of ``workers`` local processes may use: its share of the CPUs, at least one.

    >>> worker_threads(1) == default_jobs(), worker_threads(10 * default_jobs())
    (True, 1)
    """
    return max(1, default_jobs() // workers)


def _limit_threads(threads: int) -> None:
    """A worker process's initializer: its libraries' thread pools sized ``threads`` (where not set already), before
    the task's module imports them."""
    for name in THREAD_VARIABLES:
        os.environ.setdefault(name, str(threads))


@contextlib.contextmanager
def _spawned_with_threads(threads: int) -> Iterator[None]:
    """The thread variables unset in this process set to ``threads`` while workers are spawned, then taken back: a
    spawned worker imports the driver's ``__main__`` (a script's ``import polars``) before any initializer runs, and
    only the environment it starts with sizes that import's thread pool."""
    added = [name for name in THREAD_VARIABLES if name not in os.environ]
    for name in added:
        os.environ[name] = str(threads)
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


def _run_local(task: Callable[..., T], items: Sequence[tuple], jobs: int | None, _address: str | None,
               failed: Callable[[tuple, str], T], finish: Callable[[int, T], None]) -> None:
    workers = max(1, min(jobs or default_jobs(), len(items)))
    if workers == 1:
        for i, item in enumerate(items):
            finish(i, task(*item))
        return
    todo = iter(enumerate(items))
    lock, stop = threading.Lock(), threading.Event()
    out: queue.SimpleQueue[tuple[int, Any, BaseException | None]] = queue.SimpleQueue()
    pools: list[ProcessPoolExecutor] = []  # every slot's process, to end them when the run stops early

    def slot() -> None:  # one thread, one process at a time, one item at a time
        try:
            _drive_process(task, todo, lock, stop, failed, out, pools, worker_threads(workers))
        except BaseException as exc:  # handed to the driver, which raises it
            out.put((-1, None, exc))

    threads = [threading.Thread(target=slot, name=f"forensics-worker-{n}", daemon=True) for n in range(workers)]
    spawning = _spawned_with_threads(worker_threads(workers))
    spawning.__enter__()  # (left in the finally below, after every slot's last spawn)
    for thread in threads:
        thread.start()
    early = True
    try:
        for _ in items:
            i, result, error = out.get()
            if error is not None:
                raise error
            finish(i, result)
        early = False
    finally:
        stop.set()
        if early:  # a task raised (or Ctrl-C): the other slots' items are not waited for
            with lock:
                for pool in pools:
                    for process in list((getattr(pool, "_processes", None) or {}).values()):
                        process.terminate()
        for thread in threads:
            thread.join()
        spawning.__exit__(None, None, None)


def _drive_process(task: Callable[..., T], todo: Iterator[tuple[int, tuple]], lock: threading.Lock,
                   stop: threading.Event, failed: Callable[[tuple, str], T],
                   out: queue.SimpleQueue[tuple[int, Any, BaseException | None]],
                   pools: list[ProcessPoolExecutor] | None = None, threads: int | None = None) -> None:
    """Take items from ``todo`` until it is empty or ``stop`` is set, run each in this slot's process and put
    ``(i, result, None)`` on ``out``; a dead process is replaced and its item retried once, then ``failed``.
    ``threads``: what the process's libraries may use (:func:`worker_threads`; None: what they take)."""
    pool: ProcessPoolExecutor | None = None
    try:
        while not stop.is_set():
            with lock:
                taken = next(todo, None)
            if taken is None:
                return
            i, item = taken
            message = ""
            for _attempt in range(2):
                if pool is None:
                    limit = {} if threads is None else {"initializer": _limit_threads, "initargs": (threads,)}
                    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), **limit)
                    with lock:
                        (pools if pools is not None else []).append(pool)
                    if stop.is_set():  # stopped while it started: the driver may have ended the others already
                        return
                try:
                    out.put((i, pool.submit(task, *item).result(), None))
                    break
                except BrokenProcessPool as exc:
                    pool.shutdown()
                    pool = None
                    if stop.is_set():  # the driver is stopping (Ctrl-C reaches the workers too): no retry
                        return
                    message = f"worker process died twice ({one_line(exc)})"
            else:
                out.put((i, failed(item, message), None))
    finally:
        if pool is not None:
            pool.shutdown()


# --- Ray ---------------------------------------------------------------------------------------------------------


def _run_ray(task: Callable[..., T], items: Sequence[tuple], jobs: int | None, address: str | None,
             failed: Callable[[tuple, str], T], finish: Callable[[int, T], None]) -> None:
    with contextlib.redirect_stdout(sys.stderr), _ray_session(address) as ray:
        remote = ray.remote(max_retries=1)(_in_ray_worker)
        named = (task.__module__, task.__qualname__)  # (imported by the worker after its thread pools are sized)
        in_flight = jobs or max(RAY_MIN_IN_FLIGHT, 2 * int(ray.cluster_resources().get("CPU", 1)))
        todo = iter(enumerate(items))
        pending: dict[Any, int] = {}
        try:
            while True:
                for i, item in islice(todo, in_flight - len(pending)):
                    pending[remote.remote(named, *item)] = i
                if not pending:
                    return
                [ready], _ = ray.wait(list(pending), num_returns=1)
                i = pending.pop(ready)
                finish(i, _ray_result(ray, ready, items[i], failed))
        finally:
            for ref in pending:  # only when stopping early: cancel what still runs on a shared cluster
                ray.cancel(ref)


def _in_ray_worker(named: tuple[str, str], *item: Any) -> Any:
    """``task(*item)`` in a Ray worker, ``task`` named ``(module, qualified name)``: imported only after the worker's
    Polars, BLAS and OpenMP thread pools are sized to the task's one CPU (see :func:`_limit_threads`; Ray itself sets
    only OpenMP's), so that a node's workers do not each start a thread per CPU of the node."""
    import importlib

    _limit_threads(1)
    module, name = named
    task: Any = importlib.import_module(module)
    for part in name.split("."):
        task = getattr(task, part)
    return task(*item)


def _ray_result(ray: Any, ref: Any, item: tuple, failed: Callable[[tuple, str], T]) -> T:
    """The task's result; ``failed`` when a system failure lost it; the task's own exception raised as itself."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        if exc.cause is None or isinstance(exc.cause, ray.exceptions.RayError):
            return failed(item, f"Ray task failed ({one_line(exc.cause or exc)})")
        raise exc.cause from exc
    except ray.exceptions.RayError as exc:
        return failed(item, f"Ray task lost after a retry ({one_line(exc)})")


@contextlib.contextmanager
def _ray_session(address: str | None) -> Iterator[Any]:
    """Ray, initialised: as it already is, or connected to ``address`` (else ``$RAY_ADDRESS``, as Ray does) or to a
    new local instance; what this starts or connects is shut down afterwards."""
    try:
        import ray
    except ImportError:
        raise InputError(RAY_MISSING) from None
    if ray.is_initialized():
        yield ray
        return
    target = address or os.environ.get("RAY_ADDRESS") or None
    _check_reachable(target)
    options: dict[str, Any] = {"logging_level": logging.ERROR, "log_to_driver": False}
    if target is None:  # "local": a new instance, never a cluster someone else `ray start`-ed on this machine
        options.update(address="local", include_dashboard=False)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ray.init(**options) if target is None else ray.init(address=target, **options)
    except Exception as exc:
        where = f"--address {target}: cannot connect to Ray" if target else "--engine ray: cannot start Ray"
        raise InputError(f"{where} ({one_line(exc)})") from None
    try:
        yield ray
    finally:
        ray.shutdown()


def _check_reachable(address: str | None) -> None:
    """A plain ``host:port`` address that nothing listens on is refused at once (Ray would retry for ever)."""
    if address is None or address == "auto" or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise InputError(f"--address {address}: not auto, host:port or ray://host:port")
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise InputError(f"--address {address}: cannot connect to Ray ({one_line(exc)})") from None
