"""Training as a background job: one at a time, others queued; progress, cancel, state in the store.

``JobQueue.submit`` returns a job id at once; a single worker thread runs jobs in order. Each job's
state (queued → running → done | failed | cancelled), parameters, progress (stage, step/total,
loss, examples/s, ETA), loss curve, device, error with traceback and exported model path are
written to the store's ``jobs`` table, so the app can poll it and a restart can show what
happened (jobs a dead process left running are marked ``interrupted`` on start). An interrupted,
cancelled or failed job whose checkpoints are on disk can be resumed (``resume``): it runs again
under the same id and goes on from its last finished epoch (``training.checkpoint``).

A job records who queued it (``JobSpec.owner``, an owner id of ``retrieval.sharing.owners``). Off a
shared deployment anyone may resume or cancel any job; on one (``Viewer.shared``) only its maker,
and to everyone else it is as if it did not exist. A job kept before makers were recorded is
everyone's.
"""
from __future__ import annotations

import queue
import threading
import time
import traceback
import uuid
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from retrieval.data.dataset import Dataset
from retrieval.sharing.owners import OPERATOR, Viewer
from retrieval.store import Store
from training.finetune import run_training
from training.trainer import Cancelled, TrainConfig, TrainingProgress

FINAL = ("done", "failed", "cancelled", "interrupted")
RESUMABLE = ("interrupted", "cancelled", "failed")
SPEC_FIELDS = ("base_model", "eval_split", "cold_start", "encoder")  # stored with the config, not part of it


@dataclass
class JobSpec:
    dataset: Dataset
    config: TrainConfig
    out_dir: str
    base_model: str | None = None
    eval_split: str | None = None
    cold_start: float | None = None
    encoder: str | None = None  # training the learned sparse model: the dense encoder its fusion is evaluated with
    owner: str = ""  # who queued it (an owner id): on a shared deployment only its maker resumes or cancels it


def mine(job: dict, viewer: Viewer) -> bool:
    """Whether ``viewer`` may resume or cancel ``job``: off a shared deployment anyone may; on one,
    its maker, or anyone where it has no maker (kept before makers were recorded)."""
    owner = job.get("owner") or ""
    return viewer.sees(owner, not owner)


class JobQueue:
    def __init__(self, store: Store):
        self.store = store
        self.store.mark_interrupted()
        self._queue: queue.Queue[tuple[str, JobSpec]] = queue.Queue()
        self._cancel: dict[str, threading.Event] = {}
        self._losses: dict[str, list] = {}
        self._worker = threading.Thread(target=self._work, name="rankscope-training", daemon=True)
        self._worker.start()

    def submit(self, spec: JobSpec) -> str:
        job_id = time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
        self._cancel[job_id] = threading.Event()
        self.store.put_job({"id": job_id, "status": "queued", "kind": "train", "owner": spec.owner,
                            "dataset": spec.dataset.content_hash,
                            "dataset_name": spec.dataset.name, "config": {**asdict(spec.config),
                            "base_model": spec.base_model, "eval_split": spec.eval_split,
                            "cold_start": spec.cold_start, "encoder": spec.encoder}, "progress": {}, "losses": [],
                            "device": "",
                            "error": "", "model_path": spec.out_dir, "result": {}})
        self._queue.put((job_id, spec))
        return job_id

    def waiting(self) -> int:
        """How many jobs wait in the queue (the one running not counted)."""
        return self._queue.qsize()

    def resumable(self, dataset: Dataset, viewer: Viewer = OPERATOR) -> list[dict]:
        """``viewer``'s jobs (``mine``) on ``dataset`` (same content) that stopped before the end and left
        checkpoints, newest first."""
        return [job for job in self.store.jobs() if job["status"] in RESUMABLE and mine(job, viewer)
                and job["dataset"] == dataset.content_hash and (Path(job["model_path"]) / "checkpoints").is_dir()]

    def resume(self, job_id: str, dataset: Dataset, viewer: Viewer = OPERATOR) -> str:
        """Queue ``job_id`` again with its own parameters, output folder and maker; training goes on
        from its checkpoints. ``dataset`` must be the one it trained on; a job not ``viewer``'s to
        act on (``mine``) is refused as one that does not exist."""
        job = self.store.get_job(job_id)
        if job is None or not mine(job, viewer):
            raise ValueError(f"no training job {job_id!r}")
        if job["status"] not in RESUMABLE:
            raise ValueError(f"job {job_id} is {job['status']}: only an interrupted, cancelled or failed job resumes")
        if job["dataset"] != dataset.content_hash:
            raise ValueError(f"job {job_id} trained on {job['dataset_name']!r}, not on {dataset.name!r}; "
                             "open that data set to resume it")
        values, known = dict(job["config"]), {f.name for f in fields(TrainConfig)}
        cfg = TrainConfig(**{k: v for k, v in values.items() if k in known})
        cfg.validate()
        spec = JobSpec(dataset, cfg, job["model_path"], **{k: values.get(k) for k in SPEC_FIELDS},
                       owner=job.get("owner") or "")
        self._cancel[job_id] = threading.Event()
        self.store.put_job({"id": job_id, "status": "queued", "error": "", "progress": {}})
        self._queue.put((job_id, spec))
        return job_id

    def cancel(self, job_id: str, viewer: Viewer = OPERATOR) -> bool:
        """Stop ``job_id`` (at its next step, or before it starts); False when it is not running or
        queued here, or not ``viewer``'s to act on (``mine``)."""
        event = self._cancel.get(job_id)
        job = self.store.get_job(job_id)
        if event is None or job is None or job["status"] in FINAL or not mine(job, viewer):
            return False
        event.set()
        if job["status"] == "queued":
            self.store.put_job({"id": job_id, "status": "cancelled"})
        return True

    def status(self, job_id: str) -> dict | None:
        return self.store.get_job(job_id)

    def wait(self, job_id: str, timeout: float = 600) -> dict:
        end = time.time() + timeout
        while time.time() < end:
            job = self.store.get_job(job_id)
            if job and job["status"] in FINAL:
                return job
            time.sleep(0.1)
        raise TimeoutError(f"job {job_id} still running after {timeout} s")

    def _work(self) -> None:
        while True:
            job_id, spec = self._queue.get()
            try:
                self._run(job_id, spec)
            finally:
                self._queue.task_done()

    def _run(self, job_id: str, spec: JobSpec) -> None:
        cancel = self._cancel[job_id]
        if cancel.is_set():
            return
        losses: list = list((self.store.get_job(job_id) or {}).get("losses") or [])  # a resumed job's so far
        last_write, trimmed = [0.0], [False]

        def on_progress(p: TrainingProgress) -> None:
            if p.loss == p.loss:  # not NaN
                if not trimmed[0]:  # a resumed run repeats the steps after its checkpoint: drop the old ones
                    trimmed[0] = True
                    cut = next((i for i, (stage, step, _) in enumerate(losses) if stage == p.stage and step >= p.step),
                               len(losses))
                    del losses[cut:]
                losses.append([p.stage, p.step, round(p.loss, 6)])
            now = time.time()
            if now - last_write[0] > 0.5 or p.step == p.total:
                last_write[0] = now
                self.store.put_job({"id": job_id, "progress": asdict(p), "losses": losses})

        from retrieval.index.encoder import pick_device

        self.store.put_job({"id": job_id, "status": "running", "device": pick_device(spec.config.device)})
        try:
            Path(spec.out_dir).mkdir(parents=True, exist_ok=True)
            result = run_training(spec.dataset, spec.config, spec.out_dir, spec.base_model, self.store,
                                  spec.eval_split, spec.cold_start, on_progress, cancel, encoder=spec.encoder)
            summary = {k: v for k, v in result.to_json().items() if k != "losses"}
            # every step's loss, those of a resumed job's earlier run included (its checkpoint kept them)
            losses = [[stage, step, round(loss, 6)] for stage, step, loss in result.losses]
            self.store.put_job({"id": job_id, "status": "done", "losses": losses, "result": summary,
                                "device": result.device})
        except Cancelled as err:
            self.store.put_job({"id": job_id, "status": "cancelled", "losses": losses, "error": str(err)})
        except Exception as err:
            self.store.put_job({"id": job_id, "status": "failed", "losses": losses,
                                "error": f"{type(err).__name__}: {err}\n\n{traceback.format_exc()}"})
