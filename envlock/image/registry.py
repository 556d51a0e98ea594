"""The registry client: the OCI distribution API v2 that the attestation and
referrers layouts (``envlock.image.attestations``, ``envlock.image.referrers``)
are written on, and the reads other stages make of a pushed image
(``manifest_config_digest``, ``tag_digest``).

Only the registry HTTP API v2 is used, through ``envlock.index.http``'s requests
session (timeouts, retries of GET/HEAD, the system CAs): ``HEAD``/``POST``/
``PUT`` of blobs (``POST /v2/<name>/blobs/uploads/`` then ``PUT
<location>?digest=``) and ``GET``/``PUT`` of the manifest. oras-py installs
here, but its ``push`` writes a fresh manifest from files on disk (an
attestation already attached would be lost) and switches the whole client to
plain HTTP; the two calls needed are simpler written out.

Plain HTTP is used only for a loopback registry (``127.0.0.0/8``, ``::1``,
``localhost``), as Docker itself allows, or when the caller asks for it
(``insecure=True``: ``--insecure-registry``); everything else is HTTPS.
A registry that answers 401 gets Docker's own credentials (``docker login``),
as its challenge asks: Basic, or a Bearer token from its token service
(``envlock.image.registry_auth``). Every registry failure is ``EnvironmentFailure``
(exit 3).

What both layouts share lives here too: the media types, the OCI TypedDicts,
``Attestation`` (one DSSE envelope read back, whichever layout held it) and
``MAX_ATTESTATION_BYTES``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from envlock.errors import EnvironmentFailure, UsageError
from envlock.image import ref as imageref
from envlock.image import registry_auth

if TYPE_CHECKING:
    import requests

DSSE_MEDIA_TYPE = "application/vnd.dsse.envelope.v1+json"
CONFIG_MEDIA_TYPE = "application/vnd.oci.image.config.v1+json"
MANIFEST_MEDIA_TYPE = "application/vnd.oci.image.manifest.v1+json"
INDEX_MEDIA_TYPE = "application/vnd.oci.image.index.v1+json"
BUNDLE_MEDIA_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"
# the OCI image spec's empty descriptor: the config of an artifact that has none
EMPTY_MEDIA_TYPE = "application/vnd.oci.empty.v1+json"
DOCKER_MANIFEST_MEDIA_TYPE = "application/vnd.docker.distribution.manifest.v2+json"
MAX_ATTESTATION_BYTES = 64 * 1024 * 1024  # stated sizes of the envelopes read for one image
_HINT = "check that the registry runs and accepts pushes"
_SHA256 = re.compile(r"sha256:[0-9a-f]{64}")
_DOCKER_TYPES = (
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
_MAX_CHALLENGES = 3  # 401s answered for one request (a new scope each), then its answer stands


# The JSON objects envlock writes to a registry (OCI image spec: descriptor.md,
# manifest.md, image-index.md). What a registry sends back is read as
# ``dict[str, object]`` and checked key by key where it is used.
class Descriptor(TypedDict):
    """An OCI content descriptor: what a manifest's config, layers and subject are."""

    mediaType: str
    digest: str
    size: int


class _ManifestBody(TypedDict):
    schemaVersion: int
    mediaType: str
    config: Descriptor
    layers: list[Mapping[str, object]]  # descriptors (a kept .att layer is as it was read)


class ImageManifest(_ManifestBody, total=False):
    """An OCI image manifest (an artifact manifest has ``artifactType`` and ``subject``)."""

    artifactType: str
    subject: Descriptor
    annotations: dict[str, str]


class ImageIndex(TypedDict):
    """An OCI image index (the referrers tag schema's list of referrers)."""

    schemaVersion: int
    mediaType: str
    manifests: list[Mapping[str, object]]  # descriptors (kept entries are as they were read)


@dataclass(frozen=True)
class Attestation:
    """One envelope read back (a DSSE layer of an ``.att`` manifest, or the bundle layer
    of a referrer): its bytes, or why they were not read."""

    index: int  # 1-based, among the manifest's distinct DSSE layers
    of: int  # how many distinct DSSE layers the manifest lists
    digest: str  # the layer's (the blob's) digest
    data: bytes | None = None
    problem: str = ""  # why ``data`` is None ("not read: ...")
    layout: str = "legacy"  # legacy (.att) | referrers API | referrers tag
    manifest: str = ""  # the bundle manifest's digest (referrers layouts)
    # not read because the registry failed (broke off, bytes not matching the
    # digest): an outage, not a verdict on the evidence
    outage: bool = False


def pinned(pinned_ref: str | imageref.ImageRef, what: str = "--image") -> imageref.ImageRef:
    """A reference with a registry host and a manifest digest, or UsageError (exit 2).

    Text is parsed; an ``ImageRef`` (the one a push answered with) is only checked.
    """
    ref = imageref.parse(pinned_ref, what)
    pinned_ref = str(ref)
    if ref.digest is None:
        raise UsageError(
            f"{what} {pinned_ref!r} names no manifest digest",
            hint="give REPO@sha256:<64 hex> (the digest `envlock build --push` or "
            "`docker push` printed)",
        )
    if ref.registry is None:
        raise UsageError(
            f"{what} {pinned_ref!r} names no registry host",
            hint="name the registry in the reference, e.g. 127.0.0.1:5000/team/tf@sha256:...",
        )
    return ref


def base_url(ref: imageref.ImageRef, insecure: bool = False) -> str:
    """``http(s)://host/v2/<path>``: HTTP for a loopback host or when asked, else HTTPS."""
    host = ref.registry or ""
    scheme = "http" if insecure or registry_auth.is_loopback(host) else "https"
    return f"{scheme}://{host}/v2/{ref.path}"


class _Registry:
    """One repository of one registry, over one requests session. ``actions``: what
    the token asked for on a Bearer challenge without a scope covers ("pull,push")."""

    def __init__(self, ref: imageref.ImageRef, insecure: bool, actions: str = "pull") -> None:
        from envlock.index import http

        self.ref = ref
        self.url = base_url(ref, insecure)
        self.insecure = insecure
        self.actions = actions
        self.sess: requests.Session = http.session()
        self.authorization: str | None = None
        self.sent_credentials = False
        self._answered: set[tuple[str, str]] = set()  # challenges already answered
        self.next_page: str | None = None  # the referrers API's next page (its Link header)
        self.etag: str | None = None  # the ETag of the last manifest get_manifest read

    def close(self) -> None:
        self.sess.close()

    def request(self, method: str, url: str, doing: str, **kwargs: Any) -> requests.Response:
        """The response, its body not read (``fail`` or ``read`` reads it, bounded); a 401
        is answered once per challenge (scheme and scope) with Docker's credentials,
        then the request is sent again."""
        from urllib.parse import urlsplit

        headers = dict(kwargs.pop("headers", None) or {})
        kwargs["stream"] = True  # every body goes through body.read_body
        same_host = urlsplit(url).netloc == urlsplit(self.url).netloc  # no token elsewhere
        answered = 0
        while True:
            if self.authorization and same_host:
                headers["Authorization"] = self.authorization
            resp = self._send(method, url, doing, headers=headers, **kwargs)
            try:
                done = (
                    resp.status_code != 401
                    or not same_host
                    or answered == _MAX_CHALLENGES
                    or not self._authenticate(resp)
                )
            except BaseException:
                # a token service that fails: the 401 is closed, not left to the
                # garbage collector (an unclosed socket's ResourceWarning)
                resp.close()
                raise
            if done:
                return resp
            answered += 1
            resp.close()

    def _send(self, method: str, url: str, doing: str, **kwargs: Any) -> requests.Response:
        import requests

        from envlock.index import http

        try:
            return self.sess.request(method, url, **kwargs)
        except requests.RequestException as e:
            raise EnvironmentFailure(
                f"cannot reach the registry {self.ref.registry} {doing}: {http.reason_of(str(e))}",
                hint=_HINT,
            ) from e

    def _authenticate(self, resp: requests.Response) -> bool:
        """Set ``authorization`` for the 401's challenge; False when there is nothing
        (more) to send: no usable challenge, no credentials, or this one answered."""
        challenge = registry_auth.parse_challenge(resp.headers.get("WWW-Authenticate", ""))
        if challenge is None:
            return False
        scope = challenge.scope or f"repository:{self.ref.path}:{self.actions}"
        key = (challenge.scheme, scope)
        if key in self._answered:
            return False
        self._answered.add(key)
        registry = self.ref.registry or ""
        creds = registry_auth.docker_credentials(registry)
        if challenge.scheme == "basic":
            if creds is None or not creds.username or not self._may_send():
                return False
            self.authorization = registry_auth.basic(creds)
            self.sent_credentials = True
            return True
        token = registry_auth.bearer_token(
            self.sess, challenge, scope, creds, registry=registry, insecure=self.insecure
        )
        self.authorization = f"Bearer {token}"
        self.sent_credentials = self.sent_credentials or creds is not None
        return True

    def _may_send(self) -> bool:
        return registry_auth.may_send(self.url, self.insecure)

    def fail(self, resp: requests.Response, doing: str) -> EnvironmentFailure:
        """The failure for an unexpected answer; its body read (64 KiB at most) and closed."""
        said = _registry_said(resp)
        hint = _HINT
        host = self.ref.registry
        if resp.status_code == 401 and not self.sent_credentials:
            hint = (
                f"this registry asks for credentials: `docker login {host}` "
                "(envlock sends the ones Docker stores)"
            )
        elif resp.status_code in (401, 403):
            need = "write to" if "push" in self.actions else "read"
            hint = (
                f"the credentials `docker login {host}` stored may not {need} "
                f"{self.ref.repository}: log in with an account or token that can"
            )
        return EnvironmentFailure(
            f"the registry {self.ref.registry} refused {doing}: HTTP {resp.status_code}{said}",
            hint=hint,
        )

    def read(
        self,
        resp: requests.Response,
        kind: str,
        doing: str,
        *,
        size: int | None = None,
        sha256: str | None = None,
    ) -> bytes:
        """The body through ``body.read_body`` (bounded, the sha256 checked as it
        arrives); past its bound or not what was stated: EnvironmentFailure."""
        from envlock.index.body import BodyError, read_body

        try:
            return read_body(resp, kind, size=size, sha256=sha256)
        except BodyError as e:
            raise EnvironmentFailure(
                f"the registry {self.ref.registry} sent {e} ({doing})", hint=_HINT
            ) from e

    def get_manifest(
        self,
        reference: str,
        accept: str = MANIFEST_MEDIA_TYPE,
        *,
        path: str = "manifests",
        url: str | None = None,
    ) -> dict[str, object] | None:
        """The manifest (or index) at a tag or digest, or None when there is none; read
        through ``read`` (bounded), its sha256 checked when ``reference`` is a digest.
        ``path="referrers"`` asks the OCI 1.1 referrers API instead (``url``: the next
        page its ``Link`` named); ``next_page`` is then that answer's next page."""
        doing = f"reading the {'referrers of' if path == 'referrers' else 'manifest'} "
        sep = "@" if reference.startswith("sha256:") else ":"
        doing += f"{self.ref.repository}{sep}{reference}"
        self.next_page = None
        self.etag = None
        resp = self.request(
            "GET",
            url or f"{self.url}/{path}/{reference}",
            doing,
            headers={"Accept": accept},
            stream=True,
        )
        if path == "referrers" and resp.status_code == 200:
            self.next_page = _next_link(resp.headers.get("Link", ""), self.url)
        # a registry without the referrers API answers its path 404 (the spec); some
        # answer 400, 405 or 501 instead: each means "no API here", not a failure
        missing = (404,) if path == "manifests" else (400, 404, 405, 406, 501)
        if resp.status_code in missing:
            resp.close()
            return None
        if resp.status_code != 200:
            raise self.fail(resp, doing)
        etag = resp.headers.get("ETag")
        self.etag = etag if etag and not etag.startswith("W/") else None  # strong ones only
        pinned_digest = path == "manifests" and _SHA256.fullmatch(reference)
        body = self.read(resp, "manifest", doing, sha256=reference[7:] if pinned_digest else None)
        try:
            doc = json.loads(body)
        except (ValueError, RecursionError) as e:
            raise EnvironmentFailure(
                f"the registry {self.ref.registry} sent a manifest that is not JSON ({doing})",
                hint=_HINT,
            ) from e
        if not isinstance(doc, dict):
            raise EnvironmentFailure(f"{doing}: the manifest is not a JSON object", hint=_HINT)
        return doc

    def descriptor(self, digest: str) -> Descriptor:
        """The descriptor of manifest ``digest`` (HEAD: its media type and size)."""
        doing = f"reading the manifest {self.ref.repository}@{digest}"
        accept = f"{MANIFEST_MEDIA_TYPE}, {INDEX_MEDIA_TYPE}, " + ", ".join(_DOCKER_TYPES)
        resp = self.request(
            "HEAD", f"{self.url}/manifests/{digest}", doing, headers={"Accept": accept}
        )
        if resp.status_code != 200:
            raise self.fail(resp, doing)
        resp.close()
        media = resp.headers.get("Content-Type", "").partition(";")[0].strip()
        size = resp.headers.get("Content-Length", "")
        if not media or not size.isdigit():
            raise EnvironmentFailure(
                f"the registry {self.ref.registry} named no media type or size of {digest}",
                hint=_HINT,
            )
        return {"mediaType": media, "digest": digest, "size": int(size)}

    def put_blob(self, data: bytes) -> str:
        """Upload ``data`` (monolithic: POST, then PUT ?digest=); its digest."""
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        doing = f"the upload of blob {digest[:19]}... to {self.ref.repository}"
        head = self.request("HEAD", f"{self.url}/blobs/{digest}", doing)
        head.close()
        if head.status_code == 200:
            return digest  # already there
        start = self.request("POST", f"{self.url}/blobs/uploads/", doing)
        if start.status_code != 202 or not start.headers.get("Location"):
            raise self.fail(start, doing)
        start.close()
        location = _absolute(self.url, start.headers["Location"])
        sep = "&" if "?" in location else "?"
        done = self.request(
            "PUT",
            f"{location}{sep}digest={digest}",
            doing,
            data=data,
            headers={"Content-Type": "application/octet-stream"},
        )
        if done.status_code != 201:
            raise self.fail(done, doing)
        done.close()
        return digest

    def get_blob(self, digest: str, size: int | None = None) -> bytes:
        """The blob, at most ``size`` bytes (its descriptor's) and the blob bound, its
        sha256 checked as it arrives; EnvironmentFailure otherwise."""
        doing = f"reading blob {digest[:19]}... of {self.ref.repository}"
        resp = self.request("GET", f"{self.url}/blobs/{digest}", doing)
        if resp.status_code != 200:
            raise self.fail(resp, doing)
        return self.read(resp, "blob", doing, size=size, sha256=digest.partition(":")[2])

    def put_manifest(
        self, reference: str, manifest: bytes, media_type: str = MANIFEST_MEDIA_TYPE
    ) -> str:
        return self.put_manifest_answer(reference, manifest, media_type)[0]

    def put_manifest_if(
        self, reference: str, manifest: bytes, media_type: str, etag: str | None
    ) -> bool:
        """PUT the manifest only if ``reference`` is still the version whose ETag is
        ``etag`` (``If-Match``), or still absent (``etag`` None: ``If-None-Match: *``).
        False when the registry answers 412 (another writer came first). The
        distribution spec defines no conditional PUT: a registry that ignores these
        headers takes the PUT as it is (True), so a caller still reads back."""
        condition = {"If-Match": etag} if etag else {"If-None-Match": "*"}
        try:
            self.put_manifest_answer(reference, manifest, media_type, condition)
        except PreconditionFailed:
            return False
        return True

    def put_manifest_answer(
        self,
        reference: str,
        manifest: bytes,
        media_type: str = MANIFEST_MEDIA_TYPE,
        condition: dict[str, str] | None = None,
    ) -> tuple[str, str | None]:
        """(the manifest's digest, the ``OCI-Subject`` header the registry answered or None)."""
        doing = f"the manifest {self.ref.repository}:{reference}"
        resp = self.request(
            "PUT",
            f"{self.url}/manifests/{reference}",
            doing,
            data=manifest,
            headers={"Content-Type": media_type, **(condition or {})},
        )
        if resp.status_code == 412 and condition:
            resp.close()
            raise PreconditionFailed(f"{doing}: another writer changed it first")
        if resp.status_code != 201:
            raise self.fail(resp, doing)
        resp.close()
        digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
        return digest, resp.headers.get("OCI-Subject")


class PreconditionFailed(EnvironmentFailure):
    """A conditional PUT the registry refused (412): the manifest changed meanwhile."""


def _next_link(header: str, base: str) -> str | None:
    """The ``rel="next"`` URL of a ``Link`` header, absolute, on the registry's own
    host; None otherwise (RFC 8288, as the distribution spec pages referrers)."""
    from urllib.parse import urlsplit

    for part in header.split(","):
        target, _, params = part.partition(";")
        target = target.strip()
        if (
            target.startswith("<")
            and target.endswith(">")
            and 'rel="next"' in params.replace(" ", "")
        ):
            url = _absolute(base, target[1:-1])
            return url if urlsplit(url).netloc == urlsplit(base).netloc else None
    return None


def _absolute(base: str, location: str) -> str:
    from urllib.parse import urljoin

    return urljoin(base + "/", location)


def _registry_said(resp: requests.Response) -> str:
    """The registry's own error code and message, when it sent the v2 error JSON
    (its first 64 KiB read, the rest never; the response closed)."""
    from envlock.index.body import BodyError, read_body

    try:
        doc = json.loads(read_body(resp, "error"))
        first = doc["errors"][0]
        return f" ({first.get('code')}: {first.get('message')})"
    except (ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError):
        return ""
    except BodyError:
        return ""


def manifest_config_digest(
    pinned_ref: str | imageref.ImageRef, *, insecure: bool = False
) -> str | None:
    """The config digest ("sha256:<hex>") of the image manifest ``REPO@sha256:...``
    (Docker's schema 2 or OCI), or None when the registry holds no such manifest.

    The Docker Engine's image id is its config digest, so this is how a pushed
    manifest is tied to the local image a smoke test ran.
    """
    ref = pinned(pinned_ref)
    reg = _Registry(ref, insecure)
    doing = f"reading the manifest {ref}"
    try:
        resp = reg.request(
            "GET",
            f"{reg.url}/manifests/{ref.digest}",
            doing,
            headers={"Accept": f"{DOCKER_MANIFEST_MEDIA_TYPE}, {MANIFEST_MEDIA_TYPE}"},
        )
        if resp.status_code == 404:
            resp.close()
            return None
        if resp.status_code != 200:
            raise reg.fail(resp, doing)
        body = reg.read(resp, "manifest", doing, sha256=(ref.digest or "").partition(":")[2])
    finally:
        reg.close()
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        doc = None
    config = doc.get("config") if isinstance(doc, dict) else None
    digest = config.get("digest") if isinstance(config, dict) else None
    if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
        raise EnvironmentFailure(
            f"the registry {ref.registry} sent a manifest for {ref} without a config digest "
            "(an index or a schema 1 manifest?)",
            hint=_HINT,
        )
    return digest


def tag_digest(ref: imageref.ImageRef, *, insecure: bool = False) -> str | None:
    """The manifest digest a tag points at now (``Docker-Content-Digest`` of a HEAD),
    or None when the repository has no such tag."""
    if ref.tag is None or ref.registry is None:
        raise UsageError(f"{ref}: give REPO:TAG with its registry host", hint=_HINT)
    reg = _Registry(ref, insecure)
    doing = f"reading the tag {ref}"
    accept = f"{DOCKER_MANIFEST_MEDIA_TYPE}, {MANIFEST_MEDIA_TYPE}"
    try:
        resp = reg.request(
            "HEAD", f"{reg.url}/manifests/{ref.tag}", doing, headers={"Accept": accept}
        )
        resp.close()
        if resp.status_code == 404:
            return None
        if resp.status_code != 200:
            raise reg.fail(resp, doing)
        digest = resp.headers.get("Docker-Content-Digest")
    finally:
        reg.close()
    return digest if isinstance(digest, str) and _SHA256.fullmatch(digest) else None
