"""Training as a background job: one at a time, others queued; progress, cancel, state in the store.

``JobQueue.submit`` returns a job id at once; a single worker thread runs jobs in order. Each job's
state (queued → running → done | failed | cancelled; a running job cancelled says ``cancelling`` at
once and ``cancelled`` when it has stopped, never ``running`` again), parameters, progress (stage, step/total,
loss, examples/s, ETA), loss curve, device, error with traceback and exported model path are
written to the store's ``jobs`` table, so the app can poll it and a restart can show what
happened (jobs a dead process left running are marked ``interrupted`` on start). An interrupted,
cancelled or failed job whose checkpoints are on disk can be resumed (``resume``): it runs again
under the same id and goes on from its last finished epoch (``training.checkpoint``).

A job records who queued it (``JobSpec.owner``, an owner id of ``retrieval.sharing.owners``). Off a
shared deployment anyone may resume or cancel any job; on one (``Viewer.shared``) only its maker,
and to everyone else it is as if it did not exist. A job kept before makers were recorded is
everyone's.

What the queue takes is bounded by its own records (``JobLimits``), never by a value a client sends
or keeps: the jobs queued or running in this process, each with its maker and the client address it
came from (kept in memory only: an address is never written to the store, whose job rows
``/training_status`` shows to whoever knows an id). A maker has at most ``per_owner`` of them — the
app's maker of a page is its browser (``ui.registry.Registry.viewer``), so a new tab or session of the
same browser gets no new slot; a client that gives no browser token (an API client) is a maker per
session, so a stranger opening many sessions is held by the next two bounds instead: at most
``per_address`` from one client address (on a shared deployment), and at most ``waiting`` waiting in
all. Each check and the job's entry into the records are one step under the queue's lock, so two
sessions submitting at once cannot both take the last slot. Before a job waits, the work it asks for
is checked against the data (``training.finetune.check_work``).
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
from training.finetune import check_work, run_training
from training.trainer import Cancelled, TrainConfig, TrainingProgress

FINAL = ("done", "failed", "cancelled", "interrupted")
RESUMABLE = ("interrupted", "cancelled", "failed")
SPEC_FIELDS = ("base_model", "eval_split", "cold_start", "encoder", "precision")  # stored with the config, not in it
STOPPING = "cancelling"  # a running job whose cancel was asked: it stops at its next module call, then says cancelled


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
    precision: str | None = None  # the base dense encoder's, as the app's workspace has it (None: "auto")


@dataclass(frozen=True)
class JobLimits:
    """What one queue takes: jobs queued or running per maker and (None: not counted) per client
    address, and jobs waiting in all (the one running not counted)."""

    per_owner: int | None = 1
    per_address: int | None = None  # a shared deployment's (``for_deployment``)
    waiting: int = 8

    @classmethod
    def for_deployment(cls, shared: bool) -> JobLimits:
        """The app's bounds: on a shared deployment also ``PER_ADDRESS`` per client address, so that one
        client opening many sessions cannot fill the queue alone; off one (a laptop, a team's server,
        where everyone may sit behind one address) none per address."""
        return cls(per_address=PER_ADDRESS if shared else None)


PER_ADDRESS = 2  # jobs queued or running from one client address on a shared deployment


def _device(asked: str) -> str:
    """Where a job asking for ``asked`` trains (``pick_device``; imported here: it loads torch)."""
    from retrieval.index.encoder import pick_device

    return pick_device(asked)


class JobRefused(ValueError):
    """The queue's records say no: the maker's or the address's jobs, or the waiting ones, are at their bound."""


@dataclass
class _Live:
    """A job queued or running in this process: who queued it, from where, and its cancel event (the
    queue's own item carries the same one, so a job queued again under its id is a new entry)."""

    owner: str
    address: str
    cancel: threading.Event
    running: bool = False


def mine(job: dict, viewer: Viewer) -> bool:
    """Whether ``viewer`` may resume or cancel ``job``: off a shared deployment anyone may; on one,
    its maker, or anyone where it has no maker (kept before makers were recorded)."""
    owner = job.get("owner") or ""
    return viewer.sees(owner, not owner)


class JobQueue:
    def __init__(self, store: Store, limits: JobLimits | None = None):
        self.store = store
        self.limits = limits or JobLimits()
        self.store.mark_interrupted()
        self._queue: queue.Queue[tuple[str, JobSpec, threading.Event]] = queue.Queue()
        self._cancel: dict[str, threading.Event] = {}
        self._live: dict[str, _Live] = {}  # the jobs queued or running here: what ``limits`` counts
        self._lock = threading.Lock()
        self._worker = threading.Thread(target=self._work, name="rankscope-training", daemon=True)
        self._worker.start()

    def submit(self, spec: JobSpec, address: str = "") -> str:
        """Queue ``spec`` (its maker ``spec.owner``, from client ``address``; "" where none is known)
        and return its id at once. A ValueError in one line, nothing queued, when it asks for more work
        than one job may (``training.finetune.check_work``); ``JobRefused`` when ``limits`` take no
        more of its maker's, its address's or anyone's."""
        check_work(spec.dataset, spec.config)
        job_id = time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
        cancel = self._admit(job_id, spec.owner, address)
        config = {**asdict(spec.config), **{name: getattr(spec, name) for name in SPEC_FIELDS}}
        self._enqueue(job_id, spec, cancel, {
            "id": job_id, "status": "queued", "kind": "train", "owner": spec.owner,
            "dataset": spec.dataset.content_hash, "dataset_name": spec.dataset.name, "config": config,
            "progress": {}, "losses": [], "device": "", "error": "", "model_path": spec.out_dir, "result": {}})
        return job_id

    def _enqueue(self, job_id: str, spec: JobSpec, cancel: threading.Event, row: dict) -> None:
        """Write the admitted job's ``row`` and hand it to the worker; a write that fails gives its slot back."""
        try:
            self.store.put_job(row)
        except BaseException:
            self._release(job_id, cancel)
            raise
        self._queue.put((job_id, spec, cancel))

    def _admit(self, job_id: str, owner: str, address: str) -> threading.Event:
        """Take ``job_id`` into the records, or ``JobRefused`` saying which bound it meets (counted and
        taken in one step under the lock); its cancel event."""
        with self._lock:
            return self._admit_locked(job_id, owner, address)

    def _admit_locked(self, job_id: str, owner: str, address: str) -> threading.Event:
        limits, live = self.limits, self._live
        if job_id in live:  # cancelled, and its run not over yet
            raise JobRefused(f"job {job_id} is still stopping after its cancel: resume it once it says cancelled")
        own = [other for other, entry in live.items() if entry.owner == owner]
        if limits.per_owner is not None and len(own) >= limits.per_owner:
            if live[own[0]].cancel.is_set():
                raise JobRefused(f"job {own[0]} of yours is still stopping after its cancel: wait until it says "
                                 "cancelled")
            raise JobRefused(f"job {own[0]} of yours is still queued or running: cancel it, or wait for it to end")
        if limits.per_address is not None and address and \
                sum(entry.address == address for entry in live.values()) >= limits.per_address:
            raise JobRefused(f"{limits.per_address} training jobs from your address are queued or running, the most "
                             "one address may have here; wait for one to end")
        waiting = sum(not entry.running for entry in live.values())
        if waiting >= limits.waiting:
            raise JobRefused(f"{waiting} training jobs are waiting already, the most the queue takes; try again later")
        cancel = self._cancel[job_id] = threading.Event()
        live[job_id] = _Live(owner, address, cancel)
        return cancel

    def waiting(self) -> int:
        """How many jobs wait in the queue (the one running not counted; a cancelled one not either)."""
        with self._lock:
            return sum(not entry.running for entry in self._live.values())

    def resumable(self, dataset: Dataset, viewer: Viewer = OPERATOR) -> list[dict]:
        """``viewer``'s jobs (``mine``) on ``dataset`` (same content) that stopped before the end and left
        checkpoints, newest first."""
        return [job for job in self.store.jobs() if job["status"] in RESUMABLE and mine(job, viewer)
                and job["dataset"] == dataset.content_hash and (Path(job["model_path"]) / "checkpoints").is_dir()]

    def resume(self, job_id: str, dataset: Dataset, viewer: Viewer = OPERATOR, address: str = "") -> str:
        """Queue ``job_id`` again with its own parameters, output folder and maker; training goes on
        from its checkpoints. ``dataset`` must be the one it trained on; a job not ``viewer``'s to
        act on (``mine``) is refused as one that does not exist. Bounded as ``submit`` is, ``address``
        counted as the resumer's."""
        job = self.store.get_job(job_id)
        if job is None or not mine(job, viewer):
            raise ValueError(f"no training job {job_id!r}")
        if job["status"] == STOPPING:
            raise JobRefused(f"job {job_id} is still stopping after its cancel: resume it once it says cancelled")
        if job["status"] not in RESUMABLE:
            raise ValueError(f"job {job_id} is {job['status']}: only an interrupted, cancelled or failed job resumes")
        if job["dataset"] != dataset.content_hash:
            raise ValueError(f"job {job_id} trained on {job['dataset_name']!r}, not on {dataset.name!r}; "
                             "open that data set to resume it")
        values, known = dict(job["config"]), {f.name for f in fields(TrainConfig)}
        cfg = TrainConfig(**{k: v for k, v in values.items() if k in known})  # validated as it is made
        check_work(dataset, cfg)
        spec = JobSpec(dataset, cfg, job["model_path"], **{k: values.get(k) for k in SPEC_FIELDS},
                       owner=job.get("owner") or "")
        cancel = self._admit(job_id, viewer.owner, address)  # the resumer's slot, whoever made the job
        self._enqueue(job_id, spec, cancel, {"id": job_id, "status": "queued", "error": "", "progress": {}})
        return job_id

    def stopping(self, dataset: Dataset, viewer: Viewer = OPERATOR) -> list[str]:
        """``viewer``'s jobs on ``dataset`` still stopping after a cancel (``STOPPING``), newest first."""
        return [job["id"] for job in self.store.jobs() if job["status"] == STOPPING and mine(job, viewer)
                and job["dataset"] == dataset.content_hash]

    def cancel(self, job_id: str, viewer: Viewer = OPERATOR) -> bool:
        """Stop ``job_id``: before it starts (``cancelled`` at once), or while it runs (``cancelling``
        at once, written under the same lock as its ``running``, so never followed by it; it stops at the
        next module call of its models and then says ``cancelled``). False when it is not running or
        queued here, or not ``viewer``'s to act on (``mine``)."""
        event = self._cancel.get(job_id)
        job = self.store.get_job(job_id)
        if event is None or job is None or job["status"] in FINAL or not mine(job, viewer):
            return False
        with self._lock:  # set under the lock: the worker either sees it before it starts the job, or has started it
            event.set()
            entry = self._live.get(job_id)
            ours = entry is not None and entry.cancel is event
            waiting = ours and entry is not None and not entry.running
            if waiting:  # never started: cancelled now, its slot free at once
                del self._live[job_id]
            elif ours:  # running: it says so at once, before its run reaches a point where it stops
                self.store.put_job({"id": job_id, "status": STOPPING})
        if waiting:
            self.store.put_job({"id": job_id, "status": "cancelled"})
        return True  # running: it stops at its next module call and says so itself

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
            job_id, spec, cancel = self._queue.get()
            with self._lock:
                entry = self._live.get(job_id)
                start = not cancel.is_set()  # else cancelled while queued: ``cancel`` said so
                if entry is not None and entry.cancel is cancel:
                    entry.running = start
                if start:  # under the lock ``cancel`` writes ``cancelling`` under: never written after it
                    self.store.put_job({"id": job_id, "status": "running",
                                        "device": _device(spec.config.device)})
            try:
                if start:
                    self._run(job_id, spec, cancel)
            finally:
                self._release(job_id, cancel)  # ended, or skipped: its slot is free
                self._queue.task_done()

    def _run(self, job_id: str, spec: JobSpec, cancel: threading.Event) -> None:
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

        try:
            Path(spec.out_dir).mkdir(parents=True, exist_ok=True)
            result = run_training(spec.dataset, spec.config, spec.out_dir, spec.base_model, self.store,
                                  spec.eval_split, spec.cold_start, on_progress, cancel, encoder=spec.encoder,
                                  precision=spec.precision or "auto")
            summary = {k: v for k, v in result.to_json().items() if k != "losses"}
            # every step's loss, those of a resumed job's earlier run included (its checkpoint kept them)
            losses = [[stage, step, round(loss, 6)] for stage, step, loss in result.losses]
            self._end(job_id, cancel, {"id": job_id, "status": "done", "losses": losses, "result": summary,
                                       "device": result.device})
        except Cancelled as err:
            self._end(job_id, cancel, {"id": job_id, "status": "cancelled", "losses": losses, "error": str(err)})
        except Exception as err:
            self._end(job_id, cancel, {"id": job_id, "status": "failed", "losses": losses,
                                       "error": f"{type(err).__name__}: {err}\n\n{traceback.format_exc()}"})

    def _end(self, job_id: str, cancel: threading.Event, row: dict) -> None:
        """The job's last ``row`` written, its slot given back first: whoever reads it ended may queue again."""
        self._release(job_id, cancel)
        self.store.put_job(row)

    def _release(self, job_id: str, cancel: threading.Event) -> None:
        """``job_id``'s slot in the records given back, when it is still the entry ``cancel`` belongs to
        (one queued again under its id keeps its own); its cancel event forgotten likewise."""
        with self._lock:
            entry = self._live.get(job_id)
            if entry is not None and entry.cancel is cancel:
                del self._live[job_id]
            if self._cancel.get(job_id) is cancel:
                del self._cancel[job_id]
