"""The characters no value may carry into a generated file, and credentials kept out of text.

Shared by the render door (``envlock.render.values``), the lock reader
(``envlock.lock.pylock``) and the index settings (``envlock.index.config``); it
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
# a URL, up to its end (whitespace or a quote): one match always succeeds from
# its first character and consumes the token, so the search stays linear (a
# pattern that needed a '?' inside it re-scanned the token from every scheme)
_URL_RE = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]*")
# ?token=... / &X-Amz-Signature=... outside a URL envlock can see whole
_SECRET_QUERY_RE = re.compile(
    r"(?P<name>[?&#;](?:[A-Za-z0-9_.-]*[_.-])?"
    r"(?:token|key|secret|password|passwd|pwd|sig|signature|credential|auth|jwt|session"
    r"|sessionid|apikey|access)[A-Za-z0-9_.-]*=)"
    r"(?P<value>[^&#;\s'\"]+)",
    re.IGNORECASE,
)
# Query and fragment parameters whose values are kept: hashes in wheel URLs
# (PEP 503 fragments), a registry's pagination (?n=, &last=) and a token
# service's service and scope (the OCI distribution and Docker token specs):
# names that never carry a credential. Every other value is shown as ***.
HARMLESS_PARAMETERS = frozenset(
    (
        "sha256",
        "sha384",
        "sha512",
        "sha224",
        "sha1",
        "md5",
        "egg",
        "subdirectory",
        "n",
        "last",
        "service",
        "scope",
        "format",
        "page",
        "per_page",
    )
)


def bad_character(text: str) -> str | None:
    """The first character of ``text`` no generated file may hold, as ``U+XXXX``; else None."""
    for ch in text:
        if ch in _BIDI or unicodedata.category(ch) in _LINE_BREAKING:
            return f"U+{ord(ch):04X}"
    return None


def _params(part: str, *, bare: bool = False) -> str:
    """A query or fragment with every value but the harmless ones shown as ***
    (``bare``: a word without ``=`` is kept, as a page anchor is)."""
    if bare and "=" not in part:
        return part
    out = []
    for item in re.split(r"([&;])", part):
        if item in ("&", ";") or not item:
            out.append(item)
            continue
        name, eq, _value = item.partition("=")
        if not eq:  # a bare word: a value without a name is a value too
            out.append(item if name.lower() in HARMLESS_PARAMETERS else "***")
        elif name.lower() in HARMLESS_PARAMETERS:
            out.append(item)
        else:
            out.append(f"{name}=***")
    return "".join(out)


def _url_tail(m: re.Match[str]) -> str:
    url = m.group()
    cut = min((i for i in (url.find("?"), url.find("#")) if i >= 0), default=-1)
    if cut < 0:
        return url
    head, tail = url[:cut], url[cut:]
    query, hashmark, fragment = tail.partition("#")
    if query.startswith("?"):
        query = "?" + _params(query[1:])
    return head + query + (hashmark + _params(fragment, bare=True) if hashmark else "")


def redact(text: str) -> str:
    """``text`` with the credentials of every URL in it removed.

    The user and password go (``https://user:secret@host/simple`` becomes
    ``https://host/simple``), and every value in a URL's query and fragment
    becomes ``***`` unless its name is in ``HARMLESS_PARAMETERS``
    (``?apikey=s3cr3t`` -> ``?apikey=***``, ``#token=x`` -> ``#token=***``,
    ``#sha256=<hex>`` kept). Outside a URL, secret-looking parameters
    (``&token=``) lose their values too. Text without credentials comes back
    unchanged. The one function through which a URL reaches a message, a log
    or a file.
    """
    text = _USERINFO_RE.sub(lambda m: m.group("scheme"), text)
    if "?" in text or "#" in text:
        text = _URL_RE.sub(_url_tail, text)
    if "=" in text:
        text = _SECRET_QUERY_RE.sub(lambda m: m.group("name") + "***", text)
    return text


def carries_secret(url: str) -> bool:
    """Whether ``redact`` takes anything but the user and password out of ``url``:
    then the redacted URL would not work where it is pasted."""
    return redact(url) != _USERINFO_RE.sub(lambda m: m.group("scheme"), url)


def shown(text: str, limit: int = 120) -> str:
    """``text`` for an error message: credentials removed, quoted with escapes, shortened."""
    text = redact(text)
    if len(text) > limit:
        text = text[:limit] + "..."
    return repr(text)
