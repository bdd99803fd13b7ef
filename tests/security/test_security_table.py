"""SECURITY.md is the threat model: every way in — each named API endpoint, each command and flag
of the two command lines, each environment setting the app reads — has a line there, and every
test a line names exists. A new way in without its line, or a line naming a test that was renamed
or removed, fails here."""
from __future__ import annotations

import argparse
import ast
import re

import pytest

from tests.conftest import ROOT

SECURITY = ROOT / "SECURITY.md"


def security_text() -> str:
    return SECURITY.read_text(encoding="utf-8")


def api_names() -> set[str]:
    """Every ``api_name="…"`` an event of the app is registered under (the named endpoints)."""
    names = set()
    for path in [ROOT / "app.py", *sorted((ROOT / "ui").rglob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.keyword) and node.arg == "api_name" and isinstance(node.value, ast.Constant) \
                    and isinstance(node.value.value, str):
                names.add(node.value.value)
    return names


def cli_flags() -> dict[str, set[str]]:
    """``{"python -m retrieval evaluate": {"--split", …}, …}`` for both command lines and the app."""
    import app
    from retrieval.cli import build_parser as retrieval_parser
    from training.cli import build_parser as training_parser

    found: dict[str, set[str]] = {}

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{prefix} {name}")
            else:
                found.setdefault(prefix, set()).update(o for o in action.option_strings
                                                        if o.startswith("--") and o != "--help")

    walk(retrieval_parser(), "python -m retrieval")
    walk(training_parser(), "python -m training")
    walk(app.build_parser(), "python app.py")
    return {k: v for k, v in found.items() if k.count(" ") >= 3 or k == "python app.py"}  # leaves, and the app


def test_every_named_endpoint_has_a_line():
    text = security_text()
    missing = sorted(n for n in api_names() if f"`/{n}`" not in text)
    assert not missing, f"SECURITY.md has no line for the endpoints {missing}"


def test_every_command_and_flag_has_a_line():
    text = security_text()
    missing = []
    for command, flags in sorted(cli_flags().items()):
        if f"`{command}`" not in text and command != "python app.py":
            missing.append(command)
        missing += [f"{command} {flag}" for flag in sorted(flags) if f"`{flag}`" not in text]
    assert not missing, f"SECURITY.md does not name {missing}"


def test_every_environment_setting_has_a_line():
    text = security_text()
    read = set()
    for path in [ROOT / "app.py", *sorted((ROOT / "ui").rglob("*.py")), *sorted((ROOT / "retrieval").rglob("*.py"))]:
        read.update(re.findall(r"""environ(?:\.get)?[\[(]\s*["'](RANKSCOPE_[A-Z_]+|SPACE_ID)["']""",
                               path.read_text(encoding="utf-8")))
    missing = sorted(name for name in read if f"`{name}`" not in text)
    assert read and not missing, f"SECURITY.md does not name {missing}"


TEST_REF = re.compile(r"`(tests/(?:[a-z0-9_]+/)*test_[a-z0-9_]+\.py)(?:::([A-Za-z0-9_]+))?`")


def test_every_test_named_exists():
    refs = TEST_REF.findall(security_text())
    assert len(refs) >= 40, "the table names the test that shows each line"
    for file, name in refs:
        path = ROOT / file
        assert path.exists(), f"SECURITY.md names {file}, which does not exist"
        if name:
            assert re.search(rf"^(?:async )?def {re.escape(name)}\(|^class {re.escape(name)}\b",
                             path.read_text(encoding="utf-8"), re.M), f"{file} has no test {name}"


@pytest.mark.parametrize("heading", ["Who and what", "Ways in", "Files out", "Writes", "Read back", "Limits"])
def test_the_threat_model_has_its_parts(heading):
    assert re.search(rf"^#+ .*{heading}", security_text(), re.M | re.I), heading
