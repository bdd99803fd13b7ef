"""The app's notices: errors, warnings and information toasts, their text made inert first.

Gradio renders a notice's message as (sanitized) HTML, which keeps images and links: a file name,
an id or a run name quoted in a message would fetch from any host or turn into a live link. Every
notice is raised or shown through these functions, which pass the whole message through
``present.escape.text``; no view calls ``gr.Error``, ``gr.Warning`` or ``gr.Info`` itself.
"""
from __future__ import annotations

import functools
import threading
from collections.abc import Callable

import gradio as gr

from retrieval.index.recent import Recent
from ui.present.escape import text

SESSIONS_KEPT = 1024  # sessions whose last refusal ``Refusals`` keeps (the latest)
UNEXPECTED = "an unexpected error (the server's log has it)"


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


class Refusals:
    """Why each session's last event of those ``kept`` wraps failed, in words, for a status line to say
    it: Gradio marks the outputs of a failed event with a bare "Error" that stays once the notice has
    faded, so the event's ``.failure`` listener writes ``line`` into its status instead. An API client
    gets the error itself, as before. Bounded: the latest ``SESSIONS_KEPT`` sessions'."""

    def __init__(self, sessions: int = SESSIONS_KEPT):
        self._said: Recent[str, str] = Recent(sessions)
        self._lock = threading.Lock()

    def kept(self, handler: Callable) -> Callable:
        """``handler`` (an event's, taking its ``gr.Request``), keeping why it failed for its session."""

        @functools.wraps(handler)  # its signature: Gradio passes the request as it would to it
        def run(*args, **kwargs):
            session = next((getattr(a, "session_hash", None) or "" for a in (*args, *kwargs.values())
                            if isinstance(a, gr.Request)), "")
            self._put(session, "")  # an earlier failure's reason is not this one's
            try:
                return handler(*args, **kwargs)
            except gr.Error as err:
                self._put(session, str(err.message))  # escaped already (``refuse``)
                raise
            except Exception:
                self._put(session, text(UNEXPECTED))
                raise

        return run

    def _put(self, session: str, why: str) -> None:
        with self._lock:
            self._said.put(session, why)

    def line(self, what: str, request: gr.Request | None) -> str:
        """The status line of the session's last failure, read once: "❌ **Could not start the
        training:** why" (the reason the handler gave; ``UNEXPECTED`` where it gave none)."""
        session = getattr(request, "session_hash", None) or ""
        with self._lock:
            why = self._said.get(session) or text(UNEXPECTED)
            self._said.put(session, "")
        return f"❌ **{text(what)}:** {why}"
