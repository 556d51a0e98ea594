"""The characters no value may carry into a generated file, and credentials kept out of text.

Shared by the render door (``envlock.render.values``), the lock reader
(``envlock.lock.pylock``) and the index settings (``envlock.index``); it
imports nothing of envlock, so every command can use it without cost.

``bad_character`` finds what would end a line or a comment early, or hide
text from a reader: C0 and C1 control characters and DEL (newline, carriage
return, tab, escape ...), the Unicode line and paragraph separators, and the
bidirectional overrides. ``redact`` removes the user and password of every URL
in a text, and the values of secret-bearing query parameters: credentials in
an index URL are never printed or written.
"""

from __future__ import annotations

import re
import unicodedata

# Bidirectional embedding, override and isolate controls (Unicode category Cf)
# reorder what a reader sees without changing what a parser reads.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_LINE_BREAKING = frozenset(("Cc", "Zl", "Zp", "Cs"))

# scheme://user[:password]@ -- the userinfo of a URL anywhere in a text
_USERINFO_RE = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/?#\s]*)@")
# ?token=... / &X-Amz-Signature=... -- a secret-bearing query parameter of a URL in a text
# (signed-URL and token-in-query styles of private indexes and object stores)
_SECRET_QUERY_RE = re.compile(
    r"(?P<name>[?&](?:[A-Za-z0-9_.-]*[_.-])?"
    r"(?:token|key|secret|password|passwd|pwd|sig|signature|credential|auth)=)"
    r"(?P<value>[^&#\s'\"]+)",
    re.IGNORECASE,
)


def bad_character(text: str) -> str | None:
    """The first character of ``text`` no generated file may hold, as ``U+XXXX``; else None."""
    for ch in text:
        if ch in _BIDI or unicodedata.category(ch) in _LINE_BREAKING:
            return f"U+{ord(ch):04X}"
    return None


def redact(text: str) -> str:
    """``text`` with the user and password of every URL in it removed.

    ``https://user:secret@host/simple`` becomes ``https://host/simple``, and the
    value of a secret-bearing query parameter (``?token=``, ``&X-Amz-Signature=``,
    ``?api_key=``) becomes ``***``; text without credentials comes back
    unchanged. The one function through which an index URL reaches a message,
    a log or a file.
    """
    text = _USERINFO_RE.sub(lambda m: m.group("scheme"), text)
    if "=" in text:
        text = _SECRET_QUERY_RE.sub(lambda m: m.group("name") + "***", text)
    return text


def shown(text: str, limit: int = 120) -> str:
    """``text`` for an error message: credentials removed, quoted with escapes, shortened."""
    text = redact(text)
    if len(text) > limit:
        text = text[:limit] + "..."
    return repr(text)
