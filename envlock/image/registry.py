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
from typing import TYPE_CHECKING, Any

from envlock.errors import EnvironmentFailure, UsageError
from envlock.image import ref as imageref
from envlock.image import registry_auth

if TYPE_CHECKING:
    import requests

DSSE_MEDIA_TYPE = "application/vnd.dsse.envelope.v1+json"
CONFIG_MEDIA_TYPE = "application/vnd.oci.image.config.v1+json"
MANIFEST_MEDIA_TYPE = "application/vnd.oci.image.manifest.v1+json"
SIGNATURE_ANNOTATION = "dev.cosignproject.cosign/signature"
PREDICATE_TYPE_ANNOTATION = "predicateType"
ATTESTATION_SUFFIX = "att"
MAX_MANIFEST_BYTES = 4 * 1024 * 1024
MAX_BLOB_BYTES = 17 * 1024 * 1024  # the envelope bound of envlock.report.strict
_HINT = "check that the registry runs and accepts pushes"
_MAX_CHALLENGES = 3  # 401s answered for one request (a new scope each), then its answer stands


def attestation_tag(digest: str) -> str:
    """cosign's tag for the attestations of manifest ``sha256:<hex>``: ``sha256-<hex>.att``."""
    algo, _, hexpart = digest.partition(":")
    return f"{algo}-{hexpart}.{ATTESTATION_SUFFIX}"


def pinned(pinned_ref: str, what: str = "--image") -> imageref.ImageRef:
    """A reference with a registry host and a manifest digest, or UsageError (exit 2)."""
    ref = imageref.parse(pinned_ref, what)
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

    def close(self) -> None:
        self.sess.close()

    def request(self, method: str, url: str, doing: str, **kwargs: Any) -> requests.Response:
        """The response; a 401 is answered once per challenge (scheme and scope) with
        Docker's credentials, then the request is sent again."""
        from urllib.parse import urlsplit

        headers = dict(kwargs.pop("headers", None) or {})
        same_host = urlsplit(url).netloc == urlsplit(self.url).netloc  # no token elsewhere
        answered = 0
        while True:
            if self.authorization and same_host:
                headers["Authorization"] = self.authorization
            resp = self._send(method, url, doing, headers=headers, **kwargs)
            if (
                resp.status_code != 401
                or not same_host
                or answered == _MAX_CHALLENGES
                or not self._authenticate(resp)
            ):
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

    def read(self, resp: requests.Response, limit: int, doing: str) -> bytes:
        import requests

        chunks: list[bytes] = []
        size = 0
        try:
            for chunk in resp.iter_content(65536):
                size += len(chunk)
                if size > limit:
                    raise EnvironmentFailure(
                        f"the registry {self.ref.registry} sent more than {limit} bytes {doing}",
                        hint=_HINT,
                    )
                chunks.append(chunk)
        except requests.RequestException as e:
            raise EnvironmentFailure(
                f"the registry {self.ref.registry} broke off {doing}: {e}", hint=_HINT
            ) from e
        finally:
            resp.close()
        return b"".join(chunks)

    def get_manifest(self, reference: str) -> dict[str, Any] | None:
        """The manifest at a tag or digest, or None when there is none."""
        doing = f"reading the manifest {self.ref.repository}:{reference}"
        resp = self.request(
            "GET",
            f"{self.url}/manifests/{reference}",
            doing,
            headers={"Accept": MANIFEST_MEDIA_TYPE},
            stream=True,
        )
        if resp.status_code == 404:
            resp.close()
            return None
        if resp.status_code != 200:
            resp.close()
            raise self.fail(resp, doing)
        body = self.read(resp, MAX_MANIFEST_BYTES, doing)
        try:
            doc = json.loads(body)
        except ValueError as e:
            raise EnvironmentFailure(
                f"the registry {self.ref.registry} sent a manifest that is not JSON ({doing})",
                hint=_HINT,
            ) from e
        if not isinstance(doc, dict):
            raise EnvironmentFailure(f"{doing}: the manifest is not a JSON object", hint=_HINT)
        return doc

    def put_blob(self, data: bytes) -> str:
        """Upload ``data`` (monolithic: POST, then PUT ?digest=); its digest."""
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        doing = f"the upload of blob {digest[:19]}... to {self.ref.repository}"
        head = self.request("HEAD", f"{self.url}/blobs/{digest}", doing)
        if head.status_code == 200:
            return digest  # already there
        start = self.request("POST", f"{self.url}/blobs/uploads/", doing)
        if start.status_code != 202 or not start.headers.get("Location"):
            raise self.fail(start, doing)
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
        return digest

    def get_blob(self, digest: str) -> bytes:
        doing = f"reading blob {digest[:19]}... of {self.ref.repository}"
        resp = self.request("GET", f"{self.url}/blobs/{digest}", doing, stream=True)
        if resp.status_code != 200:
            resp.close()
            raise self.fail(resp, doing)
        data = self.read(resp, MAX_BLOB_BYTES, doing)
        if "sha256:" + hashlib.sha256(data).hexdigest() != digest:
            raise EnvironmentFailure(
                f"the registry {self.ref.registry} sent bytes whose sha256 is not {digest} "
                f"({doing})",
                hint=_HINT,
            )
        return data

    def put_manifest(self, reference: str, manifest: bytes) -> str:
        doing = f"the manifest {self.ref.repository}:{reference}"
        resp = self.request(
            "PUT",
            f"{self.url}/manifests/{reference}",
            doing,
            data=manifest,
            headers={"Content-Type": MANIFEST_MEDIA_TYPE},
        )
        if resp.status_code != 201:
            raise self.fail(resp, doing)
        return resp.headers.get("Docker-Content-Digest") or (
            "sha256:" + hashlib.sha256(manifest).hexdigest()
        )


def _absolute(base: str, location: str) -> str:
    from urllib.parse import urljoin

    return urljoin(base + "/", location)


def _registry_said(resp: requests.Response) -> str:
    """The registry's own error code and message, when it sent the v2 error JSON."""
    try:
        doc = json.loads(resp.content[:65536])
        first = doc["errors"][0]
        return f" ({first.get('code')}: {first.get('message')})"
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return ""


def attestation_manifest(
    layers: list[dict[str, Any]], config_digest: str, config_size: int
) -> dict[str, Any]:
    """The OCI image manifest that carries attestation layers (cosign's layout)."""
    return {
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "config": {"mediaType": CONFIG_MEDIA_TYPE, "size": config_size, "digest": config_digest},
        "layers": layers,
    }


def attestation_config(layers: list[dict[str, Any]]) -> bytes:
    """A small OCI image config naming the layers (uncompressed: diff id = digest)."""
    doc = {
        "architecture": "",
        "os": "",
        "config": {},
        "rootfs": {"type": "layers", "diff_ids": [layer["digest"] for layer in layers]},
    }
    return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()


def attach_attestation(
    pinned_ref: str, envelope: bytes, predicate_type: str, *, insecure: bool = False
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
        layers: list[dict[str, Any]] = []
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
    return f"{ref.repository}:{tag}"


def fetch_attestations(pinned_ref: str, *, insecure: bool = False) -> list[bytes]:
    """The DSSE envelopes attached to ``REPO@sha256:<hex>`` (cosign's layout), oldest first.

    No ``sha256-<hex>.att`` manifest is an empty list. Each blob's bytes are
    checked against the digest the manifest names. Only DSSE layers are
    returned (cosign may keep other kinds there).
    """
    ref = pinned(pinned_ref)
    assert ref.digest is not None
    reg = _Registry(ref, insecure)
    try:
        manifest = reg.get_manifest(attestation_tag(ref.digest))
        if manifest is None:
            return []
        layers = manifest.get("layers")
        out: list[bytes] = []
        for layer in layers if isinstance(layers, list) else []:
            if not isinstance(layer, dict) or layer.get("mediaType") != DSSE_MEDIA_TYPE:
                continue
            digest = layer.get("digest")
            if not isinstance(digest, str) or not imageref.match(f"x@{digest}"):
                raise EnvironmentFailure(
                    f"the attestation manifest of {pinned_ref} names a layer digest {digest!r}",
                    hint=_HINT,
                )
            out.append(reg.get_blob(digest))
        return out
    finally:
        reg.close()
