"""The command line's process ends when its command has decided: ``check`` prints its verdict and the
exit code follows at once, whatever else the process still holds (``retrieval.cli.entry_point``).
A CI job waits for that exit: it once waited minutes on a loaded machine after the verdict, while the
interpreter's exit freed the corpus and ran the exit hooks of the libraries loaded (Milvus Lite's
drains its background index build). In-process, ``main`` leaves no thread of its own running and the
store closed, its writes in the file."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from retrieval.cli import main
from retrieval.index import background_build
from tests.conftest import DEMO, ROOT

VERDICT = "system(s) regressed"  # check's last line: "0 of 1 system(s) regressed"
AFTER_VERDICT_S = 30  # the exit follows the verdict at once; this much later, something kept it alive
MIS_SET = ("--k1", "5", "--b", "1", "--language", "none")  # BM25 mis-set: a significant drop on the demo

# what a library may leave in a process: an exit hook and a thread, each an hour's work nobody waits for
LINGERING = textwrap.dedent("""
    import atexit, runpy, sys, threading, time
    atexit.register(time.sleep, 3600)
    threading.Thread(target=time.sleep, args=(3600,), name="lingering").start()
    sys.argv[0] = "retrieval"
    runpy.run_module("retrieval", run_name="__main__", alter_sys=True)
""")


@pytest.fixture(scope="module")
def gate(tmp_path_factory):
    """A demo copy and a store whose baseline is BM25 as the CLI runs it by default."""
    root = tmp_path_factory.mktemp("exit")
    demo = root / "demo"
    shutil.copytree(DEMO, demo)
    store = root / "gate.sqlite3"
    assert main(["snapshot", str(demo), "--systems", "bm25", "--name", "before", "--baseline", "--store",
                 str(store)]) == 0
    return demo, store


def _env(tmp_path: Path) -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONIOENCODING": "utf-8",
           "RANKSCOPE_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}
    env.pop("RANKSCOPE_STORE", None)
    return env


def _check_process(command: list[str], tmp_path: Path) -> tuple[int, str, float]:
    """Run ``command`` (a check), read its stdout up to the verdict; (exit code, stdout, seconds from
    the verdict to the exit). A process still alive ``AFTER_VERDICT_S`` after its verdict is killed and
    the test fails."""
    with open(tmp_path / "stderr.txt", "w+", encoding="utf-8") as err, \
            subprocess.Popen(command, cwd=tmp_path, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=err,
                             text=True, encoding="utf-8") as proc:
        assert proc.stdout is not None
        lines = []
        try:
            for line in proc.stdout:  # every line is flushed by the time the process ends
                lines.append(line)
                if VERDICT in line:
                    break
            decided = time.monotonic()
            code = proc.wait(timeout=AFTER_VERDICT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail(f"the process was still running {AFTER_VERDICT_S} s after its verdict: {''.join(lines)}")
        after = time.monotonic() - decided
        out = "".join(lines) + proc.stdout.read()
        err.seek(0)
        assert any(VERDICT in line for line in lines), out + err.read()
    return code, out, after


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
@pytest.mark.parametrize("args, code, verdict", [((), 0, "0 of 1 system(s) regressed"),
                                                 (MIS_SET, 1, "1 of 1 system(s) regressed")])
def test_python_m_retrieval_check_exits_with_its_verdict_at_once(gate, tmp_path, args, code, verdict):
    demo, store = gate
    got, out, after = _check_process([sys.executable, "-m", "retrieval", "check", str(demo), "--store", str(store),
                                      *args], tmp_path)
    assert got == code and verdict in out, out
    assert after < AFTER_VERDICT_S
    assert not Path(f"{store}-wal").exists()  # the store was closed: what the check wrote is in the file


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_an_exit_hook_or_a_thread_left_running_does_not_hold_the_verdict(gate, tmp_path):
    demo, store = gate
    got, out, after = _check_process([sys.executable, "-c", LINGERING, "check", str(demo), "--store", str(store)],
                                     tmp_path)
    assert got == 0 and "0 of 1 system(s) regressed" in out, out
    assert after < AFTER_VERDICT_S


@pytest.mark.parametrize("command", [["check"], ["evaluate", "--systems", "bm25", "--no-ci"],
                                     ["snapshot", "--list"]])
def test_a_command_in_process_leaves_no_thread_nor_build_running_and_its_store_closed(gate, command, capsys):
    demo, store = gate
    before = {t.ident for t in threading.enumerate()}
    assert main([command[0], str(demo), "--store", str(store), *command[1:]]) == 0, capsys.readouterr()
    left = [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]
    assert left == [] and background_build.running() == []
    assert not Path(f"{store}-wal").exists()  # closed by main, not left to the collector
