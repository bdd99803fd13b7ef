"""Training as background jobs: one at a time, state in a real SQLite store, cancel, failure, restart."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from retrieval.data.dataset import Dataset
from tests.helpers import integrity_check
from training.job import FINAL, JobQueue, JobSpec
from training.trainer import TrainConfig


def spec(dataset, out_dir, model_dir, owner: str = "cli:ana", **config) -> JobSpec:
    cfg = TrainConfig(**{"loss": "triplet", "negatives": "random", "epochs": 1, "batch_size": 2, "device": "cpu",
                         "lr": 1e-3, "positives_per_query": 0, "holdout": 0.0, **config})  # every pair: 4 a toy epoch
    return JobSpec(dataset, cfg, str(out_dir), base_model=str(model_dir), owner=owner)


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
    second = jobs.submit(spec(toy_dataset, tmp_path / "b", tiny_model_dir, "cli:bo", loss="quadruplet",
                              stage1_max_epochs=1))
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


def test_cancel_a_running_job_and_a_queued_one(store, demo, tiny_model_dir, tmp_path):
    jobs = JobQueue(store)
    long = jobs.submit(spec(demo, tmp_path / "long", tiny_model_dir, epochs=100))  # 100 epochs of the demo's pairs
    queued = jobs.submit(spec(demo, tmp_path / "queued", tiny_model_dir, "cli:bo"))
    assert jobs.cancel(queued)  # still queued: cancelled at once, never started
    assert jobs.status(queued)["status"] == "cancelled"
    wait_until(lambda: (jobs.status(long)["progress"] or {}).get("step", 0) >= 1)
    assert jobs.status(long)["status"] == "running"
    assert jobs.cancel(long)
    done = jobs.wait(long, timeout=60)
    assert done["status"] == "cancelled"
    assert done["error"].startswith("cancelled during triplet, step ")
    assert done["progress"]["total"] >= 2_000 and done["progress"]["step"] < done["progress"]["total"]
    assert len(done["losses"]) >= 1
    jobs._queue.join()  # the worker has taken the cancelled queued job off the queue too
    skipped = jobs.status(queued)
    assert skipped["status"] == "cancelled" and skipped["progress"] == {} and skipped["device"] == ""
    assert not Path(tmp_path / "queued").exists()
    assert not jobs.cancel(long) and not jobs.cancel(queued) and not jobs.cancel("no-such-job")
    assert integrity_check(store) == "ok"


def test_a_cancelled_job_says_cancelling_at_once_stops_within_a_step_and_never_says_running_again(
        store, demo, tiny_model_dir, tmp_path):
    """Every status the job's row is given, in order. The cancel comes as the job reports a step (from its own
    thread, so the step is known exactly); the worker is then held just before its last write, the window where
    the row still says cancelling, and a Resume click there is refused, naming why."""
    import threading

    from training.job import STOPPING, JobRefused
    from ui.train import job_markdown

    written: list[str] = []
    at_cancel: list[int] = []
    held, go = threading.Event(), threading.Event()
    put = store.put_job
    jobs = JobQueue(store)

    def recording(row: dict) -> None:
        worker = threading.current_thread().name == "rankscope-training"
        if worker and row.get("status") == "cancelled":
            held.set()
            go.wait(60)  # the run has stopped and given its slot back; its row still says cancelling
        put(row)
        if "status" in row:
            written.append(row["status"])
        step = (row.get("progress") or {}).get("step", 0)
        if worker and step >= 2 and not at_cancel:
            at_cancel.append(step)
            assert jobs.cancel(job_id)  # the click, as the job reports its second step

    store.put_job = recording
    job_id = jobs.submit(spec(demo, tmp_path / "ft", tiny_model_dir, epochs=100))
    assert held.wait(60)
    job = jobs.status(job_id)
    assert job["status"] == STOPPING
    shown = job_markdown(job)
    assert f"— {STOPPING}**" in shown and "stopping at its next batch" in shown and "running" not in shown
    assert jobs.stopping(demo) == [job_id] and jobs.resumable(demo) == []
    with pytest.raises(JobRefused, match=f"job {job_id} is still stopping after its cancel: resume it once it says "
                                         "cancelled"):
        jobs.resume(job_id, demo)  # a Resume click while it stops
    go.set()
    done = jobs.wait(job_id, timeout=60)
    assert written == ["queued", "running", STOPPING, "cancelled"]  # never running after the cancel
    assert done["status"] == "cancelled" and done["error"].startswith(f"cancelled during triplet, step {at_cancel[0]}/")
    assert len(done["losses"]) == at_cancel[0]  # no step after the one it was reporting
    assert jobs.stopping(demo) == []


def test_a_failing_job_records_its_traceback_and_the_queue_goes_on(store, toy_dataset, tiny_model_dir, tmp_path):
    jobs = JobQueue(store)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    bad_dir = jobs.submit(spec(toy_dataset, blocker, tiny_model_dir, "cli:ana"))
    no_labels = jobs.submit(spec(Dataset("bare", toy_dataset.docs, toy_dataset.queries), tmp_path / "bare",
                                 tiny_model_dir, "cli:bo"))
    good = jobs.submit(spec(toy_dataset, tmp_path / "good", tiny_model_dir, "cli:cy"))
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
    store.put_job({"id": "c", "status": "cancelling"})  # its cancel asked, the process died before it stopped
    store.put_job({"id": "d", "status": "done", "result": {"model_path": "x"}})
    from retrieval.store import Store

    reopened = Store(store.path)  # the restarted process opens the same file
    jobs = JobQueue(reopened)
    assert jobs.status("r")["status"] == "interrupted"
    assert jobs.status("r")["progress"] == {"stage": "triplet", "step": 3, "total": 9}
    assert jobs.status("q")["status"] == "interrupted"
    assert jobs.status("c")["status"] == "cancelled"  # it did stop
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


# ---- what the queue takes: counted in its own records ----------------------------------------

def long_job(demo, tmp_path, model_dir, name: str, owner: str) -> JobSpec:
    """A job that runs far longer than a test waits (100 epochs of the demo's pairs): cancelled at the end."""
    return spec(demo, tmp_path / name, model_dir, owner, epochs=100)


def end_all(jobs: JobQueue, ids) -> None:
    for job_id in ids:
        jobs.cancel(job_id)
    for job_id in ids:
        assert jobs.wait(job_id, timeout=120)["status"] == "cancelled"


def test_a_maker_holds_one_job_and_its_slot_comes_back_when_the_job_ends(store, demo, tiny_model_dir, tmp_path):
    """One job queued or running per maker, whatever the caller holds: a second is refused naming the
    first; another maker queues behind it; a queued job cancelled gives its slot back at once, a running
    one once it has stopped."""
    from training.job import JobRefused

    jobs = JobQueue(store)
    ana = jobs.submit(long_job(demo, tmp_path, tiny_model_dir, "a", "app:ana"))
    with pytest.raises(JobRefused, match=rf"^job {ana} of yours is still queued or running: cancel it, or wait"):
        jobs.submit(long_job(demo, tmp_path, tiny_model_dir, "a2", "app:ana"))
    bo = jobs.submit(long_job(demo, tmp_path, tiny_model_dir, "b", "app:bo"))
    assert jobs.status(bo)["status"] == "queued" and jobs.waiting() == 1
    assert jobs.cancel(bo) and jobs.waiting() == 0
    again = jobs.submit(long_job(demo, tmp_path, tiny_model_dir, "b2", "app:bo"))  # at once: its slot is free
    wait_until(lambda: jobs.status(ana)["status"] == "running")
    assert jobs.cancel(ana)
    done = jobs.wait(ana, timeout=120)
    assert done["status"] == "cancelled"
    third = jobs.submit(long_job(demo, tmp_path, tiny_model_dir, "a3", "app:ana"))  # read as ended: free
    assert len(store.jobs()) == 4  # the refused one left no row
    end_all(jobs, [again, third])


def test_the_waiting_jobs_and_one_address_s_are_bounded_and_two_at_once_cannot_both_take_the_last_slot(
        store, demo, tiny_model_dir, tmp_path):
    """Makers that each queue one job (an API client's every new session) still meet the bound on one
    client address and the bound on the jobs waiting in all; submitted from many threads at once, the
    queue takes exactly as many as its bounds say."""
    import threading

    from training.job import PER_ADDRESS, JobLimits, JobRefused

    assert JobLimits.for_deployment(False).per_address is None  # off a shared deployment: none per address
    assert JobLimits.for_deployment(True).per_address == PER_ADDRESS == 2
    jobs = JobQueue(store, JobLimits(per_address=2, waiting=3))
    first = jobs.submit(long_job(demo, tmp_path, tiny_model_dir, "s0", "app:s0"), "203.0.113.7")
    wait_until(lambda: jobs.status(first)["status"] == "running")
    taken = [jobs.submit(long_job(demo, tmp_path, tiny_model_dir, "s1", "app:s1"), "203.0.113.7")]
    with pytest.raises(JobRefused, match=r"^2 training jobs from your address are queued or running, the most one "):
        jobs.submit(long_job(demo, tmp_path, tiny_model_dir, "s2", "app:s2"), "203.0.113.7")
    refused: list[str] = []
    barrier = threading.Barrier(12)

    def submit(n: int) -> None:
        barrier.wait()
        try:
            taken.append(jobs.submit(long_job(demo, tmp_path, tiny_model_dir, f"t{n}", f"app:t{n}"), f"198.51.100.{n}"))
        except JobRefused as err:
            refused.append(str(err))

    threads = [threading.Thread(target=submit, args=(n,)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(taken) == 3 and jobs.waiting() == 3  # the running one, then three waiting: no more
    assert refused == ["3 training jobs are waiting already, the most the queue takes; try again later"] * 10
    assert {j["status"] for j in store.jobs()} == {"running", "queued"} and len(store.jobs()) == 4
    end_all(jobs, [first, *taken])


def test_a_job_asking_for_more_work_than_one_job_may_is_refused_before_it_waits(store, tmp_path):
    """130,000 labelled pairs, 100 epochs after 100 of quadruplet stage one, refit: 52 million examples.
    The queue refuses it before it waits, and ``run_training`` (the command line's) before it loads
    anything (the base model named does not even exist): one line, nothing written."""
    from dataclasses import replace

    from retrieval.data.dataset import Document
    from training.finetune import check_work, run_training

    n = 130_000
    wide = Dataset("wide", {f"d{i}": Document(f"d{i}", "", "word") for i in range(n)}, {"q": "a query"},
                   {"train": {"q": {f"d{i}": 1 for i in range(n)}}, "test": {"q": {"d0": 1}}})
    cfg = TrainConfig(loss="quadruplet", epochs=100, stage1_max_epochs=100, positives_per_query=0, device="cpu")
    said = (r"^this training asks for up to 52,000,000 examples \(400 epochs of 130,000 pairs\), more than one job "
            r"may \(50,000,000\): ask for fewer epochs, positives per query or steps per epoch$")
    jobs = JobQueue(store)
    with pytest.raises(ValueError, match=said):
        jobs.submit(JobSpec(wide, cfg, str(tmp_path / "queued"), base_model=str(tmp_path / "no-model")))
    with pytest.raises(ValueError, match=said):
        run_training(wide, cfg, tmp_path / "direct", base_model=str(tmp_path / "no-model"), store=store)
    assert store.jobs() == [] and jobs.waiting() == 0
    assert not (tmp_path / "queued").exists() and not (tmp_path / "direct").exists()
    check_work(wide, replace(cfg, positives_per_query=1))  # one positive per query an epoch: 400 examples


def test_a_new_session_of_the_same_browser_gets_no_new_slot(store, demo, tiny_model_dir, tmp_path):
    """The app's maker of a page is its browser (its token: ``Registry.identify``): a new tab or a
    reload of the same browser queues nothing while the browser's job is queued or running; another
    browser does."""
    from training.job import JobLimits, JobRefused
    from ui.registry import Registry

    registry = Registry(store, str(tiny_model_dir), shared=True)
    token = registry.identify("ana-tab", None)
    assert registry.identify("ana-new-tab", token) == token
    registry.identify("bo-tab", None)
    jobs = JobQueue(store, JobLimits.for_deployment(True))
    first = jobs.submit(long_job(demo, tmp_path, tiny_model_dir, "a", registry.viewer("ana-tab").owner), "192.0.2.1")
    with pytest.raises(JobRefused, match=rf"^job {first} of yours is still queued or running"):
        jobs.submit(long_job(demo, tmp_path, tiny_model_dir, "a2", registry.viewer("ana-new-tab").owner), "192.0.2.2")
    other = jobs.submit(long_job(demo, tmp_path, tiny_model_dir, "b", registry.viewer("bo-tab").owner), "192.0.2.3")
    end_all(jobs, [first, other])
