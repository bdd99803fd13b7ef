"""The token a browser keeps (in its local storage) so that a reload, another tab or another visit of
the app in the same browser is one session to the store's makers (``retrieval.sharing.owners``):
its query sets, snapshots, judges and kept data sets stay its own across reloads.

A token is ``<id>.<mac>``: 24 random URL-safe characters, then the first 32 hex digits of
HMAC-SHA256 of the id under the app's key (``Store.secret``, made once per store). Only a token the
app handed out passes ``verify``: a forged or altered one, or one of another store, is refused, and
the browser is handed a new one, with nothing of what the old one named shown. The maker a token
stands for is ``owners.app_owner`` of ``browser:<id>``, a hash: the store never keeps the token.
"""
from __future__ import annotations

import hashlib
import hmac
import re
import secrets

from retrieval.sharing.owners import app_owner

KEY = "browser-tokens"  # the name of the app's key in the store (``Store.secret``)
_TOKEN = re.compile(r"([A-Za-z0-9_-]{24})\.([0-9a-f]{32})")


def _mac(key: bytes, token_id: str) -> str:
    return hmac.new(key, f"token:{token_id}".encode(), hashlib.sha256).hexdigest()[:32]


def mint(key: bytes) -> str:
    """A new token under ``key``."""
    token_id = secrets.token_urlsafe(18)
    return f"{token_id}.{_mac(key, token_id)}"


def verify(key: bytes, token: object) -> str | None:
    """The id of ``token`` when the app handed it out under ``key``, else None (anything else:
    not text, another shape, a mac that does not match)."""
    if not isinstance(token, str) or len(token) > 64:
        return None
    found = _TOKEN.fullmatch(token)
    if found is None or not hmac.compare_digest(found.group(2), _mac(key, found.group(1))):
        return None
    return found.group(1)


def owner_of(token_id: str) -> str:
    """The maker (an owner id, ``owners.app_owner``) a verified token's id stands for."""
    return app_owner(f"browser:{token_id}")


def page_secret(key: bytes) -> str:
    """What the page's browser state is obscured with (Gradio's ``BrowserState`` secret): derived from
    ``key``, so it is the same after a restart; it is sent to every page, so it hides nothing from
    a client — ``verify`` is what a token is checked by."""
    return hmac.new(key, b"browser-state", hashlib.sha256).hexdigest()[:32]
