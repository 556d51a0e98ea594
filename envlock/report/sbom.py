"""A CycloneDX 1.6 SBOM of an image: the locked closure and the base image's OS packages.

The Python components come from the lock (``pylock.toml``: name, version, every
wheel's sha256 and URL, the dependency graph); the OS components from the
image's own package database (``/var/lib/dpkg/status``, copied out of a
container that is created and never started), each named by a package URL
(``pkg:pypi/...``, ``pkg:deb/<distro>/...``: github.com/package-url/purl-spec).
The document is written into the bundle folder as ``sbom.cdx.json`` (so a test
result signed with ``--lock`` names it by digest) and signed as an in-toto
statement whose predicate is the BOM itself, under cosign's CycloneDX predicate
type (``https://cyclonedx.org/bom``: sigstore/cosign
``pkg/cosign/attestation/attestation.go``), so ``cosign verify-attestation
--type cyclonedx`` finds it.

The JSON is written here, not through cyclonedx-python-lib (a runtime
dependency and its own dependencies for one small document); the tests
validate every document against the CycloneDX 1.6 JSON schema with that
library.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict
from urllib.parse import quote

from envlock.errors import DataError, UsageError

if TYPE_CHECKING:
    from envlock.image.ref import ImageRef
    from envlock.model import Lock
    from envlock.report.dsse import Envelope

FILE = "sbom.cdx.json"
PREDICATE_TYPE = "https://cyclonedx.org/bom"
SPEC_VERSION = "1.6"
SCHEMA = "http://cyclonedx.org/schema/bom-1.6.schema.json"
DPKG_STATUS = "/var/lib/dpkg/status"
OS_RELEASE = ("/usr/lib/os-release", "/etc/os-release")
MAX_STATUS_BYTES = 32 * 1024 * 1024  # a dpkg status file (a full desktop's is ~3 MiB)


@dataclass(frozen=True)
class OsPackage:
    """One package the image's dpkg database says is installed."""

    name: str
    version: str
    architecture: str


def parse_dpkg_status(text: str) -> list[OsPackage]:
    """The installed packages (``Status: install ok installed``) of a dpkg status file,
    sorted by name and architecture."""
    out: list[OsPackage] = []
    for stanza in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if not line or line[0] in " \t":
                continue  # a continuation line (Description, Conffiles)
            key, sep, value = line.partition(":")
            if sep:
                fields[key.strip()] = value.strip()
        status = fields.get("Status", "").split()
        if status[-1:] != ["installed"] or "Package" not in fields:
            continue
        out.append(
            OsPackage(fields["Package"], fields.get("Version", ""), fields.get("Architecture", ""))
        )
    return sorted(out, key=lambda p: (p.name, p.architecture))


def os_release_id(text: str) -> str:
    """``ID`` of an os-release file ("debian", "ubuntu"), or "" when it names none."""
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "ID":
            return value.strip().strip("\"'")
    return ""


@dataclass(frozen=True)
class ImagePackages:
    """What an image's package database says: its distribution and installed packages."""

    distro: str  # os-release ID ("debian"); "" when the image names none
    packages: tuple[OsPackage, ...] = field(default_factory=tuple)


def _file_from_archive(stream: Iterable[bytes], limit: int) -> bytes | None:
    """The one regular file of a tar stream (``get_archive``), at most ``limit`` bytes."""
    buf = io.BytesIO()
    for chunk in stream:
        buf.write(chunk)
        if buf.tell() > limit + 64 * 1024:
            raise DataError(f"the image's file is larger than {limit} bytes")
    buf.seek(0)
    with tarfile.open(fileobj=buf) as tar:
        for member in tar:
            if member.isfile():
                f = tar.extractfile(member)
                return f.read() if f is not None else None
    return None


def image_packages(image: str) -> ImagePackages:
    """The dpkg packages installed in ``image`` (a local name, id or REPO@sha256).

    A container is created from the image (never started, no network) and the
    status file copied out of it through the Docker Engine API; the container
    is removed. An image without a dpkg database has no OS packages here
    (ImagePackages with none). An image that is not there is UsageError (exit
    2); the engine failing is EnvironmentFailure (exit 3).
    """
    import docker.errors

    from envlock.image import engine

    with engine.session(f"reading the package database of {image}") as client:
        try:
            container = client.containers.create(
                image, command=["true"], network_disabled=True, entrypoint=[]
            )
        except docker.errors.ImageNotFound as e:
            raise UsageError(
                f"no image {image} in the Docker Engine",
                hint=f"pull or build it first: docker pull {image}",
            ) from e
        try:
            status = _copy_out(container, DPKG_STATUS, MAX_STATUS_BYTES)
            release = b""
            for path in OS_RELEASE:
                release = _copy_out(container, path, 1024 * 1024) or b""
                if release:
                    break
        finally:
            container.remove(force=True)
    distro = os_release_id(release.decode("utf-8", "replace"))
    if status is None:
        return ImagePackages(distro)
    return ImagePackages(distro, tuple(parse_dpkg_status(status.decode("utf-8", "replace"))))


def _copy_out(container: Any, path: str, limit: int) -> bytes | None:
    import docker.errors

    try:
        stream, _ = container.get_archive(path)
    except docker.errors.NotFound:
        return None
    return _file_from_archive(stream, limit)


def _pypi_ref(name: str, version: str) -> str:
    return f"pkg:pypi/{name}@{quote(version, safe='')}"


def deb_purl(pkg: OsPackage, distro: str) -> str:
    namespace = quote(distro or "debian", safe="")
    purl = f"pkg:deb/{namespace}/{quote(pkg.name, safe='')}@{quote(pkg.version, safe='')}"
    return f"{purl}?arch={quote(pkg.architecture, safe='')}" if pkg.architecture else purl


# The CycloneDX 1.6 JSON pieces make_sbom writes (https://cyclonedx.org/docs/1.6/json/);
# keys such as "bom-ref" and "$schema" are not identifiers: the functional form.
class Hash(TypedDict):
    alg: str
    content: str


class Property(TypedDict):
    name: str
    value: str


class ExternalReference(TypedDict):
    type: str
    url: str
    hashes: list[Hash]


_ComponentBody = TypedDict(
    "_ComponentBody",
    {
        "type": str,
        "bom-ref": str,
        "name": str,
        "version": str,
        "purl": str,
        "properties": list[Property],
    },
)


class Component(_ComponentBody, total=False):
    """A package of the image: a locked wheel's (hashes, where from) or an OS one."""

    hashes: list[Hash]
    externalReferences: list[ExternalReference]


class Dependency(TypedDict):
    ref: str
    dependsOn: list[str]


class Tool(TypedDict):
    type: str
    name: str
    version: str


class Tools(TypedDict):
    components: list[Tool]


MetadataComponent = TypedDict("MetadataComponent", {"type": str, "bom-ref": str, "name": str})


class Metadata(TypedDict):
    timestamp: str
    tools: Tools
    component: MetadataComponent  # the image the BOM describes


Bom = TypedDict(
    "Bom",
    {
        "$schema": str,
        "bomFormat": str,
        "specVersion": str,
        "serialNumber": str,
        "version": int,
        "metadata": Metadata,
        "components": list[Component],
        "dependencies": list[Dependency],
    },
)


def make_sbom(
    lock: Lock,
    os_packages: ImagePackages,
    *,
    image: str,
    envlock_version: str,
    created: str,
    serial: str | None = None,
) -> Bom:
    """The CycloneDX 1.6 document of ``image``: the lock's packages, then the OS's."""
    python: list[Component] = []
    dependencies: list[Dependency] = []
    refs = {p.name: _pypi_ref(p.name, p.version) for p in lock.packages}
    for p in sorted(lock.packages, key=lambda p: p.name):
        hashes: list[Hash] = [{"alg": "SHA-256", "content": w.sha256} for w in p.wheels]
        python.append(
            {
                "type": "library",
                "bom-ref": refs[p.name],
                "name": p.name,
                "version": p.version,
                "purl": refs[p.name],
                "hashes": hashes,
                "externalReferences": [
                    {
                        "type": "distribution",
                        "url": w.url,
                        "hashes": [{"alg": "SHA-256", "content": w.sha256}],
                    }
                    for w in p.wheels
                ],
                "properties": [{"name": "envlock:source", "value": "pylock.toml"}],
            }
        )
        dependencies.append(
            {"ref": refs[p.name], "dependsOn": [refs[d] for d in p.dependencies if d in refs]}
        )
    system: list[Component] = []
    seen: set[str] = set()
    for pkg in os_packages.packages:
        purl = deb_purl(pkg, os_packages.distro)
        if purl in seen:
            continue
        seen.add(purl)
        system.append(
            {
                "type": "library",
                "bom-ref": purl,
                "name": pkg.name,
                "version": pkg.version,
                "purl": purl,
                "properties": [{"name": "envlock:source", "value": DPKG_STATUS}],
            }
        )
    return {
        "$schema": SCHEMA,
        "bomFormat": "CycloneDX",
        "specVersion": SPEC_VERSION,
        "serialNumber": f"urn:uuid:{serial or uuid.uuid4()}",
        "version": 1,
        "metadata": {
            "timestamp": created,
            "tools": {
                "components": [
                    {"type": "application", "name": "envlock", "version": envlock_version}
                ]
            },
            "component": {"type": "container", "bom-ref": image, "name": image},
        },
        "components": python + system,
        "dependencies": dependencies,
    }


def sbom_bytes(doc: Any) -> bytes:
    """The SBOM as the file is written (and as its digest is taken, everywhere)."""
    return (json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def sbom_digest(doc: Any) -> str:
    return hashlib.sha256(sbom_bytes(doc)).hexdigest()


def sign_sbom(doc: Bom, key: Any, image_ref: str | ImageRef) -> Envelope:
    """The in-toto statement (subject: the image by manifest digest; predicate: the
    BOM) in a DSSE envelope signed with the loaded private ``key``."""
    from envlock.report import dsse, statement

    stmt = {
        "_type": statement.STATEMENT_TYPE,
        "subject": [statement.manifest_subject(image_ref)],
        "predicateType": PREDICATE_TYPE,
        "predicate": doc,
    }
    payload = json.dumps(stmt, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return dsse.sign(dsse.INTOTO_PAYLOAD_TYPE, payload, key)


@dataclass(frozen=True)
class SbomCheck:
    """An SBOM attestation as checked: ``digest`` (sha256 hex of ``sbom_bytes`` of the
    predicate) once it is trusted; ``problems`` when it is not."""

    ok: bool
    digest: str = ""
    components: int = 0
    problems: tuple[str, ...] = ()


def is_sbom(env: Envelope) -> bool:
    """Whether the (not yet trusted) payload claims cosign's CycloneDX predicate type."""
    from envlock.report import dsse

    try:
        doc = dsse.strict_json(env.payload, "the signed payload")
    except dsse.EnvelopeError:
        return False
    return isinstance(doc, dict) and doc.get("predicateType") == PREDICATE_TYPE


def check_sbom(env: Envelope, public_key: Any, image_ref: ImageRef) -> SbomCheck:
    """Signature by ``public_key``, an in-toto statement about ``image_ref`` whose
    predicate is a CycloneDX document; its digest."""
    from envlock.report import dsse, statement

    if not dsse.valid_signatures(env, public_key):
        return SbomCheck(False, problems=("no signature is valid for this key over the DSSE PAE",))
    if env.payload_type != dsse.INTOTO_PAYLOAD_TYPE:
        return SbomCheck(False, problems=(f"payloadType is {env.payload_type!r}",))
    try:
        doc = dsse.strict_json(env.payload, "the signed payload")
    except dsse.EnvelopeError as e:
        return SbomCheck(False, problems=(str(e),))
    if not isinstance(doc, dict) or doc.get("_type") != statement.STATEMENT_TYPE:
        return SbomCheck(False, problems=("the payload is not an in-toto Statement v1",))
    want = statement.manifest_subject(image_ref)
    if want not in (doc.get("subject") or []):
        return SbomCheck(False, problems=(f"its subject is not {image_ref}",))
    bom = doc.get("predicate")
    if not isinstance(bom, dict) or bom.get("bomFormat") != "CycloneDX":
        return SbomCheck(False, problems=("its predicate is not a CycloneDX document",))
    components = bom.get("components")
    return SbomCheck(True, sbom_digest(bom), len(components) if isinstance(components, list) else 0)
