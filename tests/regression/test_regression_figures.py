"""The regression tier: every figure pinned in ``bench/expected_figures.yaml`` holds, each data set
evaluated as a user evaluates it (one ``python -m retrieval evaluate`` process on the shared BEIR set,
nothing cached; ``bench/tools/expected_figures.py``). A failure names the data set, the system, the
metric, the pinned value and what was measured; a deliberate change is
``python bench/tools/expected_figures.py --update`` and a reviewed diff. Skips where ``../shared/datasets``
is absent."""
from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.conftest import ROOT, shared_dataset

pytestmark = [pytest.mark.regression, pytest.mark.slow]


def tools_module(name: str):
    """``bench/tools/<name>.py`` imported as a module (the folder holds scripts, not a package)."""
    key = f"rankscope_bench_tools_{name}"  # not ``name``: an installed package may be called ``notebook``
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, ROOT / "bench" / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


figures_tool = tools_module("expected_figures")
FIGURES = figures_tool.load()


@pytest.fixture(scope="module")
def measured():
    """Each (data set, split)'s metrics for every system the file names there, measured on first use
    in this run (one process per data set) and kept for the module only."""
    seen: dict = {}
    systems: dict = {}
    for f in FIGURES:
        systems.setdefault((f.dataset, f.split), []).append(f.system)

    def of(figure) -> float:
        where = (figure.dataset, figure.split)
        if where not in seen:
            seen[where] = figures_tool.measure(shared_dataset(figure.dataset), figure.split, systems[where])
        return figures_tool.got(figure, {where: seen[where]})

    return of


@pytest.mark.parametrize("figure", FIGURES, ids=lambda f: f"{f.dataset}-{f.system}-{f.metric}")
def test_the_pinned_figure_holds(figure, measured):
    value = measured(figure)
    assert figure.holds(value), figures_tool.miss(figure, value)
