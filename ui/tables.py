"""Every table the app shows, made by one function: a read-only ``gr.Dataframe`` that names its columns
from the start. Given no headers, Gradio numbers a table's columns ("1 | 2 | 3"), before any event has
filled it and again whenever an event sets it to None; a table made here shows its own column names
then, or a one-cell placeholder that says what fills it."""
from __future__ import annotations

from collections.abc import Sequence

import gradio as gr


def table(headers: Sequence[str], waiting: str = "", **kwargs) -> gr.Dataframe:
    """A read-only table with ``headers`` as its columns until an event gives its own (a dict with
    "headers"). ``waiting``: for a table whose columns are not known before it is computed, the
    ``placeholder`` shown until then, under the first header alone."""
    if not headers:
        raise ValueError("a table names its columns: Gradio would number them")
    if waiting:
        headers = headers[:1]
        kwargs["value"] = placeholder(headers[0], waiting)
    return gr.Dataframe(headers=list(headers), interactive=False, **kwargs)


def placeholder(heading: str, message: str) -> dict:
    """A table's value that holds no rows yet: one column, ``heading``, and ``message`` in its cell."""
    return {"headers": [heading], "data": [[message]]}
