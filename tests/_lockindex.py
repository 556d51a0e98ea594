"""A small package index on 127.0.0.1 for the lock tests.

It serves the PEP 691 JSON simple API (url, sha256, size per file) and the
files themselves, for tiny but valid wheels the tests build. Faults can be
injected: answer 503 a number of times for a path before answering normally.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import threading
import zipfile
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from packaging.utils import canonicalize_name


def make_wheel(
    name: str,
    version: str,
    tag: str = "py3-none-any",
    requires: tuple[str, ...] = (),
    extras: dict[str, tuple[str, ...]] | None = None,
) -> tuple[str, bytes]:
    """(filename, bytes) of a minimal valid wheel with one module."""
    dist = name.replace("-", "_")
    filename = f"{dist}-{version}-{tag}.whl"
    info = f"{dist}-{version}.dist-info"
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    meta += [f"Requires-Dist: {r}" for r in requires]
    for extra, reqs in (extras or {}).items():
        meta.append(f"Provides-Extra: {extra}")
        meta += [f'Requires-Dist: {r} ; extra == "{extra}"' for r in reqs]
    files = {
        f"{dist}/__init__.py": f"VERSION = {version!r}\n".encode(),
        f"{info}/METADATA": ("\n".join(meta) + "\n").encode(),
        f"{info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: envlock-tests\nRoot-Is-Purelib: true\n"
            + "".join(f"Tag: {t}\n" for t in _expand(tag))
        ).encode(),
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for path, data in files.items():
            info_ = zipfile.ZipInfo(path, date_time=(2024, 1, 1, 0, 0, 0))
            zf.writestr(info_, data)
    return filename, buf.getvalue()


def _expand(tag: str) -> list[str]:
    py, abi, plat = tag.split("-")
    return [f"{a}-{b}-{c}" for a in py.split(".") for b in abi.split(".") for c in plat.split(".")]


@dataclass
class LocalIndex:
    files: dict[str, dict[str, bytes]] = field(default_factory=dict)  # project -> {fn: data}
    faults: dict[str, int] = field(default_factory=dict)  # path -> 503s left
    hits: dict[str, int] = field(default_factory=dict)
    server: ThreadingHTTPServer | None = None

    def add(self, name: str, version: str, **kw: Any) -> str:
        fn, data = make_wheel(name, version, **kw)
        self.files.setdefault(canonicalize_name(name), {})[fn] = data
        return fn

    @property
    def url(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/simple"

    def sha256(self, fn: str) -> str:
        for files in self.files.values():
            if fn in files:
                return hashlib.sha256(files[fn]).hexdigest()
        raise KeyError(fn)

    def start(self) -> LocalIndex:
        index = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            head = False

            def do_HEAD(self) -> None:
                self.head = True
                self.do_GET()

            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                index.hits[path] = index.hits.get(path, 0) + 1
                if index.faults.get(path, 0) > 0:
                    index.faults[path] -= 1
                    self._send(503, b"busy", "text/plain")
                    return
                parts = [p for p in path.split("/") if p]
                if len(parts) == 2 and parts[0] == "simple":
                    project = canonicalize_name(parts[1])
                    if project not in index.files:
                        self._send(404, b"not found", "text/plain")
                        return
                    doc = {
                        "meta": {"api-version": "1.1"},
                        "name": project,
                        "versions": [],
                        "files": [
                            {
                                "filename": fn,
                                "url": f"../../files/{fn}",
                                "hashes": {"sha256": hashlib.sha256(data).hexdigest()},
                                "size": len(data),
                            }
                            for fn, data in sorted(index.files[project].items())
                        ],
                    }
                    body = json.dumps(doc).encode()
                    self._send(200, body, "application/vnd.pypi.simple.v1+json")
                    return
                if len(parts) == 2 and parts[0] == "files":
                    for files in index.files.values():
                        if parts[1] in files:
                            self._send(200, files[parts[1]], "application/octet-stream")
                            return
                self._send(404, b"not found", "text/plain")

            def _send(self, code: int, body: bytes, ctype: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not self.head:
                    self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server:
            self.server.shutdown()
            self.server.server_close()
