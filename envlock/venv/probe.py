"""The probe envlock doctor runs inside the interpreter it inspects.

Standard library only, Python 3.8 syntax: it runs in whatever venv the user
points at (``python -c <this file> ARGS``) and prints one JSON document on
stdout. It reports facts, never verdicts (``envlock.doctor.findings`` judges):

- the interpreter (version, prefix, marker environment for Requires-Dist);
- every installed distribution (name, version, Requires-Dist, where, and how it
  was installed when direct_url.json says: editable, folder, vcs or url), and with
  ``--deep`` the files whose bytes no longer match their RECORD hash;
- ``--tensorflow``: TensorFlow imported, its version, build_info, visible GPUs;
- ``--library SONAME`` (repeated): whether that CUDA/cuDNN library loads, from
  the system search path or from an nvidia-* wheel's lib folder, and from where;
- LD_LIBRARY_PATH and CUDA_VISIBLE_DEVICES.

Usage: python probe.py [--deep] [--tensorflow] [--library SONAME]...
"""

from __future__ import annotations

import base64
import ctypes
import hashlib
import json
import os
import platform
import re
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the document's shapes, for the checker and for envlock's readers
    # of it (doctor, capture); the probe itself runs on any Python 3, TypedDict or not
    from typing import TypedDict

    class Dist(TypedDict, total=False):
        """One installed distribution."""

        name: str
        version: str
        requires: list[str]  # Requires-Dist lines
        location: str
        direct: str | None  # editable | folder | vcs | url (direct_url.json), or None
        direct_url: str | None
        changed_files: list[dict[str, str]]  # --deep: {"path", "problem"}
        changed_count: int
        cuda: str  # the CUDA the distribution's own files state (cuda_stated), when they do

    # "from" is a keyword: the functional form
    Tried = TypedDict("Tried", {"from": str, "error": str})
    Library = TypedDict(
        "Library",
        {
            "soname": str,
            "loaded": bool,
            "from": str,  # system | wheel
            "path": str,
            "version": "str | None",
            "tried": "list[Tried]",  # where it did not load, and why
        },
        total=False,
    )

    class ErrorText(TypedDict):
        type: str
        message: str

    class TfProbe(TypedDict, total=False):
        """--tensorflow: the import, its version, build_info and GPUs."""

        imported: bool
        error: ErrorText
        seconds: float
        version: str | None
        build_info: dict[str, object]  # as JSON values
        build_info_from: dict[str, str]  # fact -> "build_info", "cuda_config.h", ...
        build_info_error: str
        gpus: list[str]
        gpus_error: str

    class PythonInfo(TypedDict):
        executable: str
        version: str
        prefix: str
        base_prefix: str
        libc: list[str]

    class ProbeDoc(TypedDict, total=False):
        """The probe's document (schema envlock.probe/v1)."""

        schema: str
        python: PythonInfo
        markers: dict[str, str]
        environment: dict[str, str | None]  # LD_LIBRARY_PATH, CUDA_VISIBLE_DEVICES, VIRTUAL_ENV
        distributions: list[Dist]
        tensorflow: TfProbe
        library_folders: list[str]
        libraries: list[Library]
        stderr_tail: str  # added by envlock.venv.interpreter.run_probe
        # added by envlock.doctor.freeze: the document stands for this published
        # package list (no interpreter ran; no Requires-Dist, imports or libraries)
        freeze: str


SCHEMA = "envlock.probe/v1"
MARK = "ENVLOCK-PROBE "  # the line carrying the document (a library may print too)
MAX_CHANGED = 20  # changed files listed per distribution


def marker_environment() -> dict[str, str]:
    """What PEP 508 markers are evaluated against, as packaging computes it."""
    info = sys.implementation.version
    version = f"{info.major}.{info.minor}.{info.micro}"
    if info.releaselevel != "final":
        version += info.releaselevel[0] + str(info.serial)
    return {
        "implementation_name": sys.implementation.name,
        "implementation_version": version,
        "os_name": os.name,
        "platform_machine": platform.machine(),
        "platform_release": platform.release(),
        "platform_system": platform.system(),
        "platform_version": platform.version(),
        "python_full_version": platform.python_version(),
        "platform_python_implementation": platform.python_implementation(),
        "python_version": ".".join(platform.python_version_tuple()[:2]),
        "sys_platform": sys.platform,
    }


def _record_changes(dist: Any) -> list[dict[str, str]]:
    """Files of ``dist`` whose sha256 differs from RECORD, or that are gone."""
    changed: list[dict[str, str]] = []
    for entry in dist.files or []:
        if entry.hash is None or entry.hash.mode != "sha256":
            continue
        path = entry.locate()
        try:
            with open(str(path), "rb") as f:
                digest = hashlib.sha256(f.read()).digest()
        except OSError:
            changed.append({"path": str(entry), "problem": "missing"})
            continue
        value = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        if value != entry.hash.value:
            changed.append({"path": str(entry), "problem": "changed"})
    return changed


def direct_kind(dist: Any) -> str | None:
    """How ``dist`` was installed, from its direct_url.json (PEP 610): "editable",
    "folder", "vcs" or "url"; None for an install from an index."""
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "null")
    except ValueError:
        return "url"  # unreadable: not from an index either
    if not isinstance(direct, dict):
        return None
    info = direct.get("dir_info")
    if isinstance(info, dict) and info.get("editable"):
        return "editable"
    if "dir_info" in direct:
        return "folder"
    if direct.get("vcs_info"):
        return "vcs"
    return "url"


def direct_url(dist: Any) -> str | None:
    """The URL in ``dist``'s direct_url.json (PEP 610), with its VCS prefix
    ("git+https://...") and requested revision ("@v1.2") as pip freeze writes them."""
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "null")
    except ValueError:
        return None
    if not isinstance(direct, dict) or not isinstance(direct.get("url"), str):
        return None
    url = str(direct["url"])
    vcs = direct.get("vcs_info")
    if isinstance(vcs, dict) and isinstance(vcs.get("vcs"), str):
        url = f"{vcs['vcs']}+{url}"
        rev = vcs.get("requested_revision") or vcs.get("commit_id")
        if isinstance(rev, str) and rev:
            url += f"@{rev}"
    return url


# the same patterns as envlock/lock/gpufacts.py's: this file runs alone, standard
# library only, in the inspected interpreter, so it cannot import them
_CU_FOLDER = re.compile(r"nvidia/cu([0-9]+)/")
_VERSION_PY = re.compile(r"^cuda\s*(?::[^=\n]*)?=\s*['\"]([0-9]+\.[0-9]+)['\"]", re.MULTILINE)


def cuda_stated(dist: Any, name: str) -> str | None:
    """The CUDA a distribution's installed files state: torch's torch/version.py
    (``cuda = '13.2'``; the first 4 KiB, never imported), or the nvidia/cuNN/ folder
    the CUDA 13 wheels without a -cuNN suffix install into (their RECORD)."""
    if name == "torch":
        path = os.path.join(str(dist.locate_file("")), "torch", "version.py")
        try:
            with open(path, "rb") as f:
                text = f.read(4096).decode("utf-8", "replace")
        except OSError:
            return None
        found = _VERSION_PY.search(text)
        return found.group(1) if found else None
    if name.startswith("nvidia-") and not re.search(r"-cu[0-9]+$", name):
        majors = set()
        for file in (dist.files or [])[:10000]:
            m = _CU_FOLDER.match(str(file).replace(os.sep, "/"))
            if m:
                majors.add(m.group(1))
        return majors.pop() if len(majors) == 1 else None
    return None


def distributions(deep: bool) -> list[Dist]:
    from importlib import metadata

    out: list[Dist] = []
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if not name:
            continue
        item: Dist = {
            "name": name,
            "version": dist.version,
            "requires": list(dist.requires or []),
            "location": str(dist.locate_file("")),
            "direct": direct_kind(dist),
        }
        if item["direct"] is not None:  # where it came from, for the fixes that name it
            item["direct_url"] = direct_url(dist)
        cuda = cuda_stated(dist, name.lower().replace("_", "-").replace(".", "-"))
        if cuda is not None:
            item["cuda"] = cuda
        if deep:
            changed = _record_changes(dist)
            item["changed_files"] = changed[:MAX_CHANGED]
            item["changed_count"] = len(changed)
        out.append(item)
    return out


def _loaded_path(handle_name: str) -> str | None:
    """The file a loaded library came from, read from /proc/self/maps."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.rstrip("\n").split(None, 5)[-1]
                if os.path.basename(path).startswith(handle_name):
                    return path
    except OSError:
        pass
    return None


def wheel_library_folders() -> list[str]:
    """The lib folders of the nvidia-* wheels on sys.path (site-packages/nvidia/*/lib)."""
    folders: list[str] = []
    for entry in sys.path:
        base = os.path.join(entry or ".", "nvidia")
        if not os.path.isdir(base):
            continue
        for sub in sorted(os.listdir(base)):
            lib = os.path.join(base, sub, "lib")
            if os.path.isdir(lib):
                folders.append(lib)
    return folders


def _library_version(lib: Any, soname: str) -> str | None:
    """The version the library itself reports, where it has a call for it."""
    try:
        if soname.startswith("libcudnn.so"):
            fn = lib.cudnnGetVersion
            fn.restype = ctypes.c_size_t
            v = int(fn())
            major = v // 10000 if v >= 10000 else v // 1000
            rest = v % 10000 if v >= 10000 else v % 1000
            return f"{major}.{rest // 100}.{rest % 100}"
        if soname.startswith("libcudart.so"):
            out = ctypes.c_int(0)
            if lib.cudaRuntimeGetVersion(ctypes.byref(out)) == 0:
                return f"{out.value // 1000}.{out.value % 1000 // 10}"
    except (AttributeError, OSError):
        pass
    return None


def library(soname: str, folders: list[str]) -> Library:
    """Whether ``soname`` loads: system search path first, then the wheel folders."""
    tried: list[Tried] = []
    candidates = [("system", soname)] + [
        ("wheel", os.path.join(folder, soname)) for folder in folders
    ]
    for where, name in candidates:
        if where == "wheel" and not os.path.exists(name):
            continue
        try:
            lib = ctypes.CDLL(name)
        except OSError as e:
            tried.append({"from": where, "error": str(e)})
            continue
        path = _loaded_path(soname.split(".so")[0] + ".so") or name
        return {
            "soname": soname,
            "loaded": True,
            "from": where,
            "path": os.path.realpath(path),
            "version": _library_version(lib, soname),
        }
    return {"soname": soname, "loaded": False, "tried": tried[:3]}


def _plain(value: object) -> Any:
    """build_info values as JSON: strings, numbers, bools, lists, dicts."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


# -- TensorFlow's build facts from its headers (2.22 and later) -----------------
# From 2.22.0rc0 on, build_info holds only is_cuda_build and its siblings; the
# CUDA, cuDNN and compute capabilities are stated in the headers the package
# ships. The same reading as envlock.matrix.headers (which matrix refresh uses),
# kept here in the standard library alone; tests/test_matrix_headers.py checks
# that the copies agree.

TF_HEADERS = (
    (
        "cuda_config.h",
        (
            "include/third_party/gpus/cuda/cuda_config.h",
            "include/external/local_config_cuda/cuda/cuda/cuda_config.h",
        ),
    ),
    (
        "cudnn_version.h",
        (
            "include/external/cuda_cudnn/include/cudnn_version.h",
            "include/third_party/gpus/cudnn/include/cudnn_version.h",
        ),
    ),
)


def header_defines(text: str) -> dict[str, str]:
    """``#define NAME VALUE`` lines of a C header (the first of each name)."""
    import re

    out: dict[str, str] = {}
    pattern = r"^[ \t]*#[ \t]*define[ \t]+(\w+)(?:[ \t]+(.*?))?[ \t]*$"
    for m in re.finditer(pattern, text, re.MULTILINE):
        value = (m.group(2) or "").split("//")[0].split("/*")[0].strip()
        out.setdefault(m.group(1), value)
    return out


def header_build_facts(package_dir: str) -> dict[str, tuple[Any, str]]:
    """build_info-named facts the headers of an installed TensorFlow state, each
    with its source: ``cuda_version`` ("12.5.1", cuda_config.h), ``cudnn_version``
    ("9.10.0" from cudnn_version.h, else the major from cuda_config.h) and
    ``cuda_compute_capabilities`` (names; bare numbers split as every release that
    stated the split did, all compiled but the last, which is PTX:
    ``cuda_config.h+inferred-ptx``). Empty values (a CPU build) are left out."""
    texts: dict[str, str] = {}
    for name, paths in TF_HEADERS:
        for rel in paths:
            try:
                with open(os.path.join(package_dir, *rel.split("/")), "rb") as f:
                    texts[name] = f.read().decode("utf-8", "replace")
                break
            except OSError:
                continue
    config = header_defines(texts.get("cuda_config.h", ""))
    version = header_defines(texts.get("cudnn_version.h", ""))
    found: dict[str, tuple[Any, str]] = {}
    cuda = config.get("TF_CUDA_VERSION", "").strip('"').strip()
    if cuda:
        found["cuda_version"] = (cuda, "cuda_config.h")
    parts = [version.get(k, "") for k in ("CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL")]
    cudnn_major = config.get("TF_CUDNN_VERSION", "").strip('"').strip()
    if all(p.isdigit() for p in parts):
        found["cudnn_version"] = (".".join(parts), "cudnn_version.h")
    elif cudnn_major:
        found["cudnn_version"] = (cudnn_major, "cuda_config.h")
    raw = config.get("TF_CUDA_COMPUTE_CAPABILITIES", "")
    caps = [t.strip().strip('"').strip() for t in raw.split(",") if t.strip().strip('"')]
    if caps and all(t.startswith(("sm_", "compute_")) for t in caps):
        found["cuda_compute_capabilities"] = (caps, "cuda_config.h")
    elif caps:
        numbers = []
        for t in caps:
            major, _, minor = t.partition(".")
            if not major.isdigit() or (minor and not minor.isdigit()):
                return found  # not a list of capabilities: leave it out
            numbers.append(int(major) * 10 + int(minor) if minor else int(major))
        names = [f"sm_{n}" for n in numbers[:-1]] + [f"compute_{numbers[-1]}"]
        found["cuda_compute_capabilities"] = (names, "cuda_config.h+inferred-ptx")
    return found


def with_header_facts(
    info: dict[str, object], package_dir: str
) -> tuple[dict[str, object], dict[str, str]]:
    """``info`` (TensorFlow's build_info) completed from the headers where it lacks
    a fact, and where each fact came from ("build_info", "cuda_config.h", ...)."""
    out = dict(info)
    sources = {k: "build_info" for k in TF_FACTS if info.get(k)}
    missing = [k for k in TF_FACTS if not info.get(k)]
    if missing and package_dir:
        facts = header_build_facts(package_dir)
        for key in missing:
            if key in facts:
                out[key], sources[key] = facts[key]
    return out, sources


TF_FACTS = ("cuda_version", "cudnn_version", "cuda_compute_capabilities")


def tensorflow() -> TfProbe:
    start = time.monotonic()
    try:
        import tensorflow as tf  # the framework of the venv under inspection
    except BaseException as e:  # an ImportError, or whatever a broken build raises
        return {
            "imported": False,
            "error": {"type": type(e).__name__, "message": str(e)[:4000]},
            "seconds": round(time.monotonic() - start, 3),
        }
    out: TfProbe = {"imported": True, "version": getattr(tf, "__version__", None)}
    try:
        raw = _plain(dict(tf.sysconfig.get_build_info()))
        # 2.22 and later state CUDA, cuDNN and capabilities only in the package's
        # headers: build_info gains them where it lacks them, build_info_from says
        # where each came from (a key older readers ignore)
        package = os.path.dirname(str(getattr(tf, "__file__", None) or ""))
        out["build_info"], out["build_info_from"] = with_header_facts(raw, package)
    except Exception as e:
        out["build_info_error"] = f"{type(e).__name__}: {e}"
    try:
        out["gpus"] = [d.name for d in tf.config.list_physical_devices("GPU")]
    except Exception as e:
        out["gpus_error"] = f"{type(e).__name__}: {e}"
    out["seconds"] = round(time.monotonic() - start, 3)
    return out


TF_NAMES = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly", "intel-tensorflow")


def sonames(cuda: str, cudnn: str) -> list[str]:
    """The CUDA/cuDNN libraries a framework built with CUDA ``cuda`` opens.

    cuFFT, cuSOLVER, cuSPARSE and cuRAND carry their own majors, not CUDA's: under
    CUDA 13 the nvidia-cufft 12.x, -cusolver 12.x and -cusparse 12.x wheels install
    libcufft.so.12, libcusolver.so.12 and libcusparse.so.12, nvidia-curand 10.x
    libcurand.so.10 (read on the GPU machine, docs/gpu-run/issue40-43/env.txt). For
    a CUDA major not listed here only the runtime and cuBLAS (named by CUDA's own
    major) and cuDNN are named: the others are not guessed."""
    major = cuda.split(".")[0]
    own = {
        "12": ("libcufft.so.11", "libcusparse.so.12", "libcusolver.so.11", "libcurand.so.10"),
        "13": ("libcufft.so.12", "libcusparse.so.12", "libcusolver.so.12", "libcurand.so.10"),
    }
    if major == "11":
        names = ["libcudart.so.11.0", "libcublas.so.11", "libcublasLt.so.11", "libcufft.so.10"]
        names += ["libcusparse.so.11", "libcusolver.so.11", "libcurand.so.10"]
    else:
        names = ["libcudart.so." + major, "libcublas.so." + major, "libcublasLt.so." + major]
        names += list(own.get(major, ()))
    return names + ["libcudnn.so." + cudnn.split(".")[0]]


def main(argv: list[str]) -> int:
    """--deep, --tensorflow (import it), --tensorflow-if-installed, --library SONAME
    (repeated), --libraries-from-build (those TensorFlow's build_info implies)."""
    deep = "--deep" in argv
    names = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--library"]
    doc: ProbeDoc = {
        "schema": SCHEMA,
        "python": {
            "executable": sys.executable,
            "version": platform.python_version(),
            "prefix": sys.prefix,
            "base_prefix": getattr(sys, "base_prefix", sys.prefix),
            "libc": list(platform.libc_ver()),
        },
        "markers": marker_environment(),
        "environment": {
            key: os.environ.get(key)
            for key in ("LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "VIRTUAL_ENV")
        },
    }
    dists = distributions(deep)
    doc["distributions"] = dists
    has_tf = any(str(d["name"]).lower().replace("_", "-") in TF_NAMES for d in dists)
    if "--tensorflow" in argv or ("--tensorflow-if-installed" in argv and has_tf):
        doc["tensorflow"] = tensorflow()
        info = doc["tensorflow"].get("build_info") or {}
        if "--libraries-from-build" in argv and info.get("is_cuda_build"):
            names = names or sonames(str(info.get("cuda_version")), str(info.get("cudnn_version")))
    folders = wheel_library_folders()
    doc["library_folders"] = folders
    doc["libraries"] = [library(s, folders) for s in names]
    sys.stdout.write("\n" + MARK + json.dumps(doc) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
