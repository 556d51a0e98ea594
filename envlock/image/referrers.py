"""Sigstore bundles attached to an image as OCI 1.1 referrers.

cosign v3's layout (sigstore/cosign specs/BUNDLE_SPEC.md): the bundle is one
layer (media type = the bundle's) of an OCI image manifest whose
``artifactType`` is the bundle media type, whose config is the empty
descriptor and whose ``subject`` is the image manifest; the manifest carries
``dev.sigstore.bundle.content``, ``dev.sigstore.bundle.predicateType`` and
``org.opencontainers.image.created``. It is pushed by digest. A registry with
the referrers API answers that PUT with an ``OCI-Subject`` header and lists it
under ``GET /v2/<name>/referrers/<digest>``; one without it (Debian's
docker-registry 2.8, GHCR) gets the referrers tag schema: an OCI image index
tagged ``sha256-<hex>`` listing a descriptor of each referrer (with its
artifactType and annotations), which the client reads, updates and pushes
again (opencontainers/distribution-spec spec.md, "Pushing Manifests with
Subject" and "Referrers Tag Schema").

The registry calls are ``envlock.image.registry``'s client.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from envlock.errors import EnvironmentFailure
from envlock.image import ref as imageref
from envlock.image.registry import (
    _SHA256,
    BUNDLE_MEDIA_TYPE,
    EMPTY_MEDIA_TYPE,
    INDEX_MEDIA_TYPE,
    MANIFEST_MEDIA_TYPE,
    MAX_ATTESTATION_BYTES,
    Attestation,
    Descriptor,
    ImageIndex,
    ImageManifest,
    _Registry,
    _registry_said,
    pinned,
)

EMPTY_CONFIG = b"{}"
# cosign's annotations of a bundle manifest (sigstore/cosign specs/BUNDLE_SPEC.md)
BUNDLE_CONTENT_ANNOTATION = "dev.sigstore.bundle.content"
BUNDLE_PREDICATE_ANNOTATION = "dev.sigstore.bundle.predicateType"
CREATED_ANNOTATION = "org.opencontainers.image.created"
TITLE_ANNOTATION = "org.opencontainers.image.title"
MAX_REFERRERS = 100  # bundle manifests read from one referrers list
MAX_REFERRER_PAGES = 10  # pages of the referrers API followed (its Link header)


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
        entry: Mapping[str, object] = {
            "mediaType": MANIFEST_MEDIA_TYPE,
            "digest": digest,
            "size": len(body),
            "artifactType": BUNDLE_MEDIA_TYPE,
            "annotations": manifest["annotations"],
        }
        _add_to_tag_index(reg, tag, entry)
        return Attached(at, "referrers tag", str(imageref.ImageRef(ref.repository, tag)))
    finally:
        reg.close()


TAG_INDEX_TRIES = 6  # read-backs that found the entry gone (registries without If-Match)
TAG_INDEX_REFUSALS = 64  # 412s: each one means another writer's entry landed


def _listed(index: Mapping[str, object] | None) -> list[Mapping[str, object]]:
    listed = index.get("manifests") if index is not None else None
    if index is not None and index.get("mediaType") not in (None, INDEX_MEDIA_TYPE):
        listed = None  # not an index: replaced, as the spec allows for a tag it owns
    return [m for m in (listed if isinstance(listed, list) else []) if isinstance(m, dict)]


def _add_to_tag_index(reg: _Registry, tag: str, entry: Mapping[str, object]) -> None:
    """Add ``entry`` to the referrers tag schema's index ``tag`` (one already listed
    with the same digest is replaced): read, add, put, then read back.

    Two attaches at once each wrote an index without the other's entry (issue
    #38: 16 at once lost 5). The PUT is conditional where the registry allows:
    ``If-Match`` with the ETag the index was read with (``If-None-Match: *``
    when there was none), so a registry that honours it answers 412 to the
    writer that read an older index, which reads again and adds its entry to
    the newer one (``TAG_INDEX_REFUSALS`` times at most). The distribution spec
    defines no conditional PUT, and Debian's registry ignores the headers and
    sends no ETag, so the index is also read back after a short random pause;
    an entry missing there is added again, up to ``TAG_INDEX_TRIES`` times;
    still missing is an EnvironmentFailure (exit 3), never a success that lost
    the report. A registry that refuses a condition naming the ETag it just
    sent (a broken If-Match) is written to without one from then on."""
    import random
    import time

    accept = f"{INDEX_MEDIA_TYPE}, {MANIFEST_MEDIA_TYPE}"
    digest = entry["digest"]
    conditional = True
    refused_etag: str | None = None
    refusals = 0
    tries = 0
    while tries < TAG_INDEX_TRIES:
        current = reg.get_manifest(tag, accept)
        etag = reg.etag
        if refused_etag is not None and etag == refused_etag:
            conditional = False  # 412 to the ETag the registry still sends: If-Match is broken
        entries = [m for m in _listed(current) if m.get("digest") != digest]
        entries.append(entry)
        doc: ImageIndex = {"schemaVersion": 2, "mediaType": INDEX_MEDIA_TYPE, "manifests": entries}
        body = json.dumps(doc, separators=(",", ":")).encode()
        if conditional and (etag is not None or current is None):
            if not reg.put_manifest_if(tag, body, INDEX_MEDIA_TYPE, etag):
                refusals += 1
                refused_etag = etag
                if refusals >= TAG_INDEX_REFUSALS:
                    break
                time.sleep(random.uniform(0, 0.02) * min(refusals, 10))
                continue  # another writer's index landed first: add to that one
        else:
            reg.put_manifest(tag, body, INDEX_MEDIA_TYPE)
        tries += 1
        # let a writer that read the index before our PUT land its own, then look
        time.sleep(random.uniform(0.05, 0.25) * tries)
        if any(m.get("digest") == digest for m in _listed(reg.get_manifest(tag, accept))):
            # and once more, later: a writer that read before our PUT may land after
            # the first look (a run of 12 at once lost one entry to that)
            time.sleep(random.uniform(0.3, 0.6))
            if any(m.get("digest") == digest for m in _listed(reg.get_manifest(tag, accept))):
                return
    raise EnvironmentFailure(
        f"the referrers tag index {reg.ref.repository}:{tag} lost the entry {digest} "
        f"{tries} times and refused it {refusals} times (other writers replaced the index "
        "each time)",
        hint="run the same report attach again once the other attaches have ended "
        "(the bundle itself is in the registry already)",
    )


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
    from envlock.index.body import BodyError, read_body

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

            def skipped(
                problem: str, layer: str = "", i: int = i, m: str = mdigest, outage: bool = False
            ) -> Attestation:
                return Attestation(
                    i, n, layer, problem=problem, layout=layout, manifest=m, outage=outage
                )

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
                data = read_body(resp, "blob", size=lsize, sha256=ldigest.partition(":")[2])
            except BodyError as e:
                yield skipped(f"not read: the registry sent {e}", shown, outage=True)
                continue
            yield Attestation(i, n, ldigest, data, layout=layout, manifest=mdigest)
            del data
    finally:
        reg.close()
