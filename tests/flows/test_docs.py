"""The README fits a screen and its commands and examples work; the documentation site builds
strictly; the generated command-line reference lists every subcommand; the results pages hold no
number that is not in a bench's JSON, and the hand-written pages hold no measured figure."""
from __future__ import annotations

import importlib.util
import json
import re
import shlex

import pytest

from tests.conftest import ROOT, store_copy

README = ROOT / "README.md"
DOCS = ROOT / "docs"
INSTALL_AND_RUN = "pip install -r requirements.txt && python app.py"
TEST_COMMAND = "pip install -r requirements-dev.txt && ruff check . && python -m pytest"


def hooks():
    spec = importlib.util.spec_from_file_location("rankscope_docs_hooks", DOCS / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


# --------------------------------------------------------------------------------------------------
# the README


def readme_test_command() -> str:
    (command,) = [b.strip() for b in blocks(README.read_text(encoding="utf-8"), "bash") if "python -m pytest" in b]
    return command


def test_the_readme_fits_a_screen_and_keeps_the_two_set_up_commands():
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= 200
    assert max(len(line) for line in lines) <= 300
    assert INSTALL_AND_RUN in [b.strip() for b in blocks(text, "bash")]
    test = readme_test_command()  # install, the lint gates, then the whole suite
    assert test.startswith(TEST_COMMAND.split(" && ")[0] + " && ruff check . && ")
    assert test.endswith(" && python -m pytest")


def test_ci_runs_the_readmes_test_command_and_builds_the_site_strictly():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert readme_test_command() in ci.replace("pip install -q ", "pip install ")  # quiet in CI, the same command
    assert re.search(r"mkdocs build --strict --site-dir", ci)


def test_the_readmes_links_point_at_files_that_exist():
    text = README.read_text(encoding="utf-8")
    targets = [t for t in re.findall(r"\]\(([^)#]+)", text) if "://" not in t]
    assert targets
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert not missing, missing


def test_the_readmes_command_line_example_parses_with_the_real_parser():
    from retrieval.cli import build_parser

    (block,) = [b for b in blocks(README.read_text(encoding="utf-8"), "bash") if "python -m retrieval" in b]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert len(commands) == 5
    for command in commands:
        words = shlex.split(command)
        assert words[:3] == ["python", "-m", "retrieval"]
        args = build_parser().parse_args(words[3:])  # an unknown command or flag exits here
        assert args.command == words[3]


@pytest.mark.slow
def test_the_readmes_library_example_runs(tmp_path, monkeypatch, demo_minilm_store):
    (block,) = blocks(README.read_text(encoding="utf-8"), "python")
    assert len(block.strip().splitlines()) == 6
    # Store() there, not the user's cache: a store holding the demo's vectors already, the default encoder's and the
    # bundled SPLADE's (as a user's store holds them after a first run), read back instead of encoded again
    monkeypatch.setenv("RANKSCOPE_STORE", str(store_copy(demo_minilm_store, tmp_path / "store.sqlite3")))
    monkeypatch.chdir(ROOT)
    seen: dict = {}
    lines = block.strip().splitlines()
    for line in lines[:3]:
        exec(line, seen)
    mean = eval(lines[3].split("#")[0], seen)
    assert 0 <= mean["ndcg@10"] <= 1
    lists = eval(lines[4].split("#")[0], seen)
    assert {"bm25", "dense", "hybrid"} <= set(lists) and len(lists["hybrid"]) == 10
    hit = eval(lines[5].split("#")[0], seen)
    assert hit.rank == 1


# --------------------------------------------------------------------------------------------------
# the site


@pytest.mark.slow
def test_mkdocs_builds_the_site_strictly(tmp_path, monkeypatch):
    """``mkdocs build --strict``, as CI runs it, through mkdocs' own command line in this process: the hooks
    import the app, and a process of its own would import torch and Gradio again before building. In strict
    mode a warning aborts the build: the command raises, and the test fails with its message."""
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed (requirements-dev.txt)")
    from mkdocs.__main__ import cli as mkdocs

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("NO_MKDOCS_2_WARNING", "1")
    mkdocs.main(["build", "--strict", "--site-dir", str(tmp_path / "site")], prog_name="mkdocs", standalone_mode=False)
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "python -m retrieval evaluate" in cli and "--systems" in cli
    api = (tmp_path / "site" / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    assert "search_one" in api  # mkdocstrings rendered Workspace's members


def test_the_cli_reference_lists_every_subcommand_and_flag_of_each_parser():
    h = hooks()
    programs = h.parsers()
    assert [name for name, _ in programs] == ["python -m retrieval", "python -m training", "python app.py"]
    text = h.render_cli(programs)
    for command, parser in programs:
        assert f"## `{command}`" in text
        for name, sub in h.subcommands(parser).items():
            assert f"### `{command} {name}`" in text
            section = text.split(f"### `{command} {name}`", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
            for action in sub._actions:
                for flag in action.option_strings:
                    if action.help != "==SUPPRESS==":
                        assert flag in section, (command, name, flag)
    assert set(h.subcommands(programs[0][1])) >= {"evaluate", "info", "search", "failures", "judges", "snapshot",
                                                  "check", "drop"}


# --------------------------------------------------------------------------------------------------
# the results pages: rendered from JSON alone


def _numbers_of(value, out: set[str], number) -> set[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            out.add(str(k))
            _numbers_of(v, out, number)
    elif isinstance(value, list):
        for v in value:
            _numbers_of(v, out, number)
    elif isinstance(value, (int, float)):
        out.add(number(value))
    elif isinstance(value, str):
        out.add(value)
    return out


def test_every_number_on_the_results_page_comes_from_the_json(tmp_path):
    h = hooks()
    bench, results = tmp_path / "bench", tmp_path / "bench" / "results"
    results.mkdir(parents=True)
    (bench / "measured.py").write_text('"""Measures a thing.\n\n    python bench/measured.py DATA [--k K]\n"""\n')
    (bench / "unrun.py").write_text('"""Measures another thing.\n\n    python bench/unrun.py [--size N]\n"""\n')
    (bench / "_common.py").write_text('"""Not a bench."""\n')
    run = {"script": "measured", "command": "python bench/measured.py data/demo", "key": "data/demo",
           "date": "2031-02-03", "seconds": 12.25, "machine": "7 cores, a CPU (Linux x86_64)",
           "figures": {"ratio_vs_peer": 3.14159, "p95_ms": 41.0},
           "data": {"rows": [{"system": "bm25", "ndcg@10": 0.68041, "queries": 300},
                             {"system": "dense", "ndcg@10": 0.64773, "queries": 300}],
                    "per_set": {"scifact": {"hybrid": 0.73404, "bm25": 0.68041},
                                "nfcorpus": {"hybrid": 0.36351, "bm25": 0.32081}},
                    "nested": {"deep": {"deeper": {"deepest": [1.5, 2.5, 3.5, 4.5, 5.5]}}}},
           "output": ["measured 300 queries in 12.25 s", "ratio_vs_peer=3.14 p95_ms=41.0"]}
    (results / "measured.json").write_text(json.dumps({"script": "measured", "runs": {"data/demo": run}}))
    page = h.render_results(results, bench)
    allowed = _numbers_of(run, set(), h.number)
    allowed |= {"measured.py", "unrun.py", "<script>.json"}  # names, and the docstring's command
    for token in re.findall(r"\d+(?:\.\d+)?", page):
        assert token in allowed or any(token in a for a in allowed), token
    assert "0.6804" in page and "0.7340" not in page and "0.734" in page  # rounded to 4 decimals, zeros dropped
    assert "3.1416" in page and "41" in page
    assert "`python bench/unrun.py [--size N]`" in page  # no results yet: its command
    assert "_common" not in page
    assert page.index("## `measured.py`") < page.index("no recorded results yet")


def test_the_results_page_has_no_number_without_a_json_file(tmp_path):
    h = hooks()
    (tmp_path / "results").mkdir()
    (tmp_path / "speed.py").write_text('"""How fast.\n\n    python bench/speed.py\n"""\n')
    page = h.render_results(tmp_path / "results", tmp_path)
    assert not re.search(r"\d", page.replace("<script>.json", ""))


def test_every_committed_results_file_renders(tmp_path):
    h = hooks()
    page = h.render_results(ROOT / "bench" / "results", ROOT / "bench")
    for record in (ROOT / "bench" / "results").glob("*.json"):
        data = json.loads(record.read_text(encoding="utf-8"))
        assert data["script"] == record.stem and data["runs"]
        for run in data["runs"].values():
            assert {"command", "date", "machine", "output"} <= set(run)
            assert f"### `{run['command']}`" in page


# --------------------------------------------------------------------------------------------------
# no measured figure copied by hand


MEASURED = re.compile(r"\b\d+\.\d{3,}\b|\b\d[\d.,–-]*\s?(?:ms|GB|MiB|documents/s|examples/s)\b|\d×|× faster|≈ ?\d")
SETTINGS = {"0.019", "1 GB", "512 MiB"}  # a default λ_train, SQLite's value limit, the zip limit: not measurements


@pytest.mark.parametrize("page", sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")))
def test_a_hand_written_page_holds_no_measured_figure(page):
    text = (DOCS / page).read_text(encoding="utf-8")
    found = [f for f in MEASURED.findall(text) if f not in SETTINGS]
    assert not found, f"docs/{page} holds {found}: measured figures belong on the generated results page"


def test_the_readme_holds_no_measured_figure():
    found = MEASURED.findall(README.read_text(encoding="utf-8"))
    assert not found, found


def test_the_ui_strings_hold_no_measured_figure():
    from ui.present.embeddings import COMPILE_NOTE

    assert not re.search(r"\d", COMPILE_NOTE)


def test_the_architecture_page_names_every_package_and_lists_every_module():
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    packages = sorted(p.parent.name for p in (ROOT / "retrieval").glob("*/__init__.py"))
    assert packages and all(f"`retrieval/{name}/`" in text for name in packages), packages
    assert "<!-- rankscope:layout -->" in text
    layout = hooks().render_layout(ROOT / "retrieval")
    for module in (ROOT / "retrieval").rglob("*.py"):
        assert f"`{module.name}`" in layout and f"**`{module.parent.relative_to(ROOT).as_posix()}/`**" in layout


def test_the_systems_table_is_written_from_the_registry_and_shows_a_new_system_unedited():
    from retrieval.systems import keys, register, unregister
    from retrieval.systems.declared import FLOAT, Capabilities, Citation, Parameter, Relations
    from retrieval.systems.ql import QueryLikelihood

    class Newcomer(QueryLikelihood):
        key, label, short = "newcomer", "A newcomer", "new"
        parameters = (Parameter("alpha", FLOAT, 0.5, "how much it mixes", low=0, high=1),)
        citation = Citation("A. Author", "A Method", "SIGIR 2030", 2030, "§3")
        relations = Relations(("bm25",), "BM25 with a twist")
        capabilities = Capabilities(exact_scores=False)

    h = hooks()
    text = (DOCS / "library.md").read_text(encoding="utf-8")
    assert "<!-- rankscope:systems -->" in text
    before = h.render_systems(h.registered_systems())
    assert all(f"| `{key}` |" in before for key in keys()) and "`ql.mu`" in before and "`bm25.k1`" in before
    register(Newcomer())
    try:
        table = h.render_systems(h.registered_systems())
    finally:
        unregister("newcomer")
    row = next(line for line in table.splitlines() if line.startswith("| `newcomer` |"))
    assert "`newcomer.alpha`: how much it mixes, a number from 0 to 1 (default 0.5)" in row
    assert "`bm25`: BM25 with a twist" in row and '"A Method", SIGIR 2030, §3' in row
