"""``envlock matrix refresh --check``: what separates the shipped matrix from a
fresh refresh (new releases and candidates, rows whose fields differ, rows gone),
as data and as one line each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from envlock.matrix.tensorflow import TFMatrix, TFRelease


@dataclass(frozen=True)
class Change:
    """One field of a row that the index gives otherwise."""

    field: str
    shipped: Any
    index: Any


@dataclass(frozen=True)
class Drift:
    """What separates a shipped matrix from a fresh refresh."""

    new: tuple[TFRelease, ...]  # on the index, not in the matrix
    changed: tuple[tuple[str, tuple[Change, ...]], ...]  # (version, its changed fields)
    gone: tuple[str, ...]  # in the matrix, no longer on the index

    @property
    def current(self) -> bool:
        return not (self.new or self.changed or self.gone)

    def lines(self) -> list[str]:
        """One line per new release, differing row and vanished release."""
        out: list[str] = []
        for row in self.new:
            kind = "release candidate" if row.prerelease else "release"
            out.append(f"new on the index: tensorflow {row.version} ({kind}, {row.uploaded[:10]})")
        for version, changes in self.changed:
            parts = "; ".join(
                f"{c.field}: shipped {_short(c.shipped)}, index {_short(c.index)}" for c in changes
            )
            out.append(f"differs: tensorflow {version}: {parts}")
        for version in self.gone:
            out.append(f"gone from the index: tensorflow {version}")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "current": self.current,
            "new": [
                {"version": str(r.version), "prerelease": r.prerelease, "uploaded": r.uploaded}
                for r in self.new
            ],
            "changed": [
                {
                    "version": version,
                    "fields": [
                        {"field": c.field, "shipped": c.shipped, "index": c.index} for c in changes
                    ],
                }
                for version, changes in self.changed
            ],
            "gone": list(self.gone),
        }


def _short(value: Any, limit: int = 80) -> str:
    import json

    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def drift(shipped: TFMatrix, fresh: TFMatrix) -> Drift:
    """Rows the index has and the matrix lacks, rows whose fields differ (every field
    of the written form, the note included), rows the index no longer has."""
    ours = {str(r.version): r for r in shipped.releases}
    theirs = {str(r.version): r for r in fresh.releases}
    new = tuple(r for r in fresh.releases if str(r.version) not in ours)
    changed: list[tuple[str, tuple[Change, ...]]] = []
    for row in shipped.releases:
        other = theirs.get(str(row.version))
        if other is None:
            continue
        a, b = row.to_dict(), other.to_dict()
        fields = [k for k in dict.fromkeys([*a, *b]) if a.get(k) != b.get(k)]
        if fields:
            changes = tuple(Change(k, a.get(k), b.get(k)) for k in fields)
            changed.append((str(row.version), changes))
    gone = tuple(str(r.version) for r in shipped.releases if str(r.version) not in theirs)
    return Drift(new=new, changed=tuple(changed), gone=gone)
