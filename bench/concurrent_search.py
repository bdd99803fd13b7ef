"""Eight users searching at once, with and without a training job running: latency and errors.

    python bench/concurrent_search.py [--users 8] [--searches 25] [--model ID_OR_FOLDER] [--store FILE]

Starts the app as a real process (``python app.py``, the bundled demo, the default encoder unless
``--model``), then runs two phases with ``--users`` gradio_client users each sending
``--searches`` searches (labelled demo queries, round robin):

1. idle: nothing else running — the reference;
2. training: the same searches while a quadruplet fine-tuning job runs in the app's job thread.

Prints p50 / p95 / max latency of each phase, the ratio training/idle (the comparable figure:
both measured in the same run, on the same machine), the number of failed searches, and whether
the job was still running when the last search of phase 2 returned.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from gradio_client import Client

from _common import ROOT, percentile_ms, recorded, write_json  # first: it puts the checkout on sys.path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_app(model: str | None, store: str, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [sys.executable, str(ROOT / "app.py"), "--store", store, "--port", str(port)]
    if model:
        cmd += ["--model", model]
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"},
                            stdout=log.open("ab"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    for _ in range(600):
        try:
            urllib.request.urlopen(url, timeout=2)
            return proc, url
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"the app exited with {proc.returncode}; its log: {log}") from None
            time.sleep(0.5)
    proc.kill()
    raise SystemExit("the app did not start in 5 minutes")


def phase(url: str, queries: list[str], users: int, searches: int) -> tuple[list[float], list[str]]:
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    clients = [Client(url, verbose=False) for _ in range(users)]
    barrier = threading.Barrier(users)

    def user(i: int) -> None:
        barrier.wait()
        for j in range(searches):
            q = queries[(i * searches + j) % len(queries)]
            t = time.perf_counter()
            try:
                _, result = clients[i].predict(q, api_name="/search")
                assert result["systems"]["dense"], "empty dense list"
                ok = None
            except Exception as err:
                ok = f"{type(err).__name__}: {err}"
            dt = time.perf_counter() - t
            with lock:
                (errors.append(ok) if ok else latencies.append(dt))

    threads = [threading.Thread(target=user, args=(i,)) for i in range(users)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in clients:
        c.close()
    return latencies, errors


def summary(lat: list[float]) -> dict:
    if not lat:
        return {"n": 0}
    return {"n": len(lat), "p50_ms": round(percentile_ms(lat, 50), 1), "p95_ms": round(percentile_ms(lat, 95), 1),
            "max_ms": round(max(lat) * 1000, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--users", type=int, default=8)
    ap.add_argument("--searches", type=int, default=25)
    ap.add_argument("--model", default=None)
    ap.add_argument("--store", default=None, help="default: a fresh temporary store")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="rankscope-bench-")
    store = args.store or str(Path(tmp) / "store.sqlite3")
    queries = [json.loads(line)["text"] for line in (ROOT / "data" / "demo" / "queries.jsonl").read_text().splitlines()]
    log = Path(tmp) / "app.log"
    proc, url = start_app(args.model, store, log)
    try:
        warm = Client(url, verbose=False)
        for q in queries[:3]:
            warm.predict(q, api_name="/search")  # first-call costs (imports, caches) out of the timings
        idle, idle_err = phase(url, queries, args.users, args.searches)

        out = warm.predict("quadruplet", "bm25", 3, 16, 2e-5, 128, None, 0.1, 0.3, 0.01, "auto", 0.8,
                           api_name="/train")
        job_id = out[0].split("`")[1]
        while warm.predict(job_id, api_name="/training_status")["status"] == "queued":
            time.sleep(0.2)
        busy, busy_err = phase(url, queries, args.users, args.searches)
        job = warm.predict(job_id, api_name="/training_status")
        still_running = job["status"] == "running"
        warm.predict(api_name="/cancel_training")
        warm.close()
    except Exception:
        print(f"the app's log ({log}), last lines:\n" + log.read_text()[-3000:], file=sys.stderr)
        raise
    finally:
        proc.terminate()
        proc.wait(30)

    result = {"users": args.users, "searches_per_user": args.searches, "idle": summary(idle),
              "during_training": summary(busy), "errors": {"idle": idle_err, "during_training": busy_err},
              "job_running_at_end": still_running, "job_progress": job.get("progress")}
    ratio_50 = result["during_training"]["p50_ms"] / result["idle"]["p50_ms"]
    ratio_95 = result["during_training"]["p95_ms"] / result["idle"]["p95_ms"]
    print(f"{args.users} users × {args.searches} searches each, demo corpus, {os.cpu_count()} CPUs")
    for name in ("idle", "during_training"):
        s = result[name]
        print(f"  {name:<16} p50 {s['p50_ms']:>7.1f} ms   p95 {s['p95_ms']:>7.1f} ms   max {s['max_ms']:>7.1f} ms   "
              f"errors {len(result['errors'][name])}")
    print(f"  ratio during training / idle: p50 {ratio_50:.2f}×  p95 {ratio_95:.2f}×; "
          f"job still running at the end: {still_running}")
    write_json(args.json, {**result, "ratio_p50": ratio_50, "ratio_p95": ratio_95})
    return 1 if idle_err or busy_err else 0


if __name__ == "__main__":
    sys.exit(recorded(main, __file__))
