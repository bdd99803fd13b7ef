"""Retrieval systems as objects, and the registry of the built-in ones.

Each system is one module of this package implementing ``base.System`` (key, labels, what it needs,
its cache parameters, search, exact scores, one typed query, an explanation, whether it is shown by
default, the background builds it waits for): ``bm25``, ``dense``, ``hybrid`` (CLEAR, RRF, weighted
sum), ``sparse`` (learned sparse, SPLADE), ``imported`` (a run file's lists). What a system builds
it keeps on the workspace (``Workspace.system_state``, ``state``). The built-ins register here, in
the order views list them; a new system is a new module and one ``register`` line. Nothing outside
this package tests a system's key: it asks the system (``needs``, ``params``, ``shown_by_default``)
or names it through the constants below, and every view and the CLI take their lists from the
registry (``keys``, ``shown``).

``SYSTEMS`` are the built-in keys a ``Workspace`` can run; ``BASE_SYSTEMS`` BM25, dense and the
CLEAR hybrid, the library functions' default (``metrics_table``, ``side_by_side``);
``ENCODER_SYSTEMS`` those an encoder changes; ``SPARSE_SYSTEMS`` those the learned sparse model
changes; ``TUNED_SYSTEMS`` a fine-tuned encoder's dense and hybrid, as the failure gallery names them
beside the base ones.
"""
from __future__ import annotations

from retrieval.systems.base import Hits, Needs, Probe, System
from retrieval.systems.bm25 import BM25 as _BM25
from retrieval.systems.dense import Dense as _Dense
from retrieval.systems.hybrid import HYBRID as _HYBRID
from retrieval.systems.hybrid import RRF as _RRF
from retrieval.systems.hybrid import WeightedSum as _WeightedSum
from retrieval.systems.hybrid3 import Hybrid3 as _Hybrid3
from retrieval.systems.imported import Imported
from retrieval.systems.ql import QueryLikelihood as _QueryLikelihood
from retrieval.systems.rm3 import RM3 as _RM3
from retrieval.systems.sparse import Splade as _Splade

_REGISTRY: dict[str, System] = {}


def register(system: System) -> System:
    """Make ``system`` a built-in, listed after those registered before it."""
    if system.key in _REGISTRY:
        raise ValueError(f"a system {system.key!r} is registered already")
    _REGISTRY[system.key] = system
    return system


def unregister(key: str) -> None:
    """Take the built-in ``key`` off the registry (a system a test or a plugin registered for a while)."""
    _REGISTRY.pop(key, None)


def builtin(key: str) -> System | None:
    """The built-in system of that key, or None."""
    return _REGISTRY.get(key)


def keys() -> tuple[str, ...]:
    """Every registered system's key, in the order they registered (the order views list them)."""
    return tuple(_REGISTRY)


def shown() -> tuple[str, ...]:
    """The registered systems shown by default (``System.shown_by_default``), in that order."""
    return tuple(k for k, s in _REGISTRY.items() if s.shown_by_default)


BM25, DENSE, HYBRID, RRF, WSUM, SPLADE = (register(s).key for s in (_BM25(), _Dense(), _HYBRID, _RRF(),
                                                                     _WeightedSum(), _Splade()))
register(_QueryLikelihood())  # query likelihood, Dirichlet-smoothed: ``ql``
register(_Hybrid3())  # BM25 + dense + SPLADE fused: ``hybrid3``
register(_RM3())  # BM25 with RM3 query expansion: ``rm3``
TUNED_DENSE, TUNED_HYBRID = "tuned_dense", "tuned_hybrid"  # a fine-tuned encoder's, in the failure gallery
_ROLES = {TUNED_DENSE: ("Fine-tuned dense", "fine-tuned dense"),
          TUNED_HYBRID: ("Fine-tuned hybrid", "fine-tuned hybrid")}

SYSTEMS = tuple(_REGISTRY)
BASE_SYSTEMS = (BM25, DENSE, HYBRID)
ENCODER_SYSTEMS = (DENSE, HYBRID)  # the systems an encoder changes (a fine-tuned one gives new ones)
TUNED_SYSTEMS = (TUNED_DENSE, TUNED_HYBRID)
SPARSE_SYSTEMS = tuple(k for k, s in _REGISTRY.items() if s.needs.sparse)  # those a sparse model changes
TUNED_OF = dict(zip(ENCODER_SYSTEMS, TUNED_SYSTEMS))  # a base system -> the fine-tuned encoder's same system


def is_reserved(name: str) -> bool:
    """Whether ``name`` belongs to a built-in system or a role (an imported run cannot take it)."""
    return name in _REGISTRY or name in _ROLES


def label(key: str) -> str:
    """The long label of a system key (the key itself when unknown, e.g. an imported run's name)."""
    system = _REGISTRY.get(key)
    return system.label if system else _ROLES.get(key, (key,))[0]


def short(key: str) -> str:
    """The short label of a system key (the key itself when unknown)."""
    system = _REGISTRY.get(key)
    return system.short if system else _ROLES.get(key, (key, key))[1]


__all__ = ["BASE_SYSTEMS", "BM25", "DENSE", "ENCODER_SYSTEMS", "HYBRID", "Hits", "Imported", "Needs", "Probe", "RRF",
           "SPARSE_SYSTEMS", "SPLADE", "SYSTEMS", "System", "TUNED_DENSE", "TUNED_HYBRID", "TUNED_OF", "TUNED_SYSTEMS",
           "WSUM", "builtin", "is_reserved", "keys", "label", "register", "short", "shown", "unregister"]
