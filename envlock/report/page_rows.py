"""The rows of the report page: the trusted keys, what a report claims (``Claim``;
ci build's summary.json is read into claims by envlock.ci.summary, not here), and
each report verified with ``verify_envelope`` (the code ``envlock verify`` runs)
and read into a ``Row``: its checks, benchmark against the GPU's peaks, GPU, driver,
date and signer, or why it did not verify."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from envlock.errors import EnvlockError, UsageError

if TYPE_CHECKING:
    from envlock.image.ref import ImageRef
    from envlock.report.verify import Verification

BENCH_DTYPES = ("fp32", "bf16", "fp16")  # shown: fp32 and the best half precision
SUBJECT_NOT_CHECKED = "subject not checked"


@dataclass(frozen=True)
class TrustedKey:
    path: str
    public_key: Any
    keyid: str


@dataclass(frozen=True)
class Claim:
    """What a report is known to be the report of (from ci build's summary or flags)."""

    cell: str | None = None
    lock_dir: Path | None = None
    image_ref: str | None = None  # REPO@sha256:<manifest digest>: no engine needed
    image_id: str | None = None  # a local image's config digest
    image_name: str | None = None  # --image as given, resolved lazily through the engine


class BenchRow(TypedDict):
    """One benchmark column of a row: a matmul's TFLOP/s against its datasheet peak."""

    dtype: str
    math: str
    tflops: float
    peak_tflops: float | None
    fraction_of_peak: float | None
    device: str


class CheckRow(TypedDict):
    name: str
    status: str  # PASS, WARN, FAIL, SKIP
    reason: str


class RowDict(TypedDict):
    """A row as the page's summary JSON writes it."""

    report: str
    verified: bool
    reasons: list[str]
    cell: str | None
    result: str | None
    framework: str
    version: str
    python: str
    cuda: str
    cuda_source: str
    gpu: str
    driver: str
    created: str | None
    keyid: str
    signer: str
    subject: str
    subject_kind: str | None
    subject_checked: bool
    subject_note: str
    pushed: str | None
    lock_digest: str | None
    base_image: str | None
    checks: list[CheckRow]
    benchmark: list[BenchRow]


@dataclass
class Row:
    """One report on the page: a verified cell, or a report that did not verify."""

    report: str
    verified: bool
    reasons: list[str] = field(default_factory=list)  # why not verified
    cell: str | None = None
    result: str | None = None
    framework: str = "?"
    version: str = "?"
    python: str = "?"
    cuda: str = "?"
    cuda_source: str = "?"
    gpu: str = "?"
    driver: str = "?"
    created: str | None = None
    keyid: str = ""
    signer: str = ""  # the trusted key file that verified it
    subject: str = ""
    subject_kind: str | None = None
    subject_note: str = SUBJECT_NOT_CHECKED
    subject_checked: bool = False
    pushed: str | None = None  # REPO@sha256:<manifest digest>, when the subject names one
    lock_digest: str | None = None  # sha256:<hex> of the pylock.toml the report covers
    base_image: str | None = None  # the base image the image was built on (its OCI labels)
    checks: dict[str, dict[str, str]] = field(default_factory=dict)  # name -> status, reason
    bench: list[BenchRow] = field(default_factory=list)
    sort: dict[str, int] = field(default_factory=dict)  # column -> rank (filled by the page)

    def to_dict(self) -> RowDict:
        return {
            "report": self.report,
            "verified": self.verified,
            "reasons": self.reasons,
            "cell": self.cell,
            "result": self.result,
            "framework": self.framework,
            "version": self.version,
            "python": self.python,
            "cuda": self.cuda,
            "cuda_source": self.cuda_source,
            "gpu": self.gpu,
            "driver": self.driver,
            "created": self.created,
            "keyid": self.keyid,
            "signer": self.signer,
            "subject": self.subject,
            "subject_kind": self.subject_kind,
            "subject_checked": self.subject_checked,
            "subject_note": self.subject_note,
            "pushed": self.pushed,
            "lock_digest": self.lock_digest,
            "base_image": self.base_image,
            "checks": [
                {"name": k, "status": v["status"], "reason": v["reason"]}
                for k, v in self.checks.items()
            ],
            "benchmark": self.bench,
        }


# ---------------------------------------------------------------- inputs


def load_keys(paths: Sequence[str]) -> list[TrustedKey]:
    """The trusted public keys (exit 2 for one that is missing or not a public key)."""
    from envlock.report import keys as keymod

    out = []
    for path in paths:
        pub = keymod.load_public(Path(path))
        out.append(TrustedKey(str(path), pub, keymod.keyid(pub)))
    if not out:
        raise UsageError("no --key given", hint="give the signers' public keys: --key NAME.pub.pem")
    return out


# ---------------------------------------------------------------- one report


def _text(value: Any, default: str = "?") -> str:
    return str(value) if isinstance(value, (str, int, float)) and str(value) else default


class ImageIds:
    """Local image ids of --image names, looked up once through the engine."""

    def __init__(self) -> None:
        self._ids: dict[str, str] = {}

    def get(self, name: str) -> str:
        from envlock.report.image import local_image_id

        if name not in self._ids:
            self._ids[name] = local_image_id(name)
        return self._ids[name]


def _comparisons(
    claim: Claim, env: Any, ids: ImageIds
) -> tuple[Path | None, str | None, str | ImageRef | None]:
    """(lock_dir, image_id, image_ref) to hand verify_envelope, as `envlock verify` picks them."""
    from envlock.report import result_check

    image_ref: str | ImageRef | None = claim.image_ref
    image_id = claim.image_id
    if claim.image_name is not None:
        from envlock.image import ref as imageref

        ref = imageref.match(claim.image_name)
        if ref is not None and ref.digest is not None:
            # a reference by manifest digest is compared as it stands, never looked up
            # in the local engine: a report naming a lock or a local image is not
            # verified, saying what it names
            image_ref = ref.at(ref.digest)  # handed on parsed
        elif result_check.HEX64.fullmatch(claim.image_name.removeprefix("sha256:")):
            image_id = claim.image_name
        else:
            image_id = ids.get(claim.image_name)
    return claim.lock_dir, image_id, image_ref


def _why_no_signature(env: Any, keys: Sequence[TrustedKey]) -> str:
    hints = [s.keyid for s in env.signatures if s.keyid]
    known = {k.keyid for k in keys}
    named = [h for h in hints if h in known]
    if named:
        return (
            f"the signature by key {named[0][:16]}... does not verify: the report was "
            "changed after it was signed, or the signature is damaged"
        )
    shown = ", ".join(h[:16] + "..." for h in hints) or "none named"
    return (
        f"signed by an unknown key (keyid {shown}): no signature is valid for any of the "
        f"{len(keys)} trusted key{'s' if len(keys) != 1 else ''}"
    )


def check_report(path: str, keys: Sequence[TrustedKey], claim: Claim, ids: ImageIds) -> Row:
    """Verify one report file against every trusted key; the row it makes."""
    from envlock.fsutil import read_input
    from envlock.report import dsse, verify_envelope

    data = read_input(path, "report", hint="give the files 'envlock report sign' wrote")
    row = Row(report=path, verified=False, cell=claim.cell)
    try:
        env = dsse.parse_envelope(data)
    except dsse.EnvelopeError as e:
        row.reasons.append(f"not a DSSE envelope: {e}")
        return row
    lock_dir, image_id, image_ref = _comparisons(claim, env, ids)
    chosen = None
    for key in keys:
        v = verify_envelope(
            env, key.public_key, lock_dir=lock_dir, image_id=image_id, image_ref=image_ref
        )
        if v.signature_ok:
            chosen = (key, v)
            break
    if chosen is None:
        row.reasons.append(_why_no_signature(env, keys))
        return row
    key, v = chosen
    row.keyid, row.signer = v.keyid, key.path
    if not v.ok:
        row.reasons.extend(v.reasons())
        if v.drift:
            row.reasons.extend(
                f"{f}: the report says {want}, the claimed one is {have}"
                for f, want, have in v.drift
            )
        return row
    assert v.statement is not None
    row.verified = True
    _fill(row, v, lock_dir)
    return row


def _fill(row: Row, v: Verification, lock_dir: Path | None) -> None:
    """The row's columns, from the verified statement only."""
    trusted = v.statement
    assert trusted is not None
    smoke: Any = trusted.smoke  # the harness's JSON, every field checked as read
    row.result = v.result
    row.created = trusted.created
    row.subject_kind = trusted.subject_kind
    row.subject = "; ".join(
        f"{s.get('name', '?')} sha256:{str(s['digest'].get('sha256', '?'))[:12]}" for s in v.subject
    )
    row.subject_checked = v.subject_checked
    if v.subject_checked:
        what = [e.name for e in v.checked if e.status == "matches" and e.kind != "file"]
        row.subject_note = "subject matches " + ", ".join(what)
    if trusted.subject_kind == "image-manifest" and v.subject:
        first = v.subject[0]
        row.pushed = f"{first.get('name', '?')}@sha256:{first['digest'].get('sha256', '?')}"
    lock = trusted.configuration.get("pylock.toml")
    row.lock_digest = f"sha256:{lock}" if lock else None
    row.base_image = _base_image(smoke)
    row.framework = _text(smoke.get("framework"))
    row.version = _text(smoke.get("version"))
    expected = smoke.get("expected") if isinstance(smoke.get("expected"), dict) else {}
    host = smoke.get("host") if isinstance(smoke.get("host"), dict) else {}
    build = smoke.get("build_info") if isinstance(smoke.get("build_info"), dict) else {}
    row.python = _text(host.get("python") or expected.get("python"))
    row.cuda = _text(expected.get("cuda") or build.get("cuda_version") or build.get("cuda"))
    row.cuda_source = _cuda_source(smoke, lock_dir if v.subject_checked else None)
    gpus = [g for g in smoke.get("gpus") or [] if isinstance(g, dict)]
    row.gpu = _text(gpus[0].get("name")) if gpus else "CPU only"
    row.driver = _text((gpus[0].get("driver") if gpus else None) or host.get("driver"), "-")
    for check in smoke.get("checks") or []:
        reason = check.get("reason")
        row.checks[check["name"]] = {
            "status": str(check["status"]).upper(),
            "reason": reason if isinstance(reason, str) else "",
        }
    row.bench = _bench(smoke, gpus[0].get("name") if gpus else None)


def _base_image(smoke: Mapping[str, object]) -> str | None:
    """``name@digest`` (or the name) of the base image, from the image's OCI labels as
    the signed smoke result recorded them; None for a host run."""
    from envlock.image.labels import OCI

    image = smoke.get("image")
    labels = image.get("labels") if isinstance(image, dict) else None
    if not isinstance(labels, dict):
        return None
    name, digest = labels.get(OCI + "base.name"), labels.get(OCI + "base.digest")
    if not isinstance(name, str) or not name:
        return None
    if isinstance(digest, str) and digest and "@" not in name:
        return f"{name}@{digest}"
    return name


def _cuda_source(smoke: Mapping[str, object], lock_dir: Path | None) -> str:
    """ "pip"/"system" from the checked lock; else inferred from the recorded environment."""
    if lock_dir is not None:
        from envlock.readers import parse_toml, read_text

        try:
            path = lock_dir / "pylock.toml"
            doc = parse_toml(read_text(path), str(path))
            source = doc["tool"]["envlock"]["resolution"]["cuda_source"]
            if isinstance(source, str):
                return source
        except (OSError, ValueError, KeyError, TypeError, EnvlockError):
            pass
    env = smoke.get("environment")
    dists = env.get("distributions") if isinstance(env, dict) else None
    if isinstance(dists, list) and dists:
        wheels = any(isinstance(d, str) and d.startswith("nvidia-cu") for d in dists)
        return "pip (seen)" if wheels else "system (seen)"
    return "?"


@functools.lru_cache(maxsize=1)
def _gpu_matrix() -> Any:
    """matrices/gpus.toml, read once per process (None when it cannot be read)."""
    from envlock.matrix import load_gpus

    try:
        return load_gpus()
    except EnvlockError:
        return None


def _gpu_peaks(name: str | None, math: str) -> float | None:
    """The datasheet peak for ``math`` on the GPU, from matrices/gpus.toml."""
    matrix = _gpu_matrix() if name else None
    model = matrix.find(name) if matrix is not None and name else None
    value = getattr(model, f"{math}_tflops", None) if model is not None else None
    return float(value) if isinstance(value, (int, float)) else None


def _bench(smoke: Mapping[str, object], gpu: str | None) -> list[BenchRow]:
    """fp32 and the best half precision matmul: TFLOP/s, peak and its fraction."""
    bench = smoke.get("benchmark")
    results = bench.get("results") if isinstance(bench, dict) else None
    # dtype -> (the harness's result as recorded, its TFLOP/s)
    by_dtype: dict[str, tuple[Mapping[str, object], float]] = {}
    for r in results if isinstance(results, list) else []:
        if (
            isinstance(r, dict)
            and r.get("dtype") in BENCH_DTYPES
            and isinstance(r.get("tflops"), (int, float))
        ):
            by_dtype.setdefault(str(r["dtype"]), (r, float(r["tflops"])))
    half = by_dtype.get("bf16") or by_dtype.get("fp16")
    out: list[BenchRow] = []
    for measured in [by_dtype.get("fp32"), half]:
        if measured is None:
            continue
        r, tflops = measured
        math = str(r.get("math") or r["dtype"])
        stated = r.get("peak_tflops")
        peak = float(stated) if isinstance(stated, (int, float)) and stated > 0 else None
        if peak is None:
            peak = _gpu_peaks(gpu, math) if r.get("device", "gpu") != "cpu" else None
        fraction = tflops / float(peak) if peak else None
        out.append(
            {
                "dtype": str(r["dtype"]),
                "math": math,
                "tflops": tflops,
                "peak_tflops": float(peak) if peak else None,
                "fraction_of_peak": round(fraction, 4) if fraction is not None else None,
                "device": str(r.get("device", "?")),
            }
        )
    return out
