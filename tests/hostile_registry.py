"""A small registry of the test's own on 127.0.0.1 that answers what the test says.

Each route is ``(METHOD, path)`` -> ``Answer``: a status, headers and a body given
as a sequence of chunks (one chunk object may be repeated many times, so a 300 MB
body costs the server one small buffer). Every request is counted and logged. The
server thread is a daemon and ``close`` stops it; a handler whose client has gone
stops writing (broken pipe), so no loop outlives the test.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

MIB = 1024 * 1024
DIGEST = "sha256:" + "ab" * 32  # the image every test names
REPO = "team/tf"


@dataclass
class Answer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    chunks: Iterable[bytes] = ()
    length: int | None = None  # Content-Length; None: the sum of the chunks; -1: none sent

    @classmethod
    def json(cls, doc: Any, status: int = 200, **headers: str) -> Answer:
        return cls(
            status, {"Content-Type": "application/json", **headers}, [json.dumps(doc).encode()]
        )

    @classmethod
    def big(
        cls, head: bytes, size: int, status: int = 200, *, stated: bool = True, **headers: str
    ) -> Answer:
        """``head`` then spaces up to ``size`` bytes, sent 1 MiB at a time; without
        ``stated``, no Content-Length (the end of the body is the end of the connection)."""
        pad = b" " * MIB

        def chunks() -> Iterator[bytes]:
            yield head
            left = size - len(head)
            while left > 0:
                yield pad[: min(left, MIB)]
                left -= MIB

        return cls(status, headers, chunks(), length=size if stated else -1)


Route = Callable[["Handler"], Answer]


class Handler(BaseHTTPRequestHandler):
    server: Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _answer(self) -> None:
        path = urlsplit(self.path).path
        self.server.log.append((self.command, self.path))
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(min(length, 64 * MIB))
        route = self.server.routes.get((self.command, path))
        answer = route(self) if route is not None else Answer.json({"errors": []}, 404)
        chunks = answer.chunks
        size = answer.length
        if size is None:
            chunks = list(chunks)
            size = sum(len(c) for c in chunks)
        self.send_response(answer.status)
        for k, v in answer.headers.items():
            self.send_header(k, v)
        if size >= 0:
            self.send_header("Content-Length", str(size))
        else:
            self.close_connection = True
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command == "HEAD":
            return
        try:
            for chunk in chunks:
                self.wfile.write(chunk)
        except OSError:  # the client stopped reading: so do we
            self.close_connection = True

    do_GET = do_HEAD = do_POST = do_PUT = _answer  # noqa: N815 - http.server's names


class Server(ThreadingHTTPServer):
    daemon_threads = True
    routes: dict[tuple[str, str], Route]
    log: list[tuple[str, str]]
    errors: list[str]

    def handle_error(self, request: Any, client_address: Any) -> None:
        import traceback

        self.errors.append(traceback.format_exc())


class HostileRegistry:
    def __init__(self) -> None:
        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.routes = {}
        self.server.log = []
        self.server.errors = []
        self.host = f"127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def image(self) -> str:
        return f"{self.host}/{REPO}@{DIGEST}"

    @property
    def log(self) -> list[tuple[str, str]]:
        return self.server.log

    def route(self, method: str, path: str, answer: Answer | Route) -> None:
        self.server.routes[(method, path)] = (
            answer if callable(answer) else (lambda _h, a=answer: a)  # type: ignore[misc]
        )

    def att_path(self) -> str:
        return f"/v2/{REPO}/manifests/sha256-{DIGEST.partition(':')[2]}.att"

    def blob_path(self, digest: str) -> str:
        return f"/v2/{REPO}/blobs/{digest}"

    def attestations(self, blobs: list[bytes], *, repeat: list[int] | None = None) -> list[str]:
        """An .att manifest listing ``blobs`` (``repeat[i]`` times each); each blob served."""
        layers = []
        digests = []
        for blob, times in zip(blobs, repeat or [1] * len(blobs), strict=True):
            digest = "sha256:" + hashlib.sha256(blob).hexdigest()
            digests.append(digest)
            self.route("GET", self.blob_path(digest), Answer(200, {}, [blob]))
            layers += [
                {
                    "mediaType": "application/vnd.dsse.envelope.v1+json",
                    "size": len(blob),
                    "digest": digest,
                }
            ] * times
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "x", "size": 2, "digest": "sha256:" + "00" * 32},
            "layers": layers,
        }
        self.route("GET", self.att_path(), Answer.json(manifest))
        return digests

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def peak_of(fn: Callable[[], Any]) -> tuple[Any, int]:
    """``fn()`` and the peak of Python memory it allocated (tracemalloc), in bytes."""
    import tracemalloc

    tracemalloc.start()
    try:
        out = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return out, peak
