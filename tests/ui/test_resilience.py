"""Killing the app in the middle of a training job, then starting it again on the same store and resuming it.

The app runs as a real process (``python app.py``) with the tiny encoder and a temporary store;
it is killed with SIGKILL (no clean-up code runs), so this is what a crash or a pulled plug does.
"""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from retrieval.store import Store
from tests.conftest import ROOT, store_copy
from tests.helpers import app_client, count_embeddings, integrity_check, patience


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_app(model_dir: Path, store: Path, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, str(ROOT / "app.py"), "--model", str(model_dir), "--store", str(store),
                             "--port", str(port)], cwd=ROOT, env=env, stdout=log.open("ab"),
                            stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.time() + patience(180)
    while time.time() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the app exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            urllib.request.urlopen(url, timeout=2)
            return proc, url
        except OSError:
            time.sleep(0.1)
    proc.kill()
    pytest.fail(f"the app did not start in 180 s:\n{log.read_text()[-3000:]}")


def counts(store_path: Path) -> dict:
    store = Store(store_path)
    try:
        return {"embeddings": count_embeddings(store), "runs": {r["key"] for r in store.runs()},
                "metrics": store.db["metrics"].count}
    finally:
        store.close()


@pytest.mark.slow
@pytest.mark.server
def test_killed_during_training_the_store_survives_and_the_job_resumes(tiny_model_dir, demo_sparse_store, tmp_path):
    """The store starts as a copy of one holding the bundled SPLADE's vectors of the demo (``demo_sparse_store``),
    as a user's does after a first visit: the app reads its learned sparse index instead of encoding it."""
    store_path, log = store_copy(demo_sparse_store, tmp_path / "store.sqlite3"), tmp_path / "app.log"
    proc, url = start_app(tiny_model_dir, store_path, log)
    try:
        client = app_client(url)
        client.predict("test", [], api_name="/evaluate")  # fills the cache: runs, metrics, λ
        before = counts(store_path)
        # two epochs (the defaults' held-out check keeps 31 of the 39 train queries to train on);
        # killed once the first epoch's checkpoint is on disk
        out = client.predict("triplet", "bm25", 2, 2, 1e-3, 32, None, 0.1, 0.3, 0.01, "cpu", 0.8,
                             api_name="/train")
        job_id = out[0].split("`")[1]
        state = Path(client.predict(job_id, api_name="/training_status")["model_path"]) / "checkpoints" / "train" / \
            "state.pt"
        deadline = time.time() + patience(120)
        while not state.exists():
            assert time.time() < deadline, client.predict(job_id, api_name="/training_status")
            time.sleep(0.01)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    client.close()

    store = Store(store_path)
    assert integrity_check(store) == "ok"
    store.close()
    after_kill = counts(store_path)
    assert after_kill["embeddings"] == before["embeddings"] > 0
    assert after_kill["runs"] >= before["runs"] and before["runs"]

    proc, url = start_app(tiny_model_dir, store_path, log)
    try:
        client = app_client(url)
        job = client.predict(job_id, api_name="/training_status")
        assert job["status"] == "interrupted", job
        assert job["losses"]  # what it had logged before the kill is still there
        caption, table, _ = client.predict("test", [], api_name="/evaluate")
        assert table["data"]
        restarted = counts(store_path)
        # nothing cached before was lost or recomputed: same embeddings, every earlier run still there
        assert restarted["embeddings"] == before["embeddings"]
        assert before["runs"] <= restarted["runs"]
        # the Train tab's Resume: the same job goes on from its first epoch's checkpoint to the end
        said = client.predict(api_name="/resume_training")
        assert said[0] == f"Job `{job_id}` resumed: it goes on from its last finished epoch.", said
        deadline = time.time() + patience(300)
        while (job := client.predict(job_id, api_name="/training_status"))["status"] in ("queued", "running"):
            assert time.time() < deadline, job
            time.sleep(0.5)
        assert job["status"] == "done", job
        # killed in epoch 2 (its checkpoint, when it ran faster than the kill): never after the run's end
        assert re.match(r"resumed after triplet epoch [12] from ", job["result"]["stages"][0]), job["result"]
        steps = [n for s, n, _ in job["losses"] if s == "triplet"]
        per_epoch = len(steps) // 2  # 31 queries, some without a negative
        assert per_epoch > 5 and steps == list(range(1, 2 * per_epoch + 1))  # each step of the 2 epochs once
        assert job["result"]["verdict"].startswith("held-out selection on 8 queries: ")
        client.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    store = Store(store_path)
    assert integrity_check(store) == "ok"
    store.close()


KILL_AT_60_PERCENT = """
import os, signal, sys
from retrieval import Store, Workspace, load_dataset
data, store, model = sys.argv[1:4]
def progress(fraction, what):
    if fraction >= 0.6:
        print(what, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
Workspace(load_dataset(data), Store(store), model=model).build_dense(progress=progress)
"""


@pytest.mark.slow
def test_encoding_killed_at_60_percent_resumes_where_it_stopped(tiny_model_dir, tmp_path, capsys):
    """A corpus of 2,400 passages, encoding killed (SIGKILL) once 60% is done (past the first committed
    part of ``COMMIT_EVERY``); the CLI run that follows reads what was committed and encodes the rest,
    redoing at most one committed part."""
    from retrieval.index.dense_index import COMMIT_EVERY

    n = 2400
    assert 0.6 * n > COMMIT_EVERY  # the kill comes after a commit: something to resume from
    data = tmp_path / "corpus.jsonl"
    words = "river stone garden kettle ledger harbour violin pepper lantern orbit".split()
    with data.open("w") as f:
        for i in range(n):
            text = " ".join(words[(i * k) % len(words)] for k in range(1, 12 + i % 30))
            f.write(f'{{"_id": "d{i}", "text": "passage {i}: {text}"}}\n')
    store = tmp_path / "store.sqlite3"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    killed = subprocess.run([sys.executable, "-c", KILL_AT_60_PERCENT, str(data), str(store), str(tiny_model_dir)],
                            capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert killed.returncode == -signal.SIGKILL
    done_at_kill = int(killed.stdout.split("encoding ")[1].split("/")[0])
    assert 0.6 * n <= done_at_kill < n
    committed = count_embeddings(Store(store))
    assert done_at_kill - COMMIT_EVERY <= committed <= done_at_kill and committed > 0  # at most one part lost
    # the CLI run that follows, in this process (its ``main``): the kill above is the process this test is about
    from retrieval.cli import main

    capsys.readouterr()
    assert main(["search", str(data), "violin harbour", "--model", str(tiny_model_dir), "--store", str(store)]) == 0
    assert f"embeddings: {committed:,} from the store, {n - committed:,} encoded" in capsys.readouterr().err
    from retrieval.systems.reliability import reference_texts  # the hybrid's reliability check embeds these too, once

    assert count_embeddings(Store(store)) == n + len(set(reference_texts()))
