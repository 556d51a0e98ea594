"""Signed reports in a registry, laid out as cosign lays out attestations.

cosign keeps the attestations of an image ``REPO@sha256:<hex>`` in the same
repository, in an OCI image manifest tagged ``sha256-<hex>.att``; each
attestation is one layer of that manifest, whose blob is the DSSE envelope
itself (media type ``application/vnd.dsse.envelope.v1+json``), annotated with
its ``predicateType`` and an empty ``dev.cosignproject.cosign/signature`` (the
signature is inside the envelope). The config is a small OCI image config.
Sources: sigstore/cosign ``specs/ATTESTATION_SPEC.md`` (the manifest layout),
``pkg/oci/remote/remote.go`` (``normalize``: ``sha256-<hex>.att``),
``pkg/oci/static/signature.go`` (``NewAttestation``: the signature annotation,
empty) and ``cmd/cosign/cli/attest/attest.go`` (the ``predicateType`` layer
annotation; a new attestation is appended to the manifest's layers).

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
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
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
EMPTY_CONFIG = b"{}"
# cosign's annotations of a bundle manifest (sigstore/cosign specs/BUNDLE_SPEC.md)
BUNDLE_CONTENT_ANNOTATION = "dev.sigstore.bundle.content"
BUNDLE_PREDICATE_ANNOTATION = "dev.sigstore.bundle.predicateType"
CREATED_ANNOTATION = "org.opencontainers.image.created"
TITLE_ANNOTATION = "org.opencontainers.image.title"
MAX_REFERRERS = 100  # bundle manifests read from one referrers list
MAX_REFERRER_PAGES = 10  # pages of the referrers API followed (its Link header)
SIGNATURE_ANNOTATION = "dev.cosignproject.cosign/signature"
PREDICATE_TYPE_ANNOTATION = "predicateType"
ATTESTATION_SUFFIX = "att"
MAX_ATTESTATION_LAYERS = 100  # distinct DSSE layers read from one .att manifest
MAX_ATTESTATION_BYTES = 64 * 1024 * 1024  # their stated sizes in all
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


def attestation_tag(digest: str) -> str:
    """cosign's tag for the attestations of manifest ``sha256:<hex>``: ``sha256-<hex>.att``."""
    algo, _, hexpart = digest.partition(":")
    return f"{algo}-{hexpart}.{ATTESTATION_SUFFIX}"


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

    def close(self) -> None:
        self.sess.close()

    def request(self, method: str, url: str, doing: str, **kwargs: Any) -> requests.Response:
        """The response, its body not read (``fail`` or ``read`` reads it, bounded); a 401
        is answered once per challenge (scheme and scope) with Docker's credentials,
        then the request is sent again."""
        from urllib.parse import urlsplit

        headers = dict(kwargs.pop("headers", None) or {})
        kwargs["stream"] = True  # every body goes through http.read_body
        same_host = urlsplit(url).netloc == urlsplit(self.url).netloc  # no token elsewhere
        answered = 0
        while True:
            if self.authorization and same_host:
                headers["Authorization"] = self.authorization
            resp = self._send(method, url, doing, headers=headers, **kwargs)
            done = (
                resp.status_code != 401
                or not same_host
                or answered == _MAX_CHALLENGES
                or not self._authenticate(resp)
            )
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
        """The body through ``http.read_body`` (bounded, the sha256 checked as it
        arrives); past its bound or not what was stated: EnvironmentFailure."""
        from envlock.index import http

        try:
            return http.read_body(resp, kind, size=size, sha256=sha256)
        except http.BodyError as e:
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

    def put_manifest_answer(
        self, reference: str, manifest: bytes, media_type: str = MANIFEST_MEDIA_TYPE
    ) -> tuple[str, str | None]:
        """(the manifest's digest, the ``OCI-Subject`` header the registry answered or None)."""
        doing = f"the manifest {self.ref.repository}:{reference}"
        resp = self.request(
            "PUT",
            f"{self.url}/manifests/{reference}",
            doing,
            data=manifest,
            headers={"Content-Type": media_type},
        )
        if resp.status_code != 201:
            raise self.fail(resp, doing)
        resp.close()
        digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
        return digest, resp.headers.get("OCI-Subject")


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
    from envlock.index import http

    try:
        doc = json.loads(http.read_body(resp, "error"))
        first = doc["errors"][0]
        return f" ({first.get('code')}: {first.get('message')})"
    except (ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError):
        return ""
    except http.BodyError:
        return ""


def attestation_manifest(
    layers: Sequence[Mapping[str, object]], config_digest: str, config_size: int
) -> ImageManifest:
    """The OCI image manifest that carries attestation layers (cosign's layout)."""
    return {
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "config": {"mediaType": CONFIG_MEDIA_TYPE, "size": config_size, "digest": config_digest},
        "layers": list(layers),
    }


def attestation_config(layers: Sequence[Mapping[str, object]]) -> bytes:
    """A small OCI image config naming the layers (uncompressed: diff id = digest)."""
    doc = {
        "architecture": "",
        "os": "",
        "config": {},
        "rootfs": {"type": "layers", "diff_ids": [layer["digest"] for layer in layers]},
    }
    return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()


def attach_attestation(
    pinned_ref: str | imageref.ImageRef,
    envelope: bytes,
    predicate_type: str,
    *,
    insecure: bool = False,
) -> str:
    """Attach a DSSE ``envelope`` to the image ``REPO@sha256:<hex>`` as cosign does.

    The envelope becomes a layer of the manifest tagged ``sha256-<hex>.att``
    in the same repository; attestations already there are kept (the same
    envelope twice is one layer). Returns the tag reference
    (``REPO:sha256-<hex>.att``). Registry failures are EnvironmentFailure
    (exit 3); a reference without digest or registry host is UsageError.
    """
    ref = pinned(pinned_ref)
    assert ref.digest is not None
    tag = attestation_tag(ref.digest)
    reg = _Registry(ref, insecure, actions="pull,push")
    try:
        existing = reg.get_manifest(tag)
        layers: list[Mapping[str, object]] = []
        if existing is not None:
            old = existing.get("layers")
            layers = [x for x in old if isinstance(x, dict)] if isinstance(old, list) else []
        digest = reg.put_blob(envelope)
        if not any(layer.get("digest") == digest for layer in layers):
            layers.append(
                {
                    "mediaType": DSSE_MEDIA_TYPE,
                    "size": len(envelope),
                    "digest": digest,
                    "annotations": {
                        SIGNATURE_ANNOTATION: "",
                        PREDICATE_TYPE_ANNOTATION: predicate_type,
                    },
                }
            )
        config = attestation_config(layers)
        config_digest = reg.put_blob(config)
        manifest = attestation_manifest(layers, config_digest, len(config))
        reg.put_manifest(tag, json.dumps(manifest, separators=(",", ":")).encode())
    finally:
        reg.close()
    return str(imageref.ImageRef(ref.repository, tag))


@dataclass(frozen=True)
class Attestation:
    """One DSSE layer of an ``.att`` manifest: its bytes, or why they were not read."""

    index: int  # 1-based, among the manifest's distinct DSSE layers
    of: int  # how many distinct DSSE layers the manifest lists
    digest: str  # the layer's (the blob's) digest
    data: bytes | None = None
    problem: str = ""  # why ``data`` is None ("not read: ...")
    layout: str = "legacy"  # legacy (.att) | referrers API | referrers tag
    manifest: str = ""  # the bundle manifest's digest (referrers layouts)


def _layer_problem(digest: object, size: object) -> str:
    """Why a DSSE layer's descriptor is not followed, or ""."""
    from envlock.index import http

    if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
        return f"its descriptor names the digest {str(digest)[:80]!r}, not sha256:<64 hex>"
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        return f"its descriptor states no size ({str(size)[:40]!r})"
    if size > http.LIMITS["blob"]:
        return f"its descriptor states {size} bytes, past the 17 MiB bound of a report"
    return ""


def iter_attestations(
    pinned_ref: str | imageref.ImageRef, *, insecure: bool = False
) -> Iterator[Attestation]:
    """The DSSE layers attached to ``REPO@sha256:<hex>`` (cosign's layout), oldest first,
    read one at a time (a caller keeps at most one in memory).

    No ``sha256-<hex>.att`` manifest yields nothing. A layer listed twice is
    one attestation, read once; at most ``MAX_ATTESTATION_LAYERS`` layers and
    ``MAX_ATTESTATION_BYTES`` of stated sizes in all are read, the rest yielded
    with the bound as their ``problem``. Each blob is read through
    ``http.read_body``: no longer than its descriptor states, its sha256
    checked as it arrives; a blob that is not what its descriptor says, or that
    the registry refuses, is a ``problem`` of that layer and the next one is
    read. A registry that cannot be reached is EnvironmentFailure (exit 3).
    Only DSSE layers are yielded (cosign may keep other kinds there).
    """
    from envlock.index import http

    ref = pinned(pinned_ref)
    assert ref.digest is not None
    reg = _Registry(ref, insecure)
    try:
        manifest = reg.get_manifest(attestation_tag(ref.digest))
        listed = manifest.get("layers") if manifest is not None else None
        layers: dict[str, object] = {}  # digest -> size, in order, each digest once
        for layer in listed if isinstance(listed, list) else []:
            if isinstance(layer, dict) and layer.get("mediaType") == DSSE_MEDIA_TYPE:
                key = layer.get("digest")
                layers.setdefault(key if isinstance(key, str) else repr(key), layer.get("size"))
        total = 0
        for i, (digest, size) in enumerate(layers.items(), 1):
            if i > MAX_ATTESTATION_LAYERS:
                yield Attestation(
                    i,
                    len(layers),
                    digest,
                    problem=f"not read, nor the {len(layers) - i} after it: past the bound of "
                    f"{MAX_ATTESTATION_LAYERS} layers read from one attestation manifest",
                )
                return
            problem = _layer_problem(digest, size)
            if not problem and isinstance(size, int) and total + size > MAX_ATTESTATION_BYTES:
                problem = (
                    f"its {size} bytes would pass the {MAX_ATTESTATION_BYTES // http.MIB} MiB "
                    "bound of all the layers read from one attestation manifest"
                )
            if problem or not isinstance(size, int):  # (no problem: size is an int)
                yield Attestation(i, len(layers), digest, problem=f"not read: {problem}")
                continue
            total += size
            doing = f"reading blob {digest[:19]}... of {ref.repository}"
            resp = reg.request("GET", f"{reg.url}/blobs/{digest}", doing)
            if resp.status_code != 200:
                said = _registry_said(resp)
                yield Attestation(
                    i, len(layers), digest, problem=f"not read: HTTP {resp.status_code}{said}"
                )
                continue
            try:
                data = http.read_body(resp, "blob", size=size, sha256=digest.partition(":")[2])
            except http.BodyError as e:
                yield Attestation(
                    i, len(layers), digest, problem=f"not read: the registry sent {e}"
                )
                continue
            yield Attestation(i, len(layers), digest, data)
            del data
    finally:
        reg.close()


def fetch_attestations(
    pinned_ref: str | imageref.ImageRef, *, insecure: bool = False
) -> list[bytes]:
    """The DSSE envelopes ``iter_attestations`` reads (those it could), oldest first."""
    return [a.data for a in iter_attestations(pinned_ref, insecure=insecure) if a.data is not None]


DOCKER_MANIFEST_MEDIA_TYPE = "application/vnd.docker.distribution.manifest.v2+json"


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


# ------------------------------------------------- Sigstore bundles as OCI 1.1 referrers
#
# cosign v3's layout (sigstore/cosign specs/BUNDLE_SPEC.md): the bundle is one
# layer (media type = the bundle's) of an OCI image manifest whose
# ``artifactType`` is the bundle media type, whose config is the empty
# descriptor and whose ``subject`` is the image manifest; the manifest carries
# ``dev.sigstore.bundle.content``, ``dev.sigstore.bundle.predicateType`` and
# ``org.opencontainers.image.created``. It is pushed by digest. A registry with
# the referrers API answers that PUT with an ``OCI-Subject`` header and lists it
# under ``GET /v2/<name>/referrers/<digest>``; one without it (Debian's
# docker-registry 2.8, GHCR) gets the referrers tag schema: an OCI image index
# tagged ``sha256-<hex>`` listing a descriptor of each referrer (with its
# artifactType and annotations), which the client reads, updates and pushes
# again (opencontainers/distribution-spec spec.md, "Pushing Manifests with
# Subject" and "Referrers Tag Schema").


def referrers_tag(digest: str) -> str:
    """The referrers tag schema's tag for manifest ``sha256:<hex>``: ``sha256-<hex>``."""
    algo, _, hexpart = digest.partition(":")
    return f"{algo}-{hexpart}"


def empty_descriptor() -> Descriptor:
    return {
        "mediaType": EMPTY_MEDIA_TYPE,
        "digest": "sha256:" + hashlib.sha256(EMPTY_CONFIG).hexdigest(),
        "size": len(EMPTY_CONFIG),
    }


def bundle_manifest(
    subject: Descriptor, bundle: bytes, predicate_type: str, created: str
) -> ImageManifest:
    """The OCI artifact manifest that attaches ``bundle`` to ``subject`` (a descriptor)."""
    digest = "sha256:" + hashlib.sha256(bundle).hexdigest()
    return {
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "artifactType": BUNDLE_MEDIA_TYPE,
        "config": empty_descriptor(),
        "layers": [
            {
                "mediaType": BUNDLE_MEDIA_TYPE,
                "digest": digest,
                "size": len(bundle),
                "annotations": {TITLE_ANNOTATION: f"{referrers_tag(digest)}.sigstore.json"},
            }
        ],
        "subject": subject,
        "annotations": {
            BUNDLE_CONTENT_ANNOTATION: "dsse-envelope",
            BUNDLE_PREDICATE_ANNOTATION: predicate_type,
            CREATED_ANNOTATION: created,
        },
    }


@dataclass(frozen=True)
class Attached:
    """Where ``attach_bundle`` put a bundle."""

    manifest: str  # REPO@sha256:<bundle manifest digest>
    layout: str  # "referrers API" | "referrers tag"
    index: str | None = None  # REPO:sha256-<hex> (the tag schema's index), when written


def attach_bundle(
    pinned_ref: str | imageref.ImageRef,
    bundle: bytes,
    predicate_type: str,
    *,
    created: str,
    insecure: bool = False,
) -> Attached:
    """Attach a Sigstore ``bundle`` to ``REPO@sha256:<hex>`` as an OCI 1.1 referrer.

    The image manifest is read (HEAD: its media type and size make the
    ``subject`` descriptor); the bundle and the empty config are uploaded; the
    artifact manifest is put by digest. Without an ``OCI-Subject`` answer the
    referrers tag schema's index ``sha256-<hex>`` is read, the new descriptor
    added (one already listed with the same digest is replaced), and pushed
    again. Registry failures are EnvironmentFailure (exit 3).
    """
    ref = pinned(pinned_ref)
    assert ref.digest is not None
    reg = _Registry(ref, insecure, actions="pull,push")
    try:
        subject = reg.descriptor(ref.digest)
        reg.put_blob(EMPTY_CONFIG)
        reg.put_blob(bundle)
        manifest = bundle_manifest(subject, bundle, predicate_type, created)
        body = json.dumps(manifest, separators=(",", ":")).encode()
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        _, answered = reg.put_manifest_answer(digest, body)
        at = str(imageref.ImageRef(ref.repository, None, digest))
        if answered == ref.digest:
            return Attached(at, "referrers API")
        tag = referrers_tag(ref.digest)
        index = reg.get_manifest(tag, f"{INDEX_MEDIA_TYPE}, {MANIFEST_MEDIA_TYPE}")
        listed = index.get("manifests") if index is not None else None
        if index is not None and index.get("mediaType") not in (None, INDEX_MEDIA_TYPE):
            listed = None  # not an index: replaced, as the spec allows for a tag it owns
        entries: list[Mapping[str, object]] = [
            m
            for m in (listed if isinstance(listed, list) else [])
            if isinstance(m, dict) and m.get("digest") != digest
        ]
        entries.append(
            {
                "mediaType": MANIFEST_MEDIA_TYPE,
                "digest": digest,
                "size": len(body),
                "artifactType": BUNDLE_MEDIA_TYPE,
                "annotations": manifest["annotations"],
            }
        )
        doc: ImageIndex = {"schemaVersion": 2, "mediaType": INDEX_MEDIA_TYPE, "manifests": entries}
        reg.put_manifest(tag, json.dumps(doc, separators=(",", ":")).encode(), INDEX_MEDIA_TYPE)
        return Attached(at, "referrers tag", str(imageref.ImageRef(ref.repository, tag)))
    finally:
        reg.close()


def _bundle_entries(listing: Mapping[str, object], entries: dict[str, object]) -> None:
    """Add the bundle manifests an index lists to ``entries`` (digest -> size, each
    digest once, in order; at most one past ``MAX_REFERRERS``)."""
    listed = listing.get("manifests")
    for m in listed if isinstance(listed, list) else []:
        if len(entries) > MAX_REFERRERS:
            return
        if isinstance(m, dict) and m.get("artifactType") == BUNDLE_MEDIA_TYPE:
            key = m.get("digest")
            entries.setdefault(key if isinstance(key, str) else repr(key), m.get("size"))


def _descriptor_problem(digest: object, size: object, kind: str) -> str:
    from envlock.index import http

    if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
        return f"its descriptor names the digest {str(digest)[:80]!r}, not sha256:<64 hex>"
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        return f"its descriptor states no size ({str(size)[:40]!r})"
    if size > http.LIMITS[kind]:
        bound = http.LIMITS[kind] // http.MIB
        return f"its descriptor states {size} bytes, past the {bound} MiB bound"
    return ""


def iter_bundles(
    pinned_ref: str | imageref.ImageRef, *, insecure: bool = False
) -> Iterator[Attestation]:
    """The Sigstore bundles attached to ``REPO@sha256:<hex>`` as OCI 1.1 referrers,
    listed by the referrers API or, where the registry has none (404), by the
    referrers tag schema's index; read one at a time (a caller keeps one in memory).

    Each listed manifest of ``artifactType`` bundle (at most ``MAX_REFERRERS``)
    is read through the bounded reader, its sha256 checked; its subject must be
    this image and its first bundle layer is read no longer than its descriptor
    says (``MAX_ATTESTATION_BYTES`` in all), its sha256 checked as it arrives.
    Anything else is that entry's ``problem`` and the next one is read. A
    registry that cannot be reached for the list is EnvironmentFailure (exit 3).
    """
    from envlock.index import http

    ref = pinned(pinned_ref)
    assert ref.digest is not None
    reg = _Registry(ref, insecure)
    try:
        entries: dict[str, object] = {}  # manifest digest -> size, each once, in order
        listing = reg.get_manifest(ref.digest, INDEX_MEDIA_TYPE, path="referrers")
        layout = "referrers API"
        if listing is None:
            listing = reg.get_manifest(
                referrers_tag(ref.digest), f"{INDEX_MEDIA_TYPE}, {MANIFEST_MEDIA_TYPE}"
            )
            layout = "referrers tag"
        pages = 1
        while listing is not None:
            _bundle_entries(listing, entries)
            # the API may page a long list (its Link header): pages are followed while
            # they can add to what is read (MAX_REFERRERS), MAX_REFERRER_PAGES at most,
            # one page in memory at a time
            if not reg.next_page or pages == MAX_REFERRER_PAGES or len(entries) > MAX_REFERRERS:
                break
            listing = reg.get_manifest(
                ref.digest, INDEX_MEDIA_TYPE, path="referrers", url=reg.next_page
            )
            pages += 1
        del listing
        total = 0
        n = len(entries)
        for i, (mdigest, msize) in enumerate(entries.items(), 1):

            def skipped(problem: str, layer: str = "", i: int = i, m: str = mdigest) -> Attestation:
                return Attestation(i, n, layer, problem=problem, layout=layout, manifest=m)

            if i > MAX_REFERRERS:
                yield skipped(
                    f"not read, nor any after it: past the bound of {MAX_REFERRERS} "
                    "bundles read from one referrers list"
                )
                return
            problem = _descriptor_problem(mdigest, msize, "manifest")
            if problem:
                yield skipped(f"not read: {problem}")
                continue
            try:
                manifest = reg.get_manifest(mdigest)
            except EnvironmentFailure as e:
                yield skipped(f"not read: {e.message}")
                continue
            if manifest is None:
                yield skipped("not read: the registry has no such manifest (HTTP 404)")
                continue
            subject = manifest.get("subject")
            named = subject.get("digest") if isinstance(subject, dict) else None
            if named != ref.digest:
                yield skipped(f"not read: its subject is {str(named)[:80]}, not {ref.digest}")
                continue
            layers = manifest.get("layers")
            layer = next(
                (
                    x
                    for x in (layers if isinstance(layers, list) else [])
                    if isinstance(x, dict) and x.get("mediaType") == BUNDLE_MEDIA_TYPE
                ),
                None,
            )
            if layer is None:
                yield skipped("not read: the manifest has no layer of the bundle media type")
                continue
            ldigest, lsize = layer.get("digest"), layer.get("size")
            shown = ldigest if isinstance(ldigest, str) else repr(ldigest)
            problem = _descriptor_problem(ldigest, lsize, "blob")
            if not problem and total + int(lsize or 0) > MAX_ATTESTATION_BYTES:
                problem = (
                    f"its {lsize} bytes would pass the {MAX_ATTESTATION_BYTES // http.MIB} MiB "
                    "bound of all the bundles read for one image"
                )
            if problem or not isinstance(ldigest, str) or not isinstance(lsize, int):
                yield skipped(f"not read: {problem}", shown)
                continue
            total += lsize
            doing = f"reading blob {ldigest[:19]}... of {ref.repository}"
            resp = reg.request("GET", f"{reg.url}/blobs/{ldigest}", doing)
            if resp.status_code != 200:
                yield skipped(f"not read: HTTP {resp.status_code}{_registry_said(resp)}", shown)
                continue
            try:
                data = http.read_body(resp, "blob", size=lsize, sha256=ldigest.partition(":")[2])
            except http.BodyError as e:
                yield skipped(f"not read: the registry sent {e}", shown)
                continue
            yield Attestation(i, n, ldigest, data, layout=layout, manifest=mdigest)
            del data
    finally:
        reg.close()
