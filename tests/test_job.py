"""Training as background jobs: one at a time, state in a real SQLite store, cancel, failure, restart."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from retrieval.data.dataset import Dataset
from training.job import FINAL, JobQueue, JobSpec
from training.trainer import TrainConfig

from .helpers import integrity_check


def spec(dataset, out_dir, model_dir, **config) -> JobSpec:
    cfg = TrainConfig(**{"loss": "triplet", "negatives": "random", "epochs": 1, "batch_size": 2, "device": "cpu",
                         "lr": 1e-3, "positives_per_query": 0, "holdout": 0.0, **config})  # every pair: 4 a toy epoch
    return JobSpec(dataset, cfg, str(out_dir), base_model=str(model_dir))


def wait_until(predicate, timeout=60.0):
    end = time.time() + timeout
    while time.time() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError("condition not reached in time")


def test_jobs_run_one_at_a_time_and_record_their_state(store, toy_dataset, tiny_model_dir, tmp_path):
    jobs = JobQueue(store)
    first = jobs.submit(spec(toy_dataset, tmp_path / "a", tiny_model_dir))
    created = store.get_job(first)["created"]
    second = jobs.submit(spec(toy_dataset, tmp_path / "b", tiny_model_dir, loss="quadruplet", stage1_max_epochs=1))
    assert first != second
    assert store.get_job(second)["status"] == "queued"
    snapshots = []
    while True:
        # the second job's state first: a first job still running when read after it was running then
        # too, so ("running", "running") means both at once (read the other way round, the first could
        # finish and the second start between the two reads)
        b = jobs.status(second)["status"]
        a = jobs.status(first)["status"]
        snapshots.append((a, b))
        if a in FINAL and b in FINAL:
            break
        time.sleep(0.02)
    assert ("running", "running") not in snapshots
    assert ("running", "queued") in snapshots  # the second waited while the first ran
    assert snapshots[-1] == ("done", "done")
    assert not any(b != "queued" for a, b in snapshots if a in ("queued", "running"))

    a, b = jobs.status(first), jobs.status(second)
    assert a["created"] == created < b["created"]  # updates do not move a job in the list
    assert [j["id"] for j in store.jobs()] == [second, first]  # newest first
    # 4 train pairs of the toy set, batch 2, one epoch: two steps
    assert [(s, n) for s, n, _ in a["losses"]] == [("triplet", 1), ("triplet", 2)]
    assert [s for s, _, _ in b["losses"]] == ["stage 1"] * 2 + ["stage 2"] * 2
    assert all(isinstance(v, float) and v >= 0 for _, _, v in a["losses"] + b["losses"])
    for job, out in ((a, tmp_path / "a"), (b, tmp_path / "b")):
        assert job["device"] == "cpu" and job["error"] == "" and job["kind"] == "train"
        assert job["dataset"] == toy_dataset.content_hash and job["dataset_name"] == "toy"
        assert job["config"]["base_model"] == str(tiny_model_dir)
        assert {"stage", "step", "total", "loss", "examples_per_s", "eta_s"} <= set(job["progress"])
        assert set(job["result"]["metrics"]) == {"base", "fine-tuned"}
        assert job["result"]["model_path"] == job["model_path"] == str(out)
        assert (out / "modules.json").exists() and (out / "README.md").exists()
        assert "losses" not in job["result"]
    assert a["config"]["loss"] == "triplet" and b["config"]["loss"] == "quadruplet"
    assert b["result"]["stages"][0].startswith("stage 1")


def test_cancel_a_running_job_and_a_queued_one(store, toy_dataset, tiny_model_dir, tmp_path):
    jobs = JobQueue(store)
    long = jobs.submit(spec(toy_dataset, tmp_path / "long", tiny_model_dir, epochs=10_000))  # 20,000 steps
    queued = jobs.submit(spec(toy_dataset, tmp_path / "queued", tiny_model_dir))
    assert jobs.cancel(queued)  # still queued: cancelled at once, never started
    assert jobs.status(queued)["status"] == "cancelled"
    wait_until(lambda: (jobs.status(long)["progress"] or {}).get("step", 0) >= 1)
    assert jobs.status(long)["status"] == "running"
    assert jobs.cancel(long)
    done = jobs.wait(long, timeout=60)
    assert done["status"] == "cancelled"
    assert done["error"].startswith("cancelled during triplet, step ")
    assert done["progress"]["total"] == 20_000 and done["progress"]["step"] < 20_000
    assert len(done["losses"]) >= 1
    jobs._queue.join()  # the worker has taken the cancelled queued job off the queue too
    skipped = jobs.status(queued)
    assert skipped["status"] == "cancelled" and skipped["progress"] == {} and skipped["device"] == ""
    assert not Path(tmp_path / "queued").exists()
    assert not jobs.cancel(long) and not jobs.cancel(queued) and not jobs.cancel("no-such-job")
    assert integrity_check(store) == "ok"


def test_a_failing_job_records_its_traceback_and_the_queue_goes_on(store, toy_dataset, tiny_model_dir, tmp_path):
    jobs = JobQueue(store)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    bad_dir = jobs.submit(spec(toy_dataset, blocker, tiny_model_dir))
    no_labels = jobs.submit(spec(Dataset("bare", toy_dataset.docs, toy_dataset.queries), tmp_path / "bare",
                                 tiny_model_dir))
    good = jobs.submit(spec(toy_dataset, tmp_path / "good", tiny_model_dir))
    a, b, c = (jobs.wait(j, timeout=120) for j in (bad_dir, no_labels, good))
    assert a["status"] == "failed"
    assert a["error"].startswith("FileExistsError: ") and "Traceback (most recent call last)" in a["error"]
    assert b["status"] == "failed"
    assert b["error"].startswith("ValueError: bare has no relevance labels") and "Traceback" in b["error"]
    assert "run_training" in b["error"]  # the traceback points at where it failed
    assert c["status"] == "done" and c["result"]["metrics"]
    assert blocker.read_text() == "not a folder"
    assert integrity_check(store) == "ok"


def test_a_new_queue_marks_jobs_a_dead_process_left_as_interrupted(store, tmp_path):
    # what a process killed mid-job leaves in the store
    store.put_job({"id": "r", "status": "running", "progress": {"stage": "triplet", "step": 3, "total": 9}})
    store.put_job({"id": "q", "status": "queued"})
    store.put_job({"id": "d", "status": "done", "result": {"model_path": "x"}})
    from retrieval.store import Store

    reopened = Store(store.path)  # the restarted process opens the same file
    jobs = JobQueue(reopened)
    assert jobs.status("r")["status"] == "interrupted"
    assert jobs.status("r")["progress"] == {"stage": "triplet", "step": 3, "total": 9}
    assert jobs.status("q")["status"] == "interrupted"
    assert jobs.status("d")["status"] == "done" and jobs.status("d")["result"] == {"model_path": "x"}
    assert not jobs.cancel("r")  # not this process's job, and already final
    assert jobs.wait("r", timeout=1)["status"] == "interrupted"
    assert "interrupted" in FINAL
    reopened.close()


@pytest.mark.slow
def test_a_stopped_job_resumes_under_its_id_and_ends_as_if_never_stopped(store, demo, tiny_model_dir, tmp_path):
    from safetensors.torch import load_file

    jobs = JobQueue(store)
    whole = jobs.wait(jobs.submit(spec(demo, tmp_path / "whole", tiny_model_dir, epochs=3)))  # 20 steps an epoch
    job_id = jobs.submit(spec(demo, tmp_path / "ft", tiny_model_dir, epochs=3))
    wait_until(lambda: (tmp_path / "ft" / "checkpoints" / "train" / "state.pt").exists())
    jobs.cancel(job_id)  # in its second epoch: the first one's checkpoint is on disk
    assert jobs.wait(job_id)["status"] == "cancelled"
    assert [j["id"] for j in jobs.resumable(demo)] == [job_id]
    other = Dataset("other", dict(list(demo.docs.items())[:50]), demo.queries, demo.qrels)
    assert jobs.resumable(other) == []
    with pytest.raises(ValueError, match="trained on 'demo', not on 'other'; open that data set"):
        jobs.resume(job_id, other)
    with pytest.raises(ValueError, match=f"job {whole['id']} is done"):
        jobs.resume(whole["id"], demo)

    assert jobs.resume(job_id, demo) == job_id
    done = jobs.wait(job_id)
    assert done["status"] == "done" and done["error"] == ""
    assert done["result"]["stages"][0].startswith("resumed after triplet epoch ")
    # the loss curve reads as one run: every step once, in order, the same as the unstopped job's
    assert [(s, n) for s, n, _ in done["losses"]] == [(s, n) for s, n, _ in whole["losses"]]
    mine = load_file(str(tmp_path / "ft" / "model.safetensors"))
    theirs = load_file(str(tmp_path / "whole" / "model.safetensors"))
    assert all((mine[k] == theirs[k]).all() for k in theirs)
    assert jobs.resumable(demo) == []  # finished: its checkpoints are gone


def test_wait_times_out_on_a_job_that_never_ends(store):
    jobs = JobQueue(store)
    store.put_job({"id": "x", "status": "queued"})  # a row the worker was never given
    with pytest.raises(TimeoutError, match="still running after 0.2 s"):
        jobs.wait("x", timeout=0.2)
