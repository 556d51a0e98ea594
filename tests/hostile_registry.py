"""A small registry of the test's own on 127.0.0.1 that answers what the test says.

Each route is ``(METHOD, path)`` -> ``Answer``: a status, headers and a body given
as a sequence of chunks (one chunk object may be repeated many times, so a 300 MB
body costs the server one small buffer). Every request is counted and logged. The
server thread is a daemon and ``close`` stops it; a handler whose client has gone
stops writing (broken pipe), so no loop outlives the test.
"""

from __future__ import annotations

import contextlib
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
IMAGE_MEDIA_TYPE = "application/vnd.docker.distribution.manifest.v2+json"
BUNDLE = "application/vnd.dev.sigstore.bundle.v0.3+json"


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
    body = b""  # the request's body (64 MiB at most)

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _answer(self) -> None:
        path = urlsplit(self.path).path
        self.server.log.append((self.command, self.path))
        length = int(self.headers.get("Content-Length") or 0)
        self.body = self.rfile.read(min(length, 64 * MIB)) if length else b""
        route = self.server.routes.get((self.command, path))
        if route is None and self.server.fallback is not None:
            route = self.server.fallback
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
    fallback: Route | None = None  # what answers a request no route names
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
        # the image itself: what a HEAD of its manifest answers (a bundle's subject)
        self.route(
            "HEAD",
            f"/v2/{REPO}/manifests/{DIGEST}",
            Answer(200, {"Content-Type": IMAGE_MEDIA_TYPE}, [b" " * 529]),
        )
        # polled every 0.05 s, not serve_forever's 0.5 s: close() (each test's teardown)
        # waits for the next poll (as tests/fixtures/index/fakeindex.py)
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
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

    def store(self, referrers_api: bool = True, page_size: int = 0, **kw: bool) -> OciStore:
        """Answer every request no route names from an in-memory OCI 1.1 registry
        (``etags``, ``if_match``: see OciStore)."""
        store = OciStore(referrers_api, page_size, **kw)
        self.server.fallback = store
        return store

    def referrers_path(self) -> str:
        return f"/v2/{REPO}/referrers/{DIGEST}"

    def tag_path(self) -> str:
        """The referrers tag schema's index of the image: ``sha256-<hex>``."""
        return f"/v2/{REPO}/manifests/sha256-{DIGEST.partition(':')[2]}"

    def bundles(
        self, blobs: list[bytes], *, repeat: list[int] | None = None, subject: str = DIGEST
    ) -> list[str]:
        """A referrers tag index listing one bundle manifest per blob (``repeat[i]`` times
        each), each manifest and blob served; the manifests' digests."""
        entries = []
        digests = []
        for blob, times in zip(blobs, repeat or [1] * len(blobs), strict=True):
            bdigest = "sha256:" + hashlib.sha256(blob).hexdigest()
            self.route("GET", self.blob_path(bdigest), Answer(200, {}, [blob]))
            manifest = {
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "artifactType": BUNDLE,
                "config": {
                    "mediaType": "application/vnd.oci.empty.v1+json",
                    "digest": "sha256:" + hashlib.sha256(b"{}").hexdigest(),
                    "size": 2,
                },
                "layers": [{"mediaType": BUNDLE, "digest": bdigest, "size": len(blob)}],
                "subject": {"mediaType": IMAGE_MEDIA_TYPE, "digest": subject, "size": 529},
            }
            body = json.dumps(manifest).encode()
            mdigest = "sha256:" + hashlib.sha256(body).hexdigest()
            digests.append(mdigest)
            self.route("GET", f"/v2/{REPO}/manifests/{mdigest}", Answer(200, {}, [body]))
            entries += [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": mdigest,
                    "size": len(body),
                    "artifactType": BUNDLE,
                }
            ] * times
        index = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": entries,
        }
        self.route("GET", self.tag_path(), Answer.json(index))
        return digests

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


class OciStore:
    """A registry's storage that answers as an OCI 1.1 registry with the referrers API:
    blobs and manifests kept in memory, ``OCI-Subject`` on a manifest PUT that has a
    subject, ``GET /v2/<name>/referrers/<digest>`` listing the manifests that name it
    (artifactType and annotations copied), ``HEAD``/``GET`` of manifests and blobs.
    Set as a HostileRegistry's ``fallback``: exact routes still win, so a test can
    make any one answer hostile. ``referrers_api=False`` answers the referrers path
    404, as Debian's docker-registry 2.8 does."""

    def __init__(
        self,
        referrers_api: bool = True,
        page_size: int = 0,
        *,
        etags: bool = False,
        if_match: bool = False,
    ) -> None:
        self.referrers_api = referrers_api
        self.page_size = page_size  # > 0: the referrers list in pages, a Link to the next
        self.etags = etags  # a manifest GET answers ETag: "<digest>" (as distribution does)
        self.if_match = if_match  # a manifest PUT honours If-Match / If-None-Match: * (412)
        self.blobs: dict[str, bytes] = {}
        self.manifests: dict[str, tuple[str, bytes]] = {}  # digest -> (media type, body)
        self.tags: dict[str, str] = {}  # tag -> digest
        self.uploads = 0
        self.lock = threading.Lock()  # a conditional PUT checks and sets in one step
        self.refused = 0  # PUTs answered 412
        self.interleave: Interleave | None = None

    def __call__(self, h: Handler) -> Answer:
        from urllib.parse import parse_qs

        url = urlsplit(h.path)
        prefix = f"/v2/{REPO}/"
        if not url.path.startswith(prefix):
            return Answer.json({"errors": []}, 404)
        rest = url.path[len(prefix) :]
        kind, _, ref = rest.partition("/")
        if kind == "blobs" and ref == "uploads/" and h.command == "POST":
            self.uploads += 1
            return Answer(202, {"Location": f"{prefix}blobs/uploads/u{self.uploads}"})
        if kind == "blobs" and ref.startswith("uploads/") and h.command == "PUT":
            digest = parse_qs(url.query)["digest"][0]
            self.blobs[digest] = h.body
            return Answer(201, {"Docker-Content-Digest": digest})
        if kind == "blobs":
            blob = self.blobs.get(ref)
            return Answer(200, {}, [blob]) if blob is not None else Answer.json({}, 404)
        if kind == "manifests" and h.command == "PUT":
            digest = "sha256:" + hashlib.sha256(h.body).hexdigest()
            media = h.headers.get("Content-Type", "")
            if self.interleave is not None and not ref.startswith("sha256:"):
                self.interleave.put(ref)
            with self.lock:
                if self.if_match and not ref.startswith("sha256:"):
                    now = self.tags.get(ref)
                    match, none = h.headers.get("If-Match"), h.headers.get("If-None-Match")
                    if (match is not None and match != f'"{now}"') or (
                        none == "*" and now is not None
                    ):
                        self.refused += 1
                        return Answer.json({"errors": [{"code": "PRECONDITION_FAILED"}]}, 412)
                self.manifests[digest] = (media, h.body)
                if not ref.startswith("sha256:"):
                    self.tags[ref] = digest
            headers = {"Docker-Content-Digest": digest}
            subject = json.loads(h.body).get("subject")
            if subject and self.referrers_api:
                headers["OCI-Subject"] = subject["digest"]
            return Answer(201, headers)
        if kind == "manifests":
            with self.lock:
                digest = self.tags.get(ref, ref)
                found = self.manifests.get(digest)
            if self.interleave is not None and h.command == "GET" and not ref.startswith("sha256:"):
                self.interleave.get(ref)  # after the read: both answers are of the same index
            if found is None:
                return Answer.json({"errors": [{"code": "MANIFEST_UNKNOWN"}]}, 404)
            headers = {"Content-Type": found[0], "Docker-Content-Digest": digest}
            if self.etags:
                headers["ETag"] = f'"{digest}"'
            return Answer(200, headers, [found[1]])
        if kind == "referrers" and self.referrers_api and h.command == "GET":
            listed = []
            for digest, (media, body) in self.manifests.items():
                doc = json.loads(body)
                if (doc.get("subject") or {}).get("digest") == ref:
                    entry = {"mediaType": media, "digest": digest, "size": len(body)}
                    entry["artifactType"] = doc.get("artifactType") or doc["config"]["mediaType"]
                    if doc.get("annotations"):
                        entry["annotations"] = doc["annotations"]
                    listed.append(entry)
            headers = {"Content-Type": "application/vnd.oci.image.index.v1+json"}
            if self.page_size:
                page = int(parse_qs(url.query).get("page", ["0"])[0])
                if len(listed) > (page + 1) * self.page_size:
                    headers["Link"] = f'<{url.path}?page={page + 1}>; rel="next"'
                listed = listed[page * self.page_size : (page + 1) * self.page_size]
            index = {
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.index.v1+json",
                "manifests": listed,
            }
            return Answer.json(index, **headers)
        return Answer.json({"errors": []}, 404)


class Interleave:
    """Two writers of one tag, interleaved by the registry, not by timing: the first
    two GETs of the tag are answered only when both have arrived, each with the index
    as it was when it arrived (both writers read the same index), and the second PUT
    to the tag is held until ``release`` is set (the test sets it once the first
    writer's attach has returned): the lost update
    a read-back cannot see, as a registry without conditional PUTs allows it. Every
    wait gives up after ``timeout`` seconds, so a test never hangs on it."""

    def __init__(self, timeout: float = 20.0) -> None:
        self.timeout = timeout
        self.readers = threading.Barrier(2)
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.gets = 0
        self.puts = 0
        self.held = 0  # PUTs that waited for release

    def get(self, tag: str) -> None:
        with self.lock:
            self.gets += 1
            first_two = self.gets <= 2
        if first_two:
            with contextlib.suppress(threading.BrokenBarrierError):
                self.readers.wait(self.timeout)

    def put(self, tag: str) -> None:
        with self.lock:
            self.puts += 1
            second = self.puts == 2
        if second:
            self.held += 1
            self.release.wait(self.timeout)


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
