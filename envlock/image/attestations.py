"""Signed reports in a registry, laid out as cosign lays out attestations
(its legacy ``.att`` layout; the OCI 1.1 referrers layout is ``envlock.image.referrers``).

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

The registry calls are ``envlock.image.registry``'s client.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence

from envlock.image import ref as imageref
from envlock.image.registry import (
    _SHA256,
    CONFIG_MEDIA_TYPE,
    DSSE_MEDIA_TYPE,
    MANIFEST_MEDIA_TYPE,
    MAX_ATTESTATION_BYTES,
    Attestation,
    ImageManifest,
    _Registry,
    _registry_said,
    pinned,
)

SIGNATURE_ANNOTATION = "dev.cosignproject.cosign/signature"
PREDICATE_TYPE_ANNOTATION = "predicateType"
ATTESTATION_SUFFIX = "att"
MAX_ATTESTATION_LAYERS = 100  # distinct DSSE layers read from one .att manifest


def attestation_tag(digest: str) -> str:
    """cosign's tag for the attestations of manifest ``sha256:<hex>``: ``sha256-<hex>.att``."""
    algo, _, hexpart = digest.partition(":")
    return f"{algo}-{hexpart}.{ATTESTATION_SUFFIX}"


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
    ``body.read_body``: no longer than its descriptor states, its sha256
    checked as it arrives; a blob that is not what its descriptor says, or that
    the registry refuses, is a ``problem`` of that layer and the next one is
    read. A registry that cannot be reached is EnvironmentFailure (exit 3).
    Only DSSE layers are yielded (cosign may keep other kinds there).
    """
    from envlock.index import http
    from envlock.index.body import BodyError, read_body

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
                data = read_body(resp, "blob", size=size, sha256=digest.partition(":")[2])
            except BodyError as e:
                yield Attestation(
                    i, len(layers), digest, problem=f"not read: the registry sent {e}", outage=True
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
