"""The one door every client's value comes through, before any handler sees it.

Text sent to the API is JSON, and JSON can carry what no text can: a lone surrogate (``"\\ud800"``,
half of a UTF-16 pair). Python decodes it into a ``str`` that cannot be encoded, stored, hashed as
UTF-8, written to a file or sent back — so one such character made every endpoint that echoed,
stored or searched it fail with Gradio's generic error. ``guard`` wraps every event handler of the
app so that a value holding one (in a text, or inside a list or dict of them) is refused in one line
naming the character and where it is, before the handler runs; the handlers' own checks (names,
ids, grades, numbers: ``retrieval.safe_names`` and each view's) then see only real text.

Wrapping keeps what Gradio reads off a handler: its signature (``functools.wraps``, so ``gr.Request``
parameters are still found) and its kind (plain, generator, coroutine, async generator).
"""
from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import gradio as gr

_DEPTH = 4  # lists in lists (a file list, a dataframe's rows) are as deep as inputs go


def lone_surrogate(value: object, depth: int = 0) -> tuple[str, int] | None:
    """``(the character, its position)`` of the first lone surrogate in ``value`` (a text, or a
    list, tuple or dict of them), None if there is none."""
    if isinstance(value, str):
        if value.isascii():
            return None
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as err:
            return value[err.start], err.start
        return None
    if depth >= _DEPTH:
        return None
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    for item in items:
        found = lone_surrogate(item, depth + 1)
        if found is not None:
            return found
    return None


def refusal(args: tuple, kwargs: dict) -> str | None:
    """The one line that refuses a call whose values hold a lone surrogate, or None."""
    for value in (*args, *kwargs.values()):
        found = lone_surrogate(value)
        if found is not None:
            char, at = found
            return (f"a value sent holds U+{ord(char):04X} (a lone surrogate) at character {at + 1:,}: half of a "
                    "character that no UTF-8 text can hold, so nothing was done; send the text as UTF-8")
    return None


def guarded(fn):
    """``fn`` behind the door: the same kind of callable, with the same signature."""
    if getattr(fn, "_rankscope_guarded", False):
        return fn
    def check(args: tuple, kwargs: dict) -> None:
        if (message := refusal(args, kwargs)) is not None:
            raise gr.Error(message, print_exception=False)

    async def agen(*args, **kwargs):
        check(args, kwargs)
        async for item in fn(*args, **kwargs):
            yield item

    def gen(*args, **kwargs):
        check(args, kwargs)
        yield from fn(*args, **kwargs)

    async def coro(*args, **kwargs):
        check(args, kwargs)
        return await fn(*args, **kwargs)

    def plain(*args, **kwargs):
        check(args, kwargs)
        return fn(*args, **kwargs)

    wrapper: Callable[..., Any]
    if inspect.isasyncgenfunction(fn):
        wrapper = agen
    elif inspect.isgeneratorfunction(fn):
        wrapper = gen
    elif inspect.iscoroutinefunction(fn):
        wrapper = coro
    else:
        wrapper = plain
    functools.update_wrapper(wrapper, fn)
    setattr(wrapper, "_rankscope_guarded", True)  # noqa: B010 - a Callable has no attributes to the type check
    return wrapper


def guard(blocks: gr.Blocks) -> gr.Blocks:
    """Put every event handler of ``blocks`` behind the door (idempotent); returns ``blocks``."""
    for block_fn in blocks.fns.values():
        if block_fn.fn is not None:
            block_fn.fn = guarded(block_fn.fn)
    return blocks
