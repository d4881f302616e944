"""``forensics.engines.run_all`` on local processes and on a real local Ray instance, and ``compare_runs`` on
both engines: same JSON on a set of runs in mixed formats with an unreadable one, a killed worker retried once then
reported, results in item order, bad options refused.

One Ray instance serves the module (``ray_cluster``); the first test runs before it starts, to see the engine start
and stop an instance of its own."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import engine_tasks
import polars as pl
import pytest
from conftest import ROOT, SAMPLES

import forensics.compare as compare_module
import reports
from forensics.compare import compare_runs
from forensics.engines import RAY_MISSING, Engine, run_all
from parsers import InputError

HERE = Path(__file__).resolve().parent
REAL = ROOT / "tests" / "fixtures" / "real"
RUNS = {  # run name: what it is a copy of (a directory, or a file that becomes the run's only file)
    "clean-1.3B": SAMPLES / "clean-1.3B",
    "tr8-104B-sample": SAMPLES / "tr8-104B-sample",
    "nanogpt": REAL / "nanogpt",
    "torchtitan-oom": REAL / "torchtitan" / "autoresearch_run111_oom.log",
    "tensorboard-sft": REAL / "tensorboard" / "fyh2001_megatron-sft-recipes",
    "hf-trainer-state": REAL / "hf_trainer_state" / "subro608_Deep_learning_Bert_project2",
    "lightning": REAL / "lightning" / "0Xero7_slm_training",
}


def failed(item: tuple, message: str) -> str:
    return f"failed {item[0]}: {message}"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    for name, source in RUNS.items():
        if source.is_dir():
            shutil.copytree(source, root / name)
        else:
            (root / name).mkdir()
            shutil.copy2(source, root / name / source.name)
    (root / "garbage").mkdir()
    (root / "garbage" / "train.log").write_bytes(bytes(range(256)) * 4)
    return root


def workers_import_tasks(patch: pytest.MonkeyPatch) -> None:
    """Ray workers started from now on import ``engine_tasks`` (spawned processes get this process's sys.path)."""
    patch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])))


@pytest.fixture(scope="module")
def ray_cluster():
    """A real local Ray instance for the module (its workers import ``engine_tasks`` from this directory, and size
    their thread pools as the engine makes them: not as conftest makes this process's Polars)."""
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install '.[test,ray]')")
    from forensics.engines import THREAD_VARIABLES

    with pytest.MonkeyPatch.context() as patch:
        workers_import_tasks(patch)
        for name in THREAD_VARIABLES:
            patch.delenv(name, raising=False)
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield ray
    ray.shutdown()


@pytest.fixture(params=[Engine.LOCAL, Engine.RAY])
def engine(request) -> Engine:
    if request.param is Engine.RAY:
        request.getfixturevalue("ray_cluster")
    return request.param


def test_ray_engine_starts_its_own_instance_and_shuts_it_down(monkeypatch, tmp_path, capsys):
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install '.[test,ray]')")
    if ray.is_initialized():
        pytest.skip("Ray is already initialised (this test runs first in its module)")
    workers_import_tasks(monkeypatch)
    with pytest.raises(InputError) as exc:  # nothing listens there: refused at once (Ray itself retries for ever)
        run_all(engine_tasks.square_after, [(2, 0)], engine="ray", address="127.0.0.1:1", failed=failed)
    assert str(exc.value).startswith("--address 127.0.0.1:1: cannot connect to Ray (ConnectionRefusedError: ")
    items = [(1, None, 0), (2, str(tmp_path / "attempts"), 9)]
    assert run_all(engine_tasks.die_first, items, engine="ray", failed=lambda item, message: message[:27]) == [
        1, "Ray task lost after a retry"]
    assert not ray.is_initialized()
    # Ray prints its raylet's notices ("A worker died ...") on stdout: they went to stderr, stdout may be JSON
    out, err = capsys.readouterr()
    assert (out, "(raylet)" in err) == ("", True)


def test_results_keep_item_order_and_done_fires_as_each_finishes(engine, tmp_path):
    finished: list[tuple[int, int]] = []
    marker = tmp_path / "second-done"
    items = [(1, str(marker)), (2, None)]   # the first waits until the second's result has been taken

    def done(i: int, result: int) -> None:
        finished.append((i, result))
        marker.touch()

    results = run_all(engine_tasks.square_when, items, engine=engine, jobs=2, failed=failed, done=done)
    assert results == [1, 4]
    assert finished == [(1, 4), (0, 1)]


def test_a_killed_worker_is_retried_once_then_failed_and_the_others_complete(engine, tmp_path):
    once, always = str(tmp_path / "once"), str(tmp_path / "always")
    items = [(1, None, 0), (2, once, 1), (3, always, 9), (4, None, 0)]
    results = run_all(engine_tasks.die_first, items, engine=engine, jobs=2, failed=failed)
    assert results[:2] == [1, 2] and results[3] == 4
    expected = {Engine.LOCAL: "worker process died twice (BrokenProcessPool: A process in the process pool was "
                              "terminated abruptly",
                Engine.RAY: "Ray task lost after a retry (WorkerCrashedError: The worker died unexpectedly"}[engine]
    assert results[2].startswith(f"failed 3: {expected}"), results[2]
    assert [len(Path(log).read_text().splitlines()) for log in (once, always)] == [2, 2]   # one retry each


def test_a_task_that_raises_stops_the_run_with_its_exception(engine):
    with pytest.raises(ValueError, match=r"^bad item [12]$"):
        run_all(engine_tasks.raise_value_error, [(1,), (2,)], engine=engine, jobs=2, failed=failed)


def test_each_local_worker_uses_its_share_of_the_cpus(monkeypatch):
    """Two workers on six CPUs: three threads each for Polars, BLAS and OpenMP (each took every CPU of the
    machine, here two, so that the workers' threads outnumbered the CPUs)."""
    import forensics.engines as engines

    for name in engines.THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(engines, "default_jobs", lambda: 6)
    results = run_all(engine_tasks.thread_pools, [(1,), (2,)], engine=Engine.LOCAL, jobs=2, failed=failed)
    assert results == [(x, dict.fromkeys(engines.THREAD_VARIABLES, "3"), 3) for x in (1, 2)]
    monkeypatch.setenv("POLARS_MAX_THREADS", "1")  # what the user set is kept
    [(_, told, pool)] = run_all(engine_tasks.thread_pools, [(1,)] * 2, engine=Engine.LOCAL, jobs=2, failed=failed)[:1]
    assert (told["POLARS_MAX_THREADS"], told["OMP_NUM_THREADS"], pool) == ("1", "3", 1)


def test_each_ray_task_uses_one_thread(ray_cluster):
    """A task takes one CPU: its worker's Polars pool is one thread, not one per CPU of the node (here two)."""
    results = run_all(engine_tasks.thread_pools, [(1,), (2,)], engine=Engine.RAY, failed=failed)
    assert [(x, told["POLARS_MAX_THREADS"], told["OMP_NUM_THREADS"], pool) for x, told, pool in results] == [
        (1, "1", "1", 1), (2, "1", "1", 1)]


def test_a_task_that_raises_does_not_wait_for_the_other_slots_item():
    """The other slot's item would take 120 s: its process is ended, not waited for (it once was, to the end)."""
    import time

    start = time.monotonic()
    with pytest.raises(TypeError):
        run_all(engine_tasks.square_after, [(1, 120.0), ("x", 0.5)], engine=Engine.LOCAL, jobs=2, failed=failed)
    assert time.monotonic() - start < 60  # (a hang guard with a wide margin, not a timing)


def test_compare_on_ray_gives_the_same_json_and_overlays_as_local(runs, tmp_path, ray_cluster):
    shown: dict[str, list[str]] = {"local": [], "ray": []}
    local = compare_runs([runs], cache=False, jobs=1, progress=lambda name, total: shown["local"].append(name))
    on_ray = compare_runs([runs], cache=tmp_path / "cache", engine="ray",
                          progress=lambda name, total: shown["ray"].append(name))
    assert reports.render_compare_json(on_ray.comparison) == reports.render_compare_json(local.comparison)
    assert on_ray.overlay.equals(local.overlay) and on_ray.overlay.height > 0
    rows = {r.name: r for r in on_ray.comparison.rows}
    assert rows["garbage"].outcome == "unreadable" and "binary file" in rows["garbage"].error
    assert sum(r.outcome != "unreadable" for r in rows.values()) >= 5
    assert sorted(shown["ray"]) == sorted(shown["local"]) == sorted([*RUNS, "garbage"])
    # the Ray workers kept every readable path's result in the cache (a W&B export's runs in one entry): read back
    # locally, nothing is read again
    assert len(list((tmp_path / "cache" / "compare").iterdir())) == len(
        {r.path for r in rows.values() if r.outcome != "unreadable"})
    warm = compare_runs([runs], cache=tmp_path / "cache", jobs=1)
    assert reports.render_compare_json(warm.comparison) == reports.render_compare_json(local.comparison)


def test_compare_reports_a_run_whose_ray_worker_dies(runs, tmp_path, monkeypatch, ray_cluster):
    shutil.copytree(runs / "nanogpt", tmp_path / engine_tasks.DOOMED)
    monkeypatch.setattr(compare_module, "_ingest_and_cache", engine_tasks.ingest_or_die)
    comparison, _ = compare_runs([tmp_path / engine_tasks.DOOMED, runs / "clean-1.3B"], cache=False, engine="ray")
    doomed, clean = comparison.rows
    assert (clean.name, clean.outcome) == ("clean-1.3B", "completed")
    assert (doomed.name, doomed.outcome) == (engine_tasks.DOOMED, "unreadable")
    assert doomed.error.startswith("Ray task lost after a retry (WorkerCrashedError: "), doomed.error


def test_unknown_engine_bad_options_and_missing_ray_are_input_errors(monkeypatch):
    def never(*_: object) -> None:
        raise AssertionError("a run was read")

    monkeypatch.setattr(compare_module, "_ingest_and_cache", never)
    with pytest.raises(InputError) as exc:
        compare_runs([SAMPLES], engine="spark", cache=False)
    assert str(exc.value) == "--engine spark: unknown engine (local or ray)"
    with pytest.raises(InputError) as exc:
        compare_runs([SAMPLES], address="auto", cache=False)
    assert str(exc.value) == "--address auto: only with --engine ray"
    with pytest.raises(InputError) as exc:
        run_all(never, [(1,)], engine="ray", jobs=0, failed=failed)
    assert str(exc.value) == "--jobs 0: must be at least 1"
    monkeypatch.setitem(sys.modules, "ray", None)   # import ray fails as where it is not installed
    with pytest.raises(InputError) as exc:
        compare_runs([SAMPLES], engine="ray", cache=False)
    assert str(exc.value) == RAY_MISSING == "--engine ray needs ray (pip install 'forensics[ray]')"


def test_the_fleet_index_on_ray_is_the_local_index(runs, tmp_path, ray_cluster):
    from forensics.fleet import index

    on_ray = index(runs, tmp_path / "ray", engine="ray", cache=tmp_path / "cache-ray")
    local = index(runs, tmp_path / "local", jobs=1, cache=tmp_path / "cache-local")
    assert on_ray.summary() == local.summary() and on_ray.new >= len(RUNS)  # (some copies hold nested runs)
    assert pl.read_parquet(on_ray.runs).equals(pl.read_parquet(local.runs))
    assert pl.read_parquet(on_ray.anomalies).equals(pl.read_parquet(local.anomalies))
    assert index(runs, tmp_path / "ray", engine="ray").summary().startswith(f"0 new, 0 changed, {on_ray.new} unchanged")


def test_a_script_that_imports_polars_first_still_limits_its_workers(tmp_path):
    """A spawned worker imports the driver's script before any initializer runs: a script's own ``import polars``
    sized the worker's pool by every CPU (two here), whatever the initializer set after."""
    import subprocess
    import sys

    import forensics.engines as engines

    script = tmp_path / "driver.py"
    script.write_text(
        "import polars\nimport sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "import engine_tasks\nfrom forensics.engines import Engine, run_all\n"
        "if __name__ == '__main__':\n"
        "    out = run_all(engine_tasks.thread_pools, [(1,), (2,)], engine=Engine.LOCAL, jobs=2,\n"
        "                  failed=lambda item, why: why)\n"
        "    print([pool for _, _, pool in out])\n")
    env = {k: v for k, v in os.environ.items() if k not in engines.THREAD_VARIABLES}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    share = engines.worker_threads(2)
    assert done.stdout.strip() == f"[{share}, {share}]"
