"""The app's notices: errors, warnings and information toasts, their text made inert first.

Gradio renders a notice's message as (sanitized) HTML, which keeps images and links: a file name,
an id or a run name quoted in a message would fetch from any host or turn into a live link. Every
notice is raised or shown through these functions, which pass the whole message through
``present.escape.text``; no view calls ``gr.Error``, ``gr.Warning`` or ``gr.Info`` itself.
"""
from __future__ import annotations

import gradio as gr

from ui.present.escape import text


def refuse(message: object) -> gr.Error:
    """The error to raise for ``message`` (``raise refuse(...)``): one line, shown as typed. A
    ``KeyError`` (the library's "no such snapshot / set / judge") gives its message, not the quoted
    form ``str`` gives a KeyError."""
    if isinstance(message, KeyError) and message.args:
        message = message.args[0]
    return gr.Error(text(message))


def warn(message: object) -> None:
    gr.Warning(text(message))


def inform(message: object) -> None:
    gr.Info(text(message))
