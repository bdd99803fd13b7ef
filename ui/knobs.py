"""Evaluate's "System settings": one input per declared parameter of every registered system, and
the session's chosen values, which every Evaluate handler applies.

Nothing here names a system: the inputs are the registry's declarations (``retrieval.systems.keys``,
``System.parameters``: ``retrieval.systems.declared``), formatted for the page — a number box for an
integer or a number (its range and its doc in the info line), a dropdown for a choice, a checkbox
for a flag, a text box for a text — grouped under each system's label, each at its declared default.
A system registered tomorrow with parameters gets its knobs without an edit here.

The values chosen are the session's (a ``gr.State``: one page's, or one API client's, never
another's), so the named endpoints keep their inputs; they reach the handlers as ``{system key:
{parameter: value}}`` holding only the values that differ from the defaults. Every value is read by
the declarations' one parser (``declared.parse``, through ``read``), whether a knob's or the
``/system_settings`` endpoint's JSON: a bad one is refused in one line naming the system, the parameter
and the range, and the settings in effect stay as they were. ``applied`` gives the workspace an
evaluation runs on: ``Workspace.with_settings`` with the values that differ from the workspace's own,
so its runs and metrics are cached under their own values (``System.params``) and the defaults' cache
is untouched.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import gradio as gr

from retrieval import Workspace
from retrieval.systems import builtin, keys, label
from retrieval.systems.declared import BOOL, CHOICE, FLOAT, INT, Parameter, Value, parse, written
from ui.notify import refuse
from ui.pools import LIGHT
from ui.present.escape import code, text

SETTINGS_CHARS = 10_000  # the /system_settings JSON text: a few dozen values fit many times over
Chosen = dict[str, dict[str, Value]]  # {system key: {parameter: value}}, the values that differ from the defaults


def declared() -> list[tuple[str, Parameter]]:
    """``(system key, parameter)`` of every registered system's declared parameters, in the registry's
    order and then the declaration's."""
    return [(key, p) for key in keys() if (system := builtin(key)) is not None for p in system.parameters]


def read(given: object) -> Chosen:
    """``given`` (``{system key: {parameter: value}}``, as a client sent it) as the session's settings:
    each value read by ``declared.parse``, those equal to their default left out.

    Raises:
        ValueError: In one line: ``given`` is not such a mapping, names a system that is not registered or
            has no parameters, names a parameter the system does not declare, or holds a value ``parse``
            refuses (naming the system, the parameter and the range).
    """
    if not isinstance(given, Mapping):
        raise ValueError("the system settings are an object of systems, each an object of parameter values, "
                         'such as {"rm3": {"fb_terms": 5}}')
    by_system: dict[str, dict[str, Parameter]] = {}
    for key, p in declared():
        by_system.setdefault(key, {})[p.name] = p
    chosen: Chosen = {}
    for key, values in given.items():
        if key not in by_system:
            raise ValueError(f"no registered system with parameters is called {str(key)[:40]!r}; "
                             f"those with parameters: {', '.join(by_system)}")
        system = builtin(key)
        assert system is not None  # declared() lists registered systems only
        if not isinstance(values, Mapping):
            raise ValueError(f"{system.short}'s settings are an object of parameter values, not "
                             f"{type(values).__name__}")
        for name, value in values.items():
            parameter = by_system[key].get(name)
            if parameter is None:
                raise ValueError(f"{system.short} has no parameter {str(name)[:40]!r} "
                                 f"(its parameters: {', '.join(by_system[key])})")
            parsed = parse(parameter, value, system.short)
            if parsed != parameter.default:
                chosen.setdefault(key, {})[name] = parsed
    return chosen


def from_json(given: str | None) -> Chosen:
    """The ``/system_settings`` endpoint's JSON text as the session's settings (``read``); "" or
    "{}": every default.

    Raises:
        ValueError: In one line: over ``SETTINGS_CHARS`` characters, not JSON, or what ``read`` refuses
            (a NaN or an infinity among them, named by its system and parameter).
    """
    given = (given or "").strip()
    if len(given) > SETTINGS_CHARS:
        raise ValueError(f"the system settings are at most {SETTINGS_CHARS:,} characters of JSON, "
                         f"not {len(given):,}")
    if not given:
        return {}
    try:
        value = json.loads(given)  # NaN, Infinity and 1e999 read as floats: ``parse`` refuses them, naming them
    except json.JSONDecodeError as err:
        raise ValueError(f"the system settings are not JSON: {err.msg} at line {err.lineno} column {err.colno}") \
            from None
    except RecursionError:
        raise ValueError("the system settings nest too deep to be JSON of systems and values") from None
    return read(value)


def applied(ws: Workspace, chosen: Mapping[str, Mapping[str, object]] | None) -> Workspace:
    """The workspace an evaluation runs on: ``ws`` with the session's ``chosen`` values where they
    differ from its own (``Workspace.with_settings``; ``ws`` itself when none do).

    Raises:
        gr.Error: A value the declarations refuse, in one line (``ui.notify.refuse``).
    """
    try:
        chosen = read(chosen or {})  # a state is the session's own, but read again: one parser for every value
        changes = {key: {n: v for n, v in values.items() if ws.settings_of(key).get(n) != v}
                   for key, values in chosen.items()}
        changes = {key: values for key, values in changes.items() if values}
        return ws.with_settings(changes) if changes else ws
    except ValueError as err:
        raise refuse(err) from err


def in_effect(chosen: Mapping[str, Mapping[str, Value]] | None) -> str:
    """The settings in effect, in one line of Markdown: every default, or each value changed with its
    default ("RM3: fb_terms 5 (default 10)")."""
    parts = []
    for key, values in (chosen or {}).items():
        system = builtin(key)
        if system is None or not values:
            continue
        by_name = {p.name: p for p in system.parameters}
        shown = ", ".join(f"{code(name)} {code(written(by_name[name], v))} (default "
                          f"{code(written(by_name[name], by_name[name].default))})"
                          for name, v in values.items() if name in by_name)
        parts.append(f"**{text(label(key))}**: {shown}")
    return "Evaluated with every system's defaults." if not parts else "Evaluated with " + "; ".join(parts) + "."


def info(parameter: Parameter) -> str:
    """A knob's info line: what the parameter does, its range and its default."""
    return f"{parameter.doc}; {parameter.range_text}; default {written(parameter, parameter.default)}"


Knob = gr.Number | gr.Dropdown | gr.Checkbox | gr.Textbox


def knob(key: str, parameter: Parameter) -> Knob:
    """The input for ``key``'s ``parameter``, at its default (``elem_id`` "knob-KEY-NAME")."""
    name, about, elem_id = parameter.name, info(parameter), f"knob-{key}-{parameter.name}"
    if parameter.kind in (INT, FLOAT):
        # no minimum or maximum of Gradio's own: the declared range is held by ``read``, which names it
        return gr.Number(float(parameter.default), precision=0 if parameter.kind == INT else None, label=name,
                         info=about, elem_id=elem_id)
    if parameter.kind == CHOICE:
        return gr.Dropdown(list(parameter.choices), value=parameter.default, label=name, info=about, elem_id=elem_id)
    if parameter.kind == BOOL:
        return gr.Checkbox(bool(parameter.default), label=name, info=about, elem_id=elem_id)
    return gr.Textbox(str(parameter.default), max_lines=1, label=name, info=about, elem_id=elem_id)


@dataclass
class Knobs:
    """The accordion's parts: the session's chosen values (``Chosen``) and the line saying them."""

    chosen: gr.State
    note: gr.Markdown


def build() -> Knobs:
    """The "System settings" accordion (its inputs from the registry's declarations), the events that
    set the session's values from them, and the ``/system_settings`` endpoint (a JSON object
    ``{system: {parameter: value}}`` over the defaults: what the knobs do, for an API client)."""
    chosen = gr.State({})
    pairs = declared()
    with gr.Accordion("System settings (each system's declared parameters; the defaults unless changed here)",
                      open=False, elem_id="eval-settings"):
        note = gr.Markdown(in_effect({}), elem_id="eval-settings-note")
        inputs: list[Knob] = []
        for key in dict.fromkeys(k for k, _ in pairs):
            gr.Markdown(f"**{text(label(key))}**")
            with gr.Row():
                inputs += [knob(key, p) for k, p in pairs if k == key]
        with gr.Row(visible=False):  # the /system_settings endpoint's input: the settings as JSON, for scripts
            api_settings, api_go = gr.Textbox(label="settings (JSON)"), gr.Button("set")

    def on_knobs(*values: object):
        given: dict[str, dict[str, object]] = {}
        for (key, p), value in zip(pairs, values):
            given.setdefault(key, {})[p.name] = value
        try:
            now = read(given)
        except ValueError as err:
            raise refuse(err) from err
        return now, in_effect(now)

    def on_api(given: str | None):
        try:
            now = from_json(given)
        except ValueError as err:
            raise refuse(err) from err
        return now, in_effect(now)

    if inputs:
        gr.on([c.change for c in inputs], on_knobs, inputs, [chosen, note], api_visibility="private", **LIGHT)
    api_go.click(on_api, api_settings, [chosen, note], api_name="system_settings", **LIGHT)
    return Knobs(chosen, note)
