"""The library's layering, held: a leaf or the CLI's help imports nothing heavy (each checked in a
fresh interpreter, as a user starts one), the package's names still import, the import contracts
(``.importlinter``) pass, and numba keeps its kernels in RankScope's cache folder."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from .conftest import ROOT

HEAVY = ("faiss", "torch", "bm25s", "sentence_transformers", "transformers", "numba", "ranx", "sqlite_utils",
         "scipy.stats", "umap", "gradio")


def fresh(code: str, env: dict | None = None) -> dict:
    """Run ``code`` in a new interpreter at the checkout's root; the JSON it prints last."""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


LOADED = f"import json, sys; print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"


@pytest.mark.parametrize("leaf", ["retrieval.evaluation.metrics", "retrieval.evaluation.intervals",
                                  "retrieval.evaluation.failure_rules", "retrieval.safe_names", "retrieval.numbers",
                                  "retrieval.errors", "retrieval.judging.grades", "retrieval.data.run"])
def test_a_leaf_imports_nothing_heavy(leaf):
    assert fresh(f"import {leaf}\n{LOADED}") == []


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_the_command_lines_help_imports_nothing_heavy():
    code = ("import contextlib, io\nfrom retrieval.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.suppress(SystemExit):\n"
            "    main(['--help'])\n"
            "assert 'evaluate' in out.getvalue()\n"
            "for command in ('evaluate', 'check', 'judges'):\n"
            "    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
            "        main([command, '--help'])\n" + LOADED)
    assert fresh(code) == []


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_python_m_retrieval_help_prints_the_commands():
    done = subprocess.run([sys.executable, "-m", "retrieval", "--help"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "evaluate" in done.stdout and "check" in done.stdout


def test_the_packages_names_import_on_first_use():
    import retrieval
    from retrieval import SYSTEMS, DataError, Dataset, Run, Store, Workspace, load_dataset
    from retrieval.data.readers import load_dataset as from_readers
    from retrieval.store import Store as from_store

    assert load_dataset is from_readers and Store is from_store and "bm25" in SYSTEMS
    assert Workspace.__name__ == "Workspace" and issubclass(DataError, ValueError) and Dataset and Run
    assert set(retrieval.__all__) <= set(dir(retrieval))
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        retrieval.Nothing  # noqa: B018 - the lookup itself is the test


def test_the_failure_rules_name_the_systems_by_their_registered_keys():
    from retrieval import systems
    from retrieval.evaluation import failure_rules as rules

    assert (rules.BM25, rules.DENSE, rules.HYBRID, rules.SPLADE) == (systems.BM25, systems.DENSE, systems.HYBRID,
                                                                       systems.SPLADE)
    assert rules.TUNED_OF == systems.TUNED_OF and rules.ENCODER_SYSTEMS == systems.ENCODER_SYSTEMS


def test_the_import_contracts_hold():
    lint = shutil.which("lint-imports")
    if lint is None:
        pytest.skip("import-linter is not installed (requirements-dev.txt)")
    done = subprocess.run([lint], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:]
    assert "0 broken" in done.stdout


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_numba_keeps_its_kernels_in_rankscopes_cache_folder():
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    code = ("import json, os, platformdirs, retrieval, numba\n"
            "print(json.dumps([os.environ['NUMBA_CACHE_DIR'], numba.config.CACHE_DIR, "
            "platformdirs.user_cache_dir('rankscope')]))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    variable, numbas, home = json.loads(done.stdout.strip().splitlines()[-1])
    assert variable == numbas == os.path.join(home, "numba")


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_a_numba_cache_the_user_chose_is_kept(tmp_path):
    chosen = str(tmp_path / "mine")
    got = fresh("import json, os, retrieval, numba\n"
                "print(json.dumps([os.environ['NUMBA_CACHE_DIR'], numba.config.CACHE_DIR]))",
                env={"NUMBA_CACHE_DIR": chosen})
    assert got == [chosen, chosen]


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_numba_imported_first_is_pointed_at_the_folder_too():
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    code = ("import json, numba, platformdirs, retrieval, os\n"
            "print(json.dumps([numba.config.CACHE_DIR, platformdirs.user_cache_dir('rankscope')]))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    numbas, home = json.loads(done.stdout.strip().splitlines()[-1])
    assert numbas == os.path.join(home, "numba")
