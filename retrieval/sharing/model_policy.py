"""Which encoders the client of a shared app may switch to.

Loading a model reads files from the server's disk, or downloads a Hugging Face repository, and
runs its weights: on a server anyone can reach, a page or an API call naming any folder or hub id
would let a stranger probe the disk, fill it with downloads, or load a folder planted through an
upload. So the app offers a closed list (``ModelPolicy.permits``):

* the base encoder the app was started with (``--model``, default the bundled all-MiniLM-L6-v2),
  and the bundled all-MiniLM-L6-v2 itself;
* the models RankScope fine-tuned with this store (folders under the store's ``models/``, after
  symbolic links are resolved);
* what the operator allowed at start (``--allow-model PATH_OR_ID``, repeatable).

Anything else is refused with ``ModelRefused``, whose message is the same whether the path exists
or not. ``trust_clients`` (``--trust-clients``, for a laptop) lifts the list; on Hugging Face Spaces
(``SPACE_ID`` set) it never does, whatever the flags say (``on_spaces``).

Whatever the list allows, no model's own code is ever run: ``encoder.open_model`` refuses a folder
whose modules are not sentence-transformers' or RankScope's own, and never passes
``trust_remote_code``.
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from retrieval.index.encoder import DEFAULT_MODEL

BUNDLED = (DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}")


class ModelRefused(ValueError):
    """An encoder the policy does not offer; the message never says whether such a path exists."""

    def __init__(self, choice: str):
        shown = choice if len(choice) <= 120 else choice[:120] + "…"
        super().__init__(f"encoder {shown!r} is not one this server offers: choose the base encoder, the bundled "
                         f"{DEFAULT_MODEL}, a model fine-tuned here, or one the operator allowed (--allow-model)")


def on_spaces() -> bool:
    """True on Hugging Face Spaces, where every visitor is a stranger."""
    return bool(os.environ.get("SPACE_ID"))


def _resolved(value: str) -> Path | None:
    """``value`` as an absolute path with links resolved (None when it cannot be one)."""
    try:
        return Path(value).expanduser().resolve()
    except (OSError, ValueError, RuntimeError):  # NUL, too long, a link loop
        return None


@dataclass(frozen=True)
class ModelPolicy:
    base: str | None  # the app's encoder (None: the bundled default)
    models_dir: Path  # the store's ``models/``: RankScope's fine-tuned encoders
    allowed: tuple[str, ...] = ()  # the operator's --allow-model entries
    trust_clients: bool = False  # any path or hub id (a laptop); never on Spaces
    _allowed_paths: frozenset[Path] = field(default=frozenset(), repr=False, compare=False)

    @classmethod
    def create(cls, base: str | None, models_dir: Path, allowed: Iterable[str] = (),
               trust_clients: bool = False) -> ModelPolicy:
        """The policy for an app started with these flags (``trust_clients`` ignored on Spaces)."""
        allowed = tuple(a for a in allowed if a)
        paths = frozenset(p for p in (_resolved(a) for a in allowed) if p is not None and p.exists())
        return cls(base, Path(models_dir), allowed, trust_clients and not on_spaces(), paths)

    def offered(self) -> tuple[str, ...]:
        """The operator's allowed encoders, as given (the UI lists them beside the trained ones)."""
        return self.allowed

    def permits(self, choice: str) -> bool:
        if self.trust_clients or choice in ("", self.base, *BUNDLED, *self.allowed):
            return True
        path = _resolved(choice)
        if path is None:
            return False
        if path in self._allowed_paths:
            return True
        models = _resolved(str(self.models_dir))
        return (models is not None and path != models and path.is_relative_to(models)
                and (path / "modules.json").is_file())

    def check(self, choice: str | None) -> str | None:
        """The model to open for a client's ``choice`` ("" or None: the base, returned as
        ``base``), or ``ModelRefused``."""
        choice = (choice or "").strip()
        if not choice:
            return self.base
        if not self.permits(choice):
            raise ModelRefused(choice)
        return choice
