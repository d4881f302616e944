"""Runs in a real S3 API: moto's server (in this process, on a free port, one for the module), reached through s3fs
at ``$AWS_ENDPOINT_URL`` with dummy credentials, as a lab's bucket would be. ``analyze``, ``compare`` and ``index``
over ``s3://`` give what they give on the local copy; a listing sees what another client wrote since (s3fs keeps
every listing for the process's life); compare's results are cached in the bucket; a missing bucket, missing
credentials and a denied read are one line and exit 2."""

from __future__ import annotations

import json
import logging
import os
import shutil
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from conftest import SAMPLES
from test_cli import run_cli

import forensics.fleet as fleet
from forensics.compare import compare_runs
from reports import render_compare_json

s3fs = pytest.importorskip("s3fs", reason="the S3 tests need s3fs (pip install '.[test]')")
moto_server = pytest.importorskip("moto.server", reason="the S3 tests need moto's server (pip install '.[test]')")

REAL = Path("tests/fixtures/real")
BUCKET = "lab-runs"
RUNS = {  # the runs in s3://lab-runs/exp/ and in the local copy
    "tr8-104B": SAMPLES / "tr8-104B-sample",
    "fsdp2": REAL / "tensorboard/fyh2001_megatron-sft-recipes_fsdp2",  # an event file larger than the head
}


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[object, Path]]:
    """A client of the S3 server (another s3fs instance than the one forensics uses, as another machine would be)
    and the local copy of ``s3://lab-runs/exp``, which holds RUNS and a run whose only log is damaged."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # (the server's request log)
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    # (moto keeps its buckets per process: this fixture set up again in the same worker, its module's tests split
    # between workers, would find the bucket of the time before; the server starts from nothing)
    urllib.request.urlopen(urllib.request.Request(f"http://{host}:{port}/moto-api/reset", method="POST")).close()
    local = tmp_path_factory.mktemp("s3") / "exp"
    for name, path in RUNS.items():
        shutil.copytree(path, local / name)
    (local / "broken").mkdir()
    (local / "broken" / "events.out.tfevents.1.host").write_bytes(b"\x00garbage, not a TFRecord")
    with pytest.MonkeyPatch.context() as env:
        for key, value in {"AWS_ENDPOINT_URL": f"http://{host}:{port}", "AWS_ACCESS_KEY_ID": "testing",
                           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                           "AWS_EC2_METADATA_DISABLED": "true", "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
                           "AWS_CONFIG_FILE": os.devnull}.items():
            env.setenv(key, value)
        env.delenv("AWS_SESSION_TOKEN", raising=False)
        env.delenv("AWS_PROFILE", raising=False)
        s3fs.S3FileSystem.clear_instance_cache()
        client = s3fs.S3FileSystem(skip_instance_cache=True)
        client.mkdir(BUCKET)
        client.put(str(local), f"{BUCKET}/", recursive=True)
        try:
            yield client, local
        finally:
            s3fs.S3FileSystem.clear_instance_cache()
            server.stop()


def compare_json(paths: list[str | Path], local: Path | None = None, **options: object) -> dict:
    """compare's JSON with each row's path left out (a URL's and its local copy's differ), and names under the
    local copy ``local`` shown as under ``s3://lab-runs/exp`` (an error names the file it could not read)."""
    done = render_compare_json(compare_runs(paths, jobs=1, **options).comparison)  # type: ignore[arg-type]
    done = done.replace(str(local), f"s3://{BUCKET}/exp") if local is not None else done
    rows = json.loads(done)
    for row in rows["runs"]:
        row.pop("path")
    return rows


def test_analyze_over_s3_is_the_local_analysis(s3: tuple[object, Path]) -> None:
    _, local = s3
    url, here = f"s3://{BUCKET}/exp/tr8-104B", local / "tr8-104B"
    remote, near = run_cli("analyze", url, "-f", "json"), run_cli("analyze", str(here), "-f", "json")
    assert (remote.returncode, remote.stderr) == (0, "")
    assert json.loads(remote.stdout) == json.loads(near.stdout.replace(str(here), url))
    tr8 = json.loads(remote.stdout)["runs"][0]
    assert tr8["path"] == url
    assert [(a["end_reason"], a["end_step"]) for a in tr8["attempts"]] == [("nan", 7360), ("nan", 7150),
                                                                          ("diverged", 5400)]


def test_compare_over_s3_is_the_local_compare_and_keeps_its_results_in_the_bucket(
        s3: tuple[object, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    client, local = s3
    cache = f"s3://{BUCKET}/cache"
    first = compare_json([f"s3://{BUCKET}/exp"], cache=cache)
    assert first == compare_json([local], local, cache=False)
    assert [(r["name"], r["outcome"]) for r in first["runs"]] == [
        ("broken", "unreadable"), ("fsdp2", "completed"), ("tr8-104B", "diverged")]
    assert first["runs"][0]["error"] == (  # the file named by its URL, not by the local copy it was read from
        f"s3://{BUCKET}/exp/broken: no readable training logs (s3://{BUCKET}/exp/broken/events.out.tfevents.1.host: "
        "not a TensorBoard event file (no valid TFRecord))")
    assert len(client.glob(f"{BUCKET}/cache/compare/*/digests.json")) == 2  # a sealed result per readable run

    def never(*_: object, **__: object) -> None:
        raise AssertionError("a run was read again")

    monkeypatch.setattr("forensics.compare.ingest", never)  # the results come from the bucket, nothing is read
    monkeypatch.setattr("forensics.compare.RunResult.keep", never)
    assert compare_json([f"s3://{BUCKET}/exp/{n}" for n in ("fsdp2", "tr8-104B")], cache=cache) == {
        **first, "runs": first["runs"][1:]}


def test_a_run_written_since_the_last_listing_is_seen(s3: tuple[object, Path]) -> None:
    client, _ = s3
    url = f"s3://{BUCKET}/late"
    client.put(str(RUNS["fsdp2"]), f"{BUCKET}/late/fsdp2", recursive=True)
    try:
        assert [r["name"] for r in compare_json([url], cache=False)["runs"]] == ["fsdp2"]
        client.put(str(RUNS["tr8-104B"]), f"{BUCKET}/late/tr8", recursive=True)  # (as another machine would)
        # listed again, not answered from the listing s3fs kept: the new run is there
        assert [r["name"] for r in compare_json([url], cache=False)["runs"]] == ["fsdp2", "tr8"]
        assert [r["name"] for r in compare_json([f"{url}/tr8"], cache=False)["runs"]] == ["tr8"]
    finally:
        client.rm(f"{BUCKET}/late", recursive=True)


def test_index_over_s3_is_the_local_index_and_reindexes_what_changed(s3: tuple[object, Path], tmp_path: Path) -> None:
    client, local = s3
    url = f"s3://{BUCKET}/exp"
    assert fleet.index(url, tmp_path / "remote", jobs=1, cache=False).summary() == (
        "3 new, 0 changed, 0 unchanged, 0 removed (1 unreadable)")
    fleet.index(local, tmp_path / "local", jobs=1, cache=False)
    differ = ["path", "signature", "error"]  # (the error names the file by its URL)

    def table(where: str, name: str) -> pl.DataFrame:
        return pl.read_parquet(tmp_path / where / name)

    assert table("remote", fleet.RUNS_FILE).drop(differ).equals(table("local", fleet.RUNS_FILE).drop(differ))
    assert table("remote", fleet.ANOMALIES_FILE).equals(table("local", fleet.ANOMALIES_FILE))
    assert table("remote", fleet.RUNS_FILE)["error"].drop_nulls().to_list() == [
        f"{url}/broken: no readable training logs ({url}/broken/events.out.tfevents.1.host: not a TensorBoard event "
        "file (no valid TFRecord))"]
    client.put(str(RUNS["fsdp2"]), f"{BUCKET}/exp/fsdp2-again", recursive=True)  # (as another machine would)
    try:
        assert fleet.index(url, tmp_path / "remote", jobs=1, cache=False).summary().startswith(
            "1 new, 0 changed, 3 unchanged")
    finally:
        client.rm(f"{BUCKET}/exp/fsdp2-again", recursive=True)


@pytest.fixture
def denied(s3: tuple[object, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The server checks every request from here on, and forensics uses an IAM user that has no permission."""
    import boto3
    from moto import settings
    from moto.core.responses import ActionAuthenticatorMixin

    iam = boto3.client("iam")
    user = f"nobody-{uuid.uuid4().hex[:8]}"
    iam.create_user(UserName=user)
    key = iam.create_access_key(UserName=user)["AccessKey"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
    monkeypatch.setattr(settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)
    monkeypatch.setattr(ActionAuthenticatorMixin, "request_count", 0)
    s3fs.S3FileSystem.clear_instance_cache()
    yield
    s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture
def no_credentials(s3: tuple[object, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    s3fs.S3FileSystem.clear_instance_cache()
    yield
    s3fs.S3FileSystem.clear_instance_cache()


@pytest.mark.parametrize("command", [["analyze"], ["compare"], ["index", "-o", "{tmp}/fleet"]], ids=lambda c: c[0])
def test_no_such_bucket_is_one_line_and_exit_2(s3: tuple[object, Path], tmp_path: Path, command: list[str]) -> None:
    done = run_cli(command[0], "s3://no-such-bucket/exp/tr8", *(a.format(tmp=tmp_path) for a in command[1:]))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "forensics: error: s3://no-such-bucket/exp/tr8: no such bucket 'no-such-bucket'\n"


@pytest.mark.parametrize("command", [["analyze"], ["compare"], ["index", "-o", "{tmp}/fleet"]], ids=lambda c: c[0])
def test_no_credentials_is_one_line_and_exit_2(no_credentials: None, tmp_path: Path, command: list[str]) -> None:
    done = run_cli(command[0], f"s3://{BUCKET}/exp/tr8-104B", *(a.format(tmp=tmp_path) for a in command[1:]))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (f"forensics: error: s3://{BUCKET}/exp/tr8-104B: no credentials "
                           "(Unable to locate credentials)\n")


@pytest.mark.parametrize("command", [["analyze"], ["compare"], ["index", "-o", "{tmp}/fleet"]], ids=lambda c: c[0])
def test_permission_denied_is_one_line_and_exit_2(denied: None, tmp_path: Path, command: list[str]) -> None:
    done = run_cli(command[0], f"s3://{BUCKET}/exp/tr8-104B", *(a.format(tmp=tmp_path) for a in command[1:]))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith(f"forensics: error: s3://{BUCKET}/exp/tr8-104B: permission denied")
    assert done.stderr.count("\n") == 1
