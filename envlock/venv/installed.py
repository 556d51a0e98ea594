"""What an interpreter has installed, as a small probe run in it reports: the
distributions by name and version, the files of their RECORDs (for those asked
for), and the folders the environment may hold files in (its prefixes, its
install scheme's folders, the user site where enabled).

``restore --in-place`` plans from it, and the undo store (``envlock.venv.undostore``)
checks every path it saves or writes back against ``Installed.inside``.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import tempfile
from dataclasses import dataclass

from envlock.errors import EnvironmentFailure, UsageError

_PROBE = r"""
import json, os, re, site, sys, sysconfig
from importlib import metadata
want = set(json.loads(sys.argv[1]))
roots = {sys.prefix, sys.exec_prefix}
paths = sysconfig.get_paths()
roots.update(paths[k] for k in ("data", "purelib", "platlib", "scripts") if paths.get(k))
if getattr(site, "ENABLE_USER_SITE", False) and getattr(site, "USER_BASE", None):
    roots.add(site.USER_BASE)
seen, out = set(), []
for d in metadata.distributions():
    name = d.metadata["Name"]
    if not name:
        continue
    key = re.sub(r"[-_.]+", "-", name).lower()
    if key in seen:  # the first on sys.path wins, as for import
        continue
    seen.add(key)
    row = {"name": key, "version": d.version}
    if key in want:
        files = d.files
        row["files"] = None if files is None else sorted(
            {os.path.abspath(str(f.locate())) for f in files}
        )
    out.append(row)
print(json.dumps({"executable": sys.executable, "prefix": sys.prefix,
                  "roots": sorted(os.path.abspath(r) for r in roots),
                  "minor": "%d.%d" % sys.version_info[:2], "dists": out}))
"""


@dataclass(frozen=True)
class Installed:
    executable: str
    prefix: str
    minor: str
    versions: dict[str, str]
    files: dict[str, list[str] | None]  # for the names asked for
    # where the environment may have files: its prefixes and install-scheme
    # folders (and the user site where enabled), as the interpreter says
    roots: tuple[str, ...] = ()

    def inside(self, path: str, memo: dict[str, bool] | None = None) -> bool:
        """``path`` (absolute, normalized) lies in the environment: the folder it
        is in, resolved through links, is inside one of ``roots`` (resolved too).
        With ``memo`` (a dict kept for one pass over many paths), each folder is
        resolved once: a RECORD names tens of thousands of files in a few
        thousand folders (the distributions an in-place restore of TensorFlow
        2.16.2 to 2.15.1 replaces: 26,646 in 3,411), and resolving each file's
        folder again took 4 s of that restore and 10 s of its undo (under
        cProfile). A pass that makes folders between two checks (put_back) keeps
        its own set of the folders it has checked instead."""
        if not os.path.isabs(path) or os.path.normpath(path) != path or "\0" in path:
            return False
        parent = os.path.dirname(path)
        if memo is not None and parent in memo:
            return memo[parent]
        folder = os.path.realpath(parent)
        found = any(
            folder == real or folder.startswith(real.rstrip(os.sep) + os.sep)
            for real in (os.path.realpath(root) for root in self.roots)
        )
        if memo is not None:
            memo[parent] = found
        return found


def probe(python: str, want: set[str] | frozenset[str] = frozenset()) -> Installed:
    """What ``python`` has installed (without this shell's PYTHONPATH/PYTHONHOME)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    with tempfile.TemporaryDirectory(prefix="envlock-restore-") as cwd:  # nothing to shadow
        try:
            out = subprocess.run(
                [python, "-c", _PROBE, json.dumps(sorted(want))],
                capture_output=True,
                text=True,
                timeout=120,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise EnvironmentFailure(f"{python} did not answer within 120 s") from None
        except OSError as e:
            raise UsageError(
                f"--venv {python}: cannot run it: {e.strerror or e}",
                hint="give a venv folder or an interpreter that runs",
            ) from None
    try:
        doc = json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = (out.stderr or out.stdout).strip().splitlines()[-1:] or ["no output"]
        raise EnvironmentFailure(
            f"{python} could not list its distributions (exit {out.returncode}): {tail[0]}",
            hint=f"check that it starts: {shlex.quote(python)} -c pass",
        ) from None
    return Installed(
        executable=str(doc["executable"]),
        prefix=str(doc["prefix"]),
        minor=str(doc["minor"]),
        versions={str(d["name"]): str(d["version"]) for d in doc["dists"]},
        files={str(d["name"]): d.get("files") for d in doc["dists"] if "files" in d},
        roots=tuple(str(r) for r in doc.get("roots") or (doc["prefix"],)),
    )
