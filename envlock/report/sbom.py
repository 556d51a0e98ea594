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

import base64
import contextlib
import hashlib
import io
import json
import tarfile
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict
from urllib.parse import quote

from envlock.errors import CheckFailed, DataError, EnvironmentFailure, UsageError
from envlock.readers import decode_text, read_capped, shown

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
IMAGE_LOCK = "/opt/envlock/pylock.toml"  # where the bundle's Dockerfile copies it
MAX_LOCK_BYTES = 16 * 1024 * 1024


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
    """What an image says about itself: its distribution, the packages its dpkg
    database lists, and the pylock.toml its bundle copied in."""

    distro: str  # os-release ID ("debian"); "" when the image names none
    packages: tuple[OsPackage, ...] = field(default_factory=tuple)
    os_database: str = "dpkg"  # "absent": the image has no DPKG_STATUS (distroless, Alpine)
    lock_text: str | None = None  # IMAGE_LOCK's text; None when the image has none


@dataclass(frozen=True)
class _Copied:
    """A file copied out of a container: its bytes, or why it was not read
    (``problem``), or neither when nothing is at the path."""

    data: bytes | None = None
    problem: str = ""


# Go's os.FileMode type bits, as the engine's X-Docker-Container-Path-Stat states them
_SYMLINK = 1 << 27
_FILE_TYPES = (
    (1 << 31, "a folder"),
    (_SYMLINK, "a symbolic link"),
    (1 << 26, "a device"),
    (1 << 25, "a FIFO"),
    (1 << 24, "a socket"),
    (1 << 21, "a character device"),
    (1 << 19, "an irregular file"),
)
_TAR_SLACK = 64 * 1024  # a tar of one file: its headers (PAX too) and the end blocks


def image_packages(image: str) -> ImagePackages:
    """The dpkg packages installed in ``image`` (a local name, id or REPO@sha256)
    and the pylock.toml its bundle copied to IMAGE_LOCK.

    A container is created from the image (never started, no network), the files
    are copied out of it through the Docker Engine API, each archive response
    closed whether it was read or not, and the container is removed. An image
    without a dpkg database has no OS packages here (``os_database`` "absent").
    A status file that is there but cannot be read (a link, a FIFO, over
    MAX_STATUS_BYTES) is EnvironmentFailure (exit 3): an SBOM without the OS
    packages would claim the image has none. An image that is not there is
    UsageError (exit 2); the engine failing is EnvironmentFailure (exit 3).
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
            status = _copy_out(client, container.id, DPKG_STATUS, MAX_STATUS_BYTES)
            lock = _copy_out(client, container.id, IMAGE_LOCK, MAX_LOCK_BYTES)
            release = b""
            for path in OS_RELEASE:
                release = _copy_out(client, container.id, path, 1024 * 1024).data or b""
                if release:
                    break
        finally:
            container.remove(force=True)
    if status.problem:
        raise EnvironmentFailure(
            f"{image}: {DPKG_STATUS} is {status.problem}: the image's OS packages cannot be "
            "listed, and an SBOM without them would say it has none",
            hint="dpkg keeps its database as a regular file of a few MiB; this image's is "
            "damaged or was made by hand: build it again from an intact base image",
        )
    if lock.problem:
        raise EnvironmentFailure(
            f"{image}: {IMAGE_LOCK} is {lock.problem}",
            hint="envlock's Dockerfile copies the bundle's pylock.toml there as a regular "
            "file: build the image again from its bundle (envlock build DIR)",
        )
    lock_text = None
    if lock.data is not None:
        lock_text = decode_text(
            lock.data, f"{image}:{IMAGE_LOCK}", hint="build the image again", error=DataError
        )
    distro = os_release_id(release.decode("utf-8", "replace"))
    if status.data is None:
        return ImagePackages(distro, os_database="absent", lock_text=lock_text)
    listed = parse_dpkg_status(status.data.decode("utf-8", "replace"))
    return ImagePackages(distro, tuple(listed), lock_text=lock_text)


def _copy_out(client: Any, container: str, path: str, limit: int) -> _Copied:
    """``path`` of the container, copied out through the engine's archive endpoint
    (GET /containers/ID/archive, as ``docker cp`` does): read only when the
    engine's stat of it names a regular file of at most ``limit`` bytes, at most
    ``limit`` and a tar's headers read in any case, and the response closed on
    every way out. An archive left open holds the container: the engine's
    removal of it waited on the stream for ever (issue #38, break 8)."""
    api = client.api
    url = f"{api.base_url}/v{api.api_version}/containers/{quote(container, safe='')}/archive"
    response = api.get(
        url,
        params={"path": path},
        headers={"Accept-Encoding": "identity"},
        stream=True,
        timeout=api.timeout,
    )
    with contextlib.closing(response):
        if response.status_code == 404:
            return _Copied()
        response.raise_for_status()
        problem = _stat_problem(response.headers.get("X-Docker-Container-Path-Stat"), limit)
        if problem:
            return _Copied(problem=problem)
        data = read_capped(response.raw, limit + _TAR_SLACK)
    if len(data) > limit + _TAR_SLACK:
        return _Copied(problem=f"more than the {limit} bytes allowed")
    try:
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            member = tar.next()
            if member is None:
                return _Copied(problem="missing from the engine's archive of it")
            if not member.isfile():
                return _Copied(problem=_tar_type(member))
            if member.size > limit:
                return _Copied(problem=f"{member.size} bytes, more than the {limit} allowed")
            f = tar.extractfile(member)
            return _Copied(f.read() if f is not None else b"")
    except tarfile.TarError as e:
        return _Copied(problem=f"unreadable (the engine's archive of it: {e})")


def _stat_problem(header: str | None, limit: int) -> str:
    """Why the file the engine's stat header describes is not read ("" when it is
    a regular file of at most ``limit`` bytes, or the header says nothing)."""
    if not header:
        return ""
    try:
        stat = json.loads(base64.b64decode(header))
        mode, size = int(stat.get("mode", 0)), int(stat.get("size", 0))
    except (ValueError, TypeError, AttributeError):
        return ""  # the tar's own header decides
    for bit, what in _FILE_TYPES:
        if mode & bit:
            target = stat.get("linkTarget")
            return f"{what} (to {shown(target)})" if target and bit == _SYMLINK else what
    if size > limit:
        return f"{size} bytes, more than the {limit} allowed"
    return ""


def _tar_type(member: tarfile.TarInfo) -> str:
    if member.issym() or member.islnk():
        return f"a symbolic link (to {shown(member.linkname)})"
    if member.isfifo():
        return "a FIFO"
    if member.isdir():
        return "a folder"
    if member.isdev():
        return "a device"
    return "not a regular file"


def image_lock(found: ImagePackages, image: str, expected: Lock, where: str) -> Lock:
    """The lock ``image`` was built from (its own IMAGE_LOCK), which must list the
    same packages, versions and wheel hashes as ``expected`` (the lock of the
    bundle folder given, read from ``where``). No lock in the image, or another
    one, is CheckFailed (exit 1): the bundle folder does not describe the image."""
    from envlock.lock.pylock import describe, parse_pylock

    if found.lock_text is None:
        raise CheckFailed(
            f"{image} has no {IMAGE_LOCK}: nothing in it says which lock it was built "
            "from, so its Python packages are unknown",
            hint="report sbom describes an image built from an envlock bundle (its "
            f"Dockerfile copies pylock.toml to {IMAGE_LOCK}): build it from the bundle "
            "folder with envlock build DIR -t IMAGE, then give that image",
        )
    inside = parse_pylock(found.lock_text, f"{image}:{IMAGE_LOCK}")
    differences = lock_differences(inside, expected, where)
    if differences:
        shown_ones = "; ".join(differences[:3])
        more = f"; and {len(differences) - 3} more" if len(differences) > 3 else ""
        digest = hashlib.sha256(found.lock_text.encode()).hexdigest()
        raise CheckFailed(
            f"{image} was not built from {where}: its {IMAGE_LOCK} differs from it: "
            f"{shown_ones}{more}",
            hint=f"{image} was built from a lock of {describe(inside)} (pylock.toml "
            f"sha256:{digest[:16]}...): give --lock the bundle folder it was built from, "
            "or build the image again from this one (envlock build DIR)",
        )
    return inside


def lock_differences(inside: Lock, expected: Lock, where: str) -> list[str]:
    """Each package whose version or wheel hashes differ between the image's lock
    and ``expected``, by name: "NAME: V1 in the image, V2 in WHERE"."""
    mine = {p.name: p for p in inside.packages}
    theirs = {p.name: p for p in expected.packages}
    out: list[str] = []
    for name in sorted(set(mine) | set(theirs)):
        a, b = mine.get(name), theirs.get(name)
        if a is None:
            assert b is not None
            out.append(f"{name}: not in the image, {b.version} in {where}")
        elif b is None:
            out.append(f"{name}: {a.version} in the image, not in {where}")
        elif a.version != b.version:
            out.append(f"{name}: {a.version} in the image, {b.version} in {where}")
        elif sorted(a.hashes) != sorted(b.hashes):
            out.append(f"{name} {a.version}: other wheel hashes in the image than in {where}")
    return out


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
        hashes: list[Hash] = [{"alg": "SHA-256", "content": w.sha256} for w in p.files]
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
                    for w in p.files
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
