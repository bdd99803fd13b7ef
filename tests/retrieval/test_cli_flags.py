"""Every number on the command lines (``python -m retrieval``, ``python -m training``, ``python app.py``) is
read by the one number grammar (``retrieval.numbers``) and held to the range the library itself holds it
to, as the command line is read: a bad one is argparse's one ``error:`` line and exit status 2, before
any data set is opened. ``evaluate --k1 nan`` printed a table of zeros and exited 0 before."""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys

import pytest

from retrieval.systems import builtin, keys
from tests.conftest import DEMO, ROOT

HOSTILE = ["nan", "inf", "-inf", "1_0", "+1", "\u0661", "\uff11", "1e999", "9" * 5_000, "", "0x10", " \u2003 1"]


def parsers() -> dict[str, argparse.ArgumentParser]:
    """Each leaf command's parser, by the command line that reaches it."""
    import app
    from retrieval.cli import build_parser as retrieval_parser
    from training.cli import build_parser as training_parser

    found: dict[str, argparse.ArgumentParser] = {"python app.py": app.build_parser()}

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found[f"{prefix} {name}"] = sub
                    walk(sub, f"{prefix} {name}")

    walk(retrieval_parser(), "python -m retrieval")
    walk(training_parser(), "python -m training")
    return found


def numeric_flags() -> list[tuple[str, argparse.Action]]:
    return [(f"{command} {action.option_strings[-1]}", action) for command, parser in parsers().items()
            for action in parser._actions if action.type is not None and action.option_strings]


def test_the_command_lines_have_numeric_flags_to_check():
    flags = {name.split()[-1] for name, _ in numeric_flags()}
    assert {"--k1", "--b", "-k", "--top", "--max-drop", "--epochs", "--lr", "--cold-start", "--port",
            "--memory-budget-mb"} <= flags


@pytest.mark.parametrize("flag, action", numeric_flags(), ids=lambda x: x if isinstance(x, str) else "")
def test_every_numeric_flag_reads_the_one_grammar_and_refuses_in_one_line(flag, action):
    """A number no other reader would read alike (``1_0``, ``+1``, Arabic-Indic or fullwidth digits,
    NaN, a 5,000-digit integer) is argparse's error, never a value: an ``int``/``float`` type (a
    ValueError argparse would word itself) fails here."""
    for bad in HOSTILE:
        with pytest.raises(argparse.ArgumentTypeError) as err:
            action.type(bad)
        assert "\n" not in str(err.value) and len(str(err.value)) < 220, (flag, bad, str(err.value))
    if action.default is not None and not isinstance(action.default, str):
        assert action.type(repr(action.default)) == action.default  # the default reads back as itself


@pytest.mark.parametrize("argv, said", [
    (["evaluate", "--k1", "nan"], "argument --k1: BM25's k1 'nan' is not a finite number"),
    (["evaluate", "--k1", "-1"], "argument --k1: BM25's k1 is a number of 0 or more, not '-1'"),
    (["evaluate", "--b", "7"], "argument --b: BM25's b is a number from 0 to 1, not '7'"),
    (["evaluate", "--b", "1_0"], "argument --b: BM25's b '1_0' is not a number (write the digits without '_')"),
    (["snapshot", "--k1", "\u0661"], "U+0661 ARABIC-INDIC DIGIT ONE is not read as a digit"),
    (["search", "a query", "-k", "0"], "argument -k: -k is an integer of 1 or more, not 0"),
    (["search", "a query", "-k", "+5"], "argument -k: -k '+5' is not an integer (write it without the leading '+')"),
    (["judges", "--top", "-1"], "argument --top: --top is an integer of 0 or more, not -1"),
    (["check", "--max-drop", "inf"], "argument --max-drop: --max-drop must be a finite number of 0 or more"),
])
def test_the_library_command_line_refuses_a_number_as_it_is_read(argv, said, capsys):
    from retrieval.cli import main

    command, rest = argv[0], argv[1:]
    with pytest.raises(SystemExit) as exit_:
        main([command, str(DEMO), *rest])
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert exit_.value.code == 2 and len(errors) == 1 and "Traceback" not in err
    assert errors[0].startswith(f"python -m retrieval {command}: error: argument ") and said in errors[0]


@pytest.mark.parametrize("argv, said", [
    (["--epochs", "20000"], "argument --epochs: epochs must be between 1 and 100, not 20000"),
    (["--epochs", "0"], "argument --epochs: epochs must be between 1 and 100, not 0"),
    (["--lr", "nan"], "argument --lr: lr 'nan' is not a finite number"),
    (["--lr", "0"], "argument --lr: lr must be between 1e-08 and 1, not 0.0"),
    (["--batch-size", "1"], "argument --batch-size: batch_size must be between 2 and 1024, not 1"),
    (["--warmup-ratio", "1.5"], "argument --warmup-ratio: warmup_ratio must be between 0 and 1, not 1.5"),
    (["--seed", "-1"], "argument --seed: seed must be between 0 and 4.29497e+09, not -1"),
    (["--cold-start", "1"], "argument --cold-start: train_fraction must be between 0 and 1, not '1'"),
])
def test_the_training_command_line_holds_each_number_to_the_configs_range(argv, said, capsys, tmp_path):
    from training.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["train", str(DEMO), *argv, "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and [line for line in err.splitlines() if "error:" in line] == [
        f"python -m training train: error: {said}"]
    assert not (tmp_path / "x").exists()


def test_off_means_zero_where_the_config_says_so():
    from training.cli import build_parser
    from training.trainer import RANGES

    args = build_parser().parse_args(["train", str(DEMO), "--max-steps-per-epoch", "0", "--epochs", "3.0",
                                      "--out", "x"])
    assert args.max_steps_per_epoch == 0 and args.epochs == 3 and RANGES["max_steps_per_epoch"][0] == 1


@pytest.mark.parametrize("argv, said", [(["--port", "0"], "the port is an integer from 1 to 65535, not 0"),
                                        (["--port", "\uff18\uff10"], "U+FF18 FULLWIDTH DIGIT EIGHT"),
                                        (["--memory-budget-mb", "-5"], "above 0"),
                                        (["--memory-budget-mb", "nan"], "'nan' is not a finite number")])
def test_the_apps_command_line_refuses_a_number_as_it_is_read(argv, said, capsys):
    import app

    with pytest.raises(SystemExit) as exit_:
        app.build_parser().parse_args(argv)
    assert exit_.value.code == 2 and said in capsys.readouterr().err


@pytest.mark.parametrize("k1, b", [(math.nan, 0.4), (-1, 0.4), (math.inf, 0.4), (0.9, 7), (0.9, math.nan),
                                   ("0.9\u0661", 0.4), (True, 0.4), (None, 0.4)])
def test_the_workspace_holds_bm25s_settings_to_the_same_rule(toy_dataset, k1, b):
    from retrieval.index.bm25_settings import BM25Settings
    from retrieval.workspace import Workspace

    with pytest.raises(ValueError, match="BM25's (k1|b)"):
        Workspace(toy_dataset, None, model="unused", k1=k1, b=b)
    kept = Workspace(toy_dataset, None, model="unused", k1=0, b=1).bm25_settings
    assert kept == BM25Settings(0.0, 1.0, "lucene")


def test_evaluate_k1_nan_exits_2_in_a_real_process_without_a_table(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "RANKSCOPE_HOME": str(tmp_path / "home")}
    env.pop("RANKSCOPE_STORE", None)
    done = subprocess.run([sys.executable, "-m", "retrieval", "evaluate", str(DEMO), "--k1", "nan", "--no-store"],
                          cwd=ROOT, env=env, capture_output=True, text=True, encoding="utf-8", timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert [line for line in done.stderr.splitlines() if "error:" in line] == [
        "python -m retrieval evaluate: error: argument --k1: BM25's k1 'nan' is not a finite number"]


def _ql_ndcg(tmp_path, *extra: str) -> float:
    from retrieval.cli import main

    out = tmp_path / f"ql{len(extra)}.json"
    assert main(["evaluate", str(DEMO), "--systems", "ql", "--no-ci", "--no-store", "--json", str(out), *extra]) == 0
    return json.loads(out.read_text(encoding="utf-8"))["systems"]["ql"]["metrics"]["ndcg@10"]


def test_param_ql_mu_changes_query_likelihoods_figures(tmp_path, capsys):
    default, smoothed_less = _ql_ndcg(tmp_path), _ql_ndcg(tmp_path, "--param", "ql.mu=500")
    assert default != smoothed_less
    assert _ql_ndcg(tmp_path, "--param", "ql.mu=1000") == default  # the declared default, given: the same figures


@pytest.mark.parametrize("given, said", [
    ("ql.mu=-5", "QL's mu is a number above 0, not '-5'"),
    ("ql.mu=nan", "QL's mu 'nan' is not a finite number"),
    ("bm25.method=okapi", "BM25's method is one of lucene, robertson, atire, not 'okapi'"),
    ("nosuch.mu=5", "unknown system 'nosuch'; systems with parameters: " + ", ".join(
        k for k in keys() if builtin(k).parameters)),
    ("ql.nu=5", "QL has no parameter 'nu' (its parameters: ql.mu)"),
    ("qlmu", "'qlmu' is not SYSTEM.NAME=VALUE (e.g. ql.mu=500)")])
def test_a_bad_param_is_one_error_line_and_exit_2(given, said, capsys):
    from retrieval.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["evaluate", str(DEMO), "--no-store", "--param", given])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and [line for line in err.splitlines() if "error:" in line] == [
        f"python -m retrieval evaluate: error: argument --param: {said}"]


def test_the_help_lists_every_declared_parameter_with_range_and_default():
    from retrieval.cli import build_parser
    from retrieval.systems import builtin, keys

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for command in ("evaluate", "search", "failures", "snapshot", "check"):
        text = "".join(sub.choices[command].format_help().split())  # wrapped anywhere, spaces and hyphens alike
        for key in keys():
            for p in builtin(key).parameters:
                assert "".join(f"{key}.{p.name}: {p.doc}; {p.range_text} (default {p.default})".split()) in text
