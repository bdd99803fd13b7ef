"""The package installed by the README's test command (requirements-dev.txt ends with ``-e .``): the
command lines run from any folder, not only from the checkout, and what the library reads beside
its code (the demo data) is found from there too."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig

import pytest

from tests.conftest import DEMO, ROOT

NOT_INSTALLED = ("the package is not installed: the README's test command (pip install -r requirements-dev.txt, "
                 "run in the checkout) installs it editable")


def _outside(tmp_path) -> dict[str, str]:
    """An environment that does not find the checkout by itself: no PYTHONPATH, run from ``tmp_path``."""
    assert ROOT not in tmp_path.parents
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONIOENCODING": "utf-8",
           "RANKSCOPE_HOME": str(tmp_path / "home")}
    env.pop("PYTHONPATH", None)
    return env


def _run(command: list[str], tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=tmp_path, env=_outside(tmp_path), capture_output=True, text=True,
                          encoding="utf-8", timeout=300)


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
@pytest.mark.parametrize("package, commands", [("retrieval", "check"), ("training", "train")])
def test_python_m_runs_from_any_folder(tmp_path, package, commands):
    done = _run([sys.executable, "-m", package, "--help"], tmp_path)
    assert done.returncode == 0 and commands in done.stdout, f"{NOT_INSTALLED}\n{done.stderr}"


def _script() -> str | None:
    """The ``rankscope`` script: beside this interpreter (where pip puts it), else on PATH."""
    where = os.pathsep.join([sysconfig.get_path("scripts"), os.environ.get("PATH", "")])
    return shutil.which("rankscope", path=where)


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_the_rankscope_script_runs_from_any_folder_and_reads_the_demo(tmp_path):
    script = _script()
    if script is None:
        if os.environ.get("RANKSCOPE_REQUIRE_INSTALLED"):  # .ci/run installed the package: missing is a failure
            pytest.fail(f"no rankscope script beside {sys.executable} nor on PATH: {NOT_INSTALLED}")
        pytest.skip(f"no rankscope script beside {sys.executable} nor on PATH: {NOT_INSTALLED}")
    done = _run([script, "--help"], tmp_path)
    assert done.returncode == 0 and "check" in done.stdout, done.stderr
    info = _run([script, "info", str(DEMO)], tmp_path)
    assert info.returncode == 0 and '"documents": 384' in info.stdout, info.stderr
    # the installed package is this checkout: what it reads beside its code is found from any folder
    found = _run([sys.executable, "-c", "import retrieval, retrieval.systems.reliability as r; "
                                        "print(retrieval.__file__, r.REFERENCE.exists())"], tmp_path)
    assert found.returncode == 0 and found.stdout.split()[-1] == "True", found.stdout + found.stderr
