"""Training jobs (``training.job``): their settings, progress and result, written as they run.
"""
from __future__ import annotations

import json
import time
from typing import Any

from retrieval import stored_rows
from retrieval.store.connection import Connected


class Jobs(Connected):
    """The store's training jobs (``Store``'s section of them)."""

    JOB_JSON = ("config", "progress", "losses", "result")

    def put_job(self, job: dict[str, Any]) -> None:
        """Write a training job: a new row, or the fields given over the row of its ``id``.

        Args:
            job: The job; its ``JOB_JSON`` fields are written as JSON.
        """
        row = {k: (json.dumps(v, default=str) if k in self.JOB_JSON and not isinstance(v, str) else v)
               for k, v in job.items()}
        row["updated"] = time.time()
        with self._lock, self.db.conn:
            # set on the first write only: an update must not move the job in the newest-first list
            if "created" not in row and not self.db.execute("select 1 from jobs where id = ?", [row["id"]]).fetchone():
                row["created"] = row["updated"]
            self.db.table("jobs").upsert(row, pk="id", alter=True)

    def get_job(self, job_id: str) -> dict[str, Any] | None:
        """The training job ``job_id``; None when there is none, or its row is damaged (with a warning).

        Args:
            job_id: The job's id.

        Returns:
            The job, its JSON fields decoded, or None.
        """
        with self._lock:
            rows = list(self.db.table("jobs").rows_where("id = ?", [job_id]))
        found = self._checked_jobs(rows)
        return found[0] if found else None

    def jobs(self, limit: int = 50) -> list[dict[str, Any]]:
        """The newest ``limit`` training jobs, newest first; a damaged row is left out, with a warning.

        Args:
            limit: The most jobs returned.

        Returns:
            One dict per job.
        """
        with self._lock:
            rows = list(self.db.table("jobs").rows_where(order_by="created desc", limit=limit))
        return self._checked_jobs(rows)

    def _checked_jobs(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out, problems = [], []
        for row in rows:
            try:
                job = self._job_row(row)
            except (TypeError, ValueError, RecursionError) as err:
                problems.append(f"job {row.get('id')!r:.60}: a JSON field does not decode ({err})")
                continue
            problem = stored_rows.job_problem(job)
            if problem is None:
                out.append(job)
            else:
                problems.append(f"job {row.get('id')!r:.60}: {problem}")
        stored_rows.left_out("training jobs", problems)
        return out

    def _job_row(self, row: dict[str, Any]) -> dict[str, Any]:
        """The job's row with its ``JOB_JSON`` fields decoded, each measured first; a ValueError
        naming the first that is past its size or not JSON."""
        job = {}
        for k, v in row.items():
            if k in self.JOB_JSON and isinstance(v, str) and v:
                v, problem = stored_rows.loaded(v, k, self.sizes.shape)
                if problem is not None:
                    raise ValueError(problem)
            job[k] = v
        return job

    def mark_interrupted(self) -> int:
        """Jobs left queued or running by a process that died are marked ``interrupted``; one it left
        stopping after a cancel (``cancelling``) is marked ``cancelled``: it stopped.

        Returns:
            How many jobs were marked.
        """
        with self._lock, self.db.conn:
            cur = self.db.execute("update jobs set status = case status when 'cancelling' then 'cancelled' "
                                  "else 'interrupted' end, updated = ? "
                                  "where status in ('queued', 'running', 'cancelling')", [time.time()])
            return cur.rowcount
