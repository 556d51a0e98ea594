"""Several indexes: extra indexes by name, and which packages come from each.

``--index NAME=URL`` names an extra index the way uv's ``--index`` does;
``--route 'torch,torchvision=NAME'`` sends those projects to it, and
``--route '+cu128=NAME'`` every pinned line whose version carries that local
label (``torch==2.10.0+cu128``). Every extra index is *explicit* (uv's
``explicit = true``): a project is looked up on it only when a route sends it
there, and a routed project only there; every other project comes from the
default index alone. So a name that exists on both is taken only from the one
it is routed to (no dependency confusion), whatever uv's ``--index-strategy``.

A name route wins over a label route for the same project. An index no route
uses, a route to an index not named, and one project routed to two indexes are
bad input (exit 2). The lock records the indexes without user and password
(``envlock.door.redact``); an index URL with a credential in its query is
refused: the recorded URL would not work (uv reads a named index's
credentials from ``UV_INDEX_<NAME>_USERNAME`` / ``_PASSWORD``, or netrc).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from envlock.door import bad_character, carries_secret, shown
from envlock.errors import UsageError

# uv's index names: ASCII letters, digits, dashes, underscores and periods
_INDEX_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_PROJECT = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")
_LABEL = re.compile(r"^\+[a-z0-9]+(?:\.[a-z0-9]+)*$")
MAX_INDEXES = 16
MAX_ROUTES = 1000

_INDEX_HINT = "--index NAME=URL, e.g. --index pytorch=https://your.index/whl/cu128"
_ROUTE_HINT = "--route 'torch,torchvision=NAME' or --route '+cu128=NAME' (NAME from --index)"


@dataclass(frozen=True)
class ExtraIndex:
    name: str
    url: str  # as given (the live run may carry a user and password); recorded redacted


@dataclass(frozen=True)
class Route:
    match: str  # a normalized project name, or a local version label "+cu128"
    index: str  # an ExtraIndex name

    @property
    def is_label(self) -> bool:
        return self.match.startswith("+")


@dataclass(frozen=True)
class Routing:
    indexes: tuple[ExtraIndex, ...] = ()
    routes: tuple[Route, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.indexes)

    def url_of(self, name: str) -> str:
        return next(i.url for i in self.indexes if i.name == name)

    def index_for(self, project: str, version: str | None = None) -> ExtraIndex | None:
        """The extra index ``project`` (at ``version``, for a label route) is routed
        to; None: the default index."""
        name = canonicalize_name(project)
        for route in self.routes:
            if not route.is_label and route.match == name:
                return self._index(route.index)
        if version and "+" in version:
            label = "+" + version.split("+", 1)[1].lower()
            for route in self.routes:
                if route.is_label and route.match == label:
                    return self._index(route.index)
        return None

    def _index(self, name: str) -> ExtraIndex:
        return next(i for i in self.indexes if i.name == name)

    def routed(self, requirements: Iterable[str]) -> dict[str, ExtraIndex]:
        """{project: index} for the requirement lines and the name routes: a label
        route routes the projects whose line pins that label (``==2.10.0+cu128``)."""
        out: dict[str, ExtraIndex] = {}
        for line in requirements:
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            pinned = [s.version for s in req.specifier if s.operator in ("==", "===")]
            found = self.index_for(req.name, pinned[0] if pinned else None)
            if found is not None:
                out[canonicalize_name(req.name)] = found
        for route in self.routes:
            if not route.is_label:
                out.setdefault(route.match, self._index(route.index))
        return out


def not_served(output: str, routed: dict[str, ExtraIndex]) -> UsageError | None:
    """The resolver's failure, when it is that a routed project (or the version asked)
    is not on the index it is routed to: one message naming each and its index."""
    from envlock.door import redact

    low = output.lower()
    missing = [
        name
        for name in sorted(routed)
        if re.search(
            rf"(?:\b{re.escape(name)} was not found|there is no version of {re.escape(name)}\b)",
            low,
        )
    ]
    if not missing:
        return None
    lines = "\n".join(
        f"  {name}: not served by the index {routed[name].name} at {redact(routed[name].url)} "
        "(its --route)"
        for name in missing
    )
    return UsageError(
        f"{len(missing)} routed package(s) are not on the index they are routed to (or not "
        "at the version asked), and a routed package is taken from that index only (never "
        f"from another that has the name):\n{lines}",
        hint="check the --index URL and the --route rules",
    )


def _index_url(url: str, origin: str) -> str:
    problem = None
    if bad_character(url) is not None:
        problem = f"holds the control character {bad_character(url)}"
    elif any(ch.isspace() for ch in url) or not url:
        problem = "is empty or holds a space"
    elif not url.startswith(("http://", "https://", "file://")):
        problem = "is not an http(s) or file URL"
    elif carries_secret(url):
        problem = (
            "carries a credential in its query or fragment, which the lock cannot record "
            "(give it as UV_INDEX_<NAME>_PASSWORD, or in netrc)"
        )
    if problem is not None:
        raise UsageError(f"{origin}: the URL {shown(url)} {problem}", hint=_INDEX_HINT)
    return url.rstrip("/")


def parse(index_args: Sequence[str], route_args: Sequence[str]) -> Routing:
    """``--index`` and ``--route`` values -> Routing; UsageError (exit 2) naming the
    first bad one."""
    if len(index_args) > MAX_INDEXES:
        raise UsageError(
            f"{len(index_args)} --index options; at most {MAX_INDEXES}", hint=_INDEX_HINT
        )
    indexes: list[ExtraIndex] = []
    for raw in index_args:
        name, sep, url = raw.partition("=")
        if not sep or not _INDEX_NAME.match(name.strip()):
            raise UsageError(
                f"--index {shown(raw)}: not NAME=URL with a NAME of letters, digits, '.', '-' "
                "or '_'",
                hint=_INDEX_HINT,
            )
        name = name.strip()
        if name in {i.name for i in indexes}:
            raise UsageError(f"--index {name}: named twice", hint="give each index one name")
        indexes.append(ExtraIndex(name, _index_url(url.strip(), f"--index {name}")))
    routes: list[Route] = []
    sent: dict[str, str] = {}
    for raw in route_args:
        left, sep, index = raw.rpartition("=")
        index = index.strip()
        if not sep or not left.strip():
            raise UsageError(f"--route {shown(raw)}: not WHAT=NAME", hint=_ROUTE_HINT)
        if index not in {i.name for i in indexes}:
            known = ", ".join(i.name for i in indexes) or "none"
            raise UsageError(
                f"--route {shown(raw)}: names the index {shown(index)}, which no --index "
                f"gives (indexes given: {known})",
                hint=f"add it: --index {index}=URL, or route to one of the indexes given",
            )
        for part in left.split(","):
            part = part.strip()
            if _LABEL.match(part.lower()):
                match = part.lower()
            elif _PROJECT.match(part):
                match = canonicalize_name(part)
            else:
                raise UsageError(
                    f"--route {shown(raw)}: {shown(part)} is neither a project name nor a "
                    "local version label like +cu128",
                    hint=_ROUTE_HINT,
                )
            if match in sent and sent[match] != index:
                raise UsageError(
                    f"--route: {match} is routed to two indexes ({sent[match]} and {index}); "
                    "a project comes from one index",
                    hint="route it once",
                )
            if match not in sent:
                sent[match] = index
                routes.append(Route(match, index))
    if len(routes) > MAX_ROUTES:
        raise UsageError(f"{len(routes)} routes; at most {MAX_ROUTES}", hint="route fewer")
    unused = [i.name for i in indexes if i.name not in sent.values()]
    if unused:
        raise UsageError(
            f"--index {unused[0]}: no --route sends a package to it (extra indexes are "
            "explicit: only routed packages come from them)",
            hint=f"add --route 'NAME,...={unused[0]}' or --route '+cu128={unused[0]}', "
            "or leave the index out",
        )
    return Routing(tuple(indexes), tuple(routes))


def from_pairs(indexes: Sequence[tuple[str, str]], routes: Sequence[tuple[str, str]]) -> Routing:
    """(name, url) and (match, index) pairs, as LockInput and LockRequest hold them,
    validated as the flags are."""
    return parse([f"{n}={u}" for n, u in indexes], [f"{m}={i}" for m, i in routes])


def pairs(routing: Routing) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """The (indexes, routes) pairs of ``routing`` (URLs as given)."""
    return (
        tuple((i.name, i.url) for i in routing.indexes),
        tuple((r.match, r.index) for r in routing.routes),
    )


def add_arguments(parser: Any) -> None:
    """--index and --route, as lock and capture take them."""
    parser.add_argument(
        "--index",
        dest="indexes",
        action="append",
        default=[],
        metavar="NAME=URL",
        help="an extra simple-API index, as uv's --index NAME=URL; explicit: only the "
        "packages a --route sends to it come from it (repeatable)",
    )
    parser.add_argument(
        "--route",
        dest="routes",
        action="append",
        default=[],
        metavar="WHAT=NAME",
        help="take these packages from the index NAME, and only from there: project names "
        "('torch,torchvision=pytorch') or a local version label of pinned lines "
        "('+cu128=pytorch'); every other package comes from the default index (repeatable)",
    )
