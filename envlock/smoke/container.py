"""Start the smoke harness inside an image through the Docker Engine API.

The runner's own files (the harness, when the image lacks it, and the GPU peaks)
are copied into the container before it starts; stderr is streamed as it comes;
a container that dies before the harness answers gets the FAILED document
``envlock.smoke.runner`` writes. docker-py is imported inside the functions
that use it.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tarfile
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from envlock.errors import EnvironmentFailure, UsageError
from envlock.smoke import HARNESS_PATH

if TYPE_CHECKING:
    from envlock.image.ref import ImageRef
    from envlock.smoke.harness import CheckEntry, Peak
    from envlock.smoke.result import SmokeRun
from envlock.smoke.runner import (
    EXIT_NO_SHELL,
    INJECT_DIR,
    TOOLKIT_HINT,
    failed_result,
    gpu_peaks,
    harness_args,
    interpret,
    log_tail,
    recompute_status,
)

# Chosen inside the container: the bundle's venv, else any python3; files the
# runner injected stand in for those the image lacks.
_LAUNCH = r"""
py=""
for c in /opt/venv/bin/python python3 python; do
  if command -v "$c" >/dev/null 2>&1; then py=$c; break; fi
done
if [ -z "$py" ]; then
  echo "envlock-smoke: no Python interpreter in the image" >&2
  exit 127
fi
harness=/opt/envlock/envlock_smoke.py
[ -f "$harness" ] || harness=/.envlock-smoke/envlock_smoke.py
set -- "$harness" "$@"
if [ -f /opt/envlock/expect.json ]; then set -- "$@" --expect /opt/envlock/expect.json; fi
if [ -f /.envlock-smoke/peaks.json ]; then set -- "$@" --peaks /.envlock-smoke/peaks.json; fi
exec "$py" "$@"
"""


def _device_requests(gpus: str) -> list[Any]:
    import docker

    if gpus == "none":
        return []
    count = -1 if gpus == "all" else int(gpus)
    return [docker.types.DeviceRequest(count=count, capabilities=[["gpu"]])]


def parse_gpus(value: str) -> str:
    """Validate --gpus: all, none or a positive count."""
    if value in ("all", "none"):
        return value
    if value.isdigit() and int(value) > 0:
        return value
    raise UsageError(f"--gpus {value!r}: expected all, none or a number of GPUs", hint="--gpus all")


def _injected_files(peaks: list[Peak] | None) -> bytes:
    """A tar of the runner's harness (+ peaks) for images that lack them."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        top = tarfile.TarInfo(INJECT_DIR.strip("/"))
        top.type = tarfile.DIRTYPE
        top.mode = 0o755
        tar.addfile(top)
        files = {"envlock_smoke.py": HARNESS_PATH.read_bytes()}
        if peaks:
            files["peaks.json"] = json.dumps(peaks).encode()
        for name, data in files.items():
            info = tarfile.TarInfo(f"{INJECT_DIR.strip('/')}/{name}")
            info.size = len(data)
            info.mode = 0o644
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _is_gpu_request_error(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "device driver" in text or "nvidia" in text or "gpu" in text


def _as_ref(image: str | ImageRef) -> ImageRef | None:
    """``image`` as a reference: an ImageRef as handed over, text parsed (None: an image id)."""
    from envlock.image import ref as imageref

    return imageref.match(image) if isinstance(image, str) else image


def _local_or_pulled(docker_client: Any, image: str, ref: ImageRef | None) -> Any:
    """The local image ``image``; one named by digest that is not local is pulled by digest.

    The engine finds ``REPO@sha256:<digest>`` locally when the image carries
    that RepoDigest (it was pushed or pulled so); otherwise the engine pulls
    exactly that manifest. A registry the engine cannot reach is exit 3; a
    digest the registry does not hold is exit 2.
    """
    from docker.errors import APIError, ImageNotFound

    from envlock.image import engine

    try:
        return docker_client.images.get(image)
    except ImageNotFound as e:
        if ref is None or ref.digest is None:
            raise UsageError(
                f"no image {image!r} in this Docker Engine",
                hint="build it with `envlock build DIR --tag NAME`, or check the name",
            ) from e
        missing = e
    pinned = ref.pinned
    sys.stderr.write(f"envlock: {pinned} is not local; pulling it by digest\n")
    said = ""
    status: int | None = None
    try:
        # errors after the pull started come inside the progress stream, not as HTTP errors
        stream = docker_client.api.pull(ref.repository, tag=ref.digest, stream=True, decode=True)
        for line in stream:
            if isinstance(line, dict) and line.get("error"):
                said = str(line["error"])
    except APIError as e:
        said, status = str(getattr(e, "explanation", "") or engine.short(e)), e.status_code
    if not said:
        try:
            return docker_client.images.get(pinned)
        except ImageNotFound:
            said = "the engine reported no error, but the image is not there"
    if status == 404 or "manifest unknown" in said.lower() or "not found" in said.lower():
        raise UsageError(
            f"the registry holds no image {pinned} ({said})",
            hint="check the repository and digest (`envlock build --push` prints the digest)",
        ) from missing
    raise EnvironmentFailure(
        f"cannot pull {pinned}: {said}",
        hint="check that the registry runs and that the Docker Engine can reach it",
    )


def run_in_image(
    image: str | ImageRef,
    *,
    gpus: str = "all",
    allow_cpu: bool = False,
    framework: str | None = None,
    size: int | None = None,
    extra: list[str] | None = None,
    timeout: float = 3600,
    client: Any = None,
    log: Any = None,
    warn: Callable[[str], Any] | None = None,
) -> SmokeRun:
    """Run the image's harness in a container without network; GPUs by device request.

    ``warn`` is given envlock's own notes on the run (a GPU request the engine
    refused), one line each; None writes them to stderr (``ci build`` prefixes
    them with the cell).

    The harness's log goes to ``log`` (``write``/``flush``) as it comes; None
    is envlock's stderr.

    ``image`` is a local name or id, or ``REPO@sha256:<digest>``: that manifest,
    found locally by its RepoDigest or pulled by digest through the engine; an
    ``ImageRef`` (``ci build``'s pushed cell) is not parsed again.
    """
    from docker.errors import APIError

    from envlock.image import engine

    ref = _as_ref(image)
    image = str(image)
    gpus = parse_gpus(gpus)
    doing = f"while running the smoke test in {image}"
    hint = "check `docker info` and the image"
    with engine.session(doing, client=client, hint=hint) as docker_client:
        img = _local_or_pulled(docker_client, image, ref)
        labels = (img.attrs.get("Config") or {}).get("Labels") or {}
        framework = framework or labels.get("io.envlock.framework")
        args = harness_args(framework=framework, allow_cpu=allow_cpu, size=size, extra=extra)
        command = ["/bin/sh", "-c", _LAUNCH, "envlock-smoke", *args]
        payload = _injected_files(gpu_peaks())
        pre_checks: list[CheckEntry] = []
        requests = _device_requests(gpus)
        try:
            stdout, stderr, code = _run_container(
                docker_client, img.id, command, payload, requests, timeout, log
            )
        except APIError as e:
            if not requests or not _is_gpu_request_error(e):
                raise
            engine_said = str(getattr(e, "explanation", "") or engine.short(e))
            reason = (
                f"the GPU request failed when the container started ({engine_said}): "
                f"{TOOLKIT_HINT}; the harness ran without GPUs"
            )
            pre_checks.append(
                {"name": "gpu_request", "status": "WARN" if allow_cpu else "FAIL", "reason": reason}
            )
            if warn is not None:
                warn(f"warning: {reason}")
            else:
                sys.stderr.write(f"envlock: {reason}\n")
            stdout, stderr, code = _run_container(
                docker_client, img.id, command, payload, [], timeout, log
            )
    if code is None:
        result = failed_result(
            f"the harness did not finish within {timeout:.0f} s; the container was stopped",
            framework=framework,
            stderr_tail=log_tail(stderr),
        )
    else:
        result = interpret(stdout, stderr, code, framework)
    if pre_checks:
        result["checks"] = pre_checks + list(result.get("checks", []))
        recompute_status(result)
    result["image"] = {"ref": image, "id": img.id, "labels": labels}
    pinned = ref.pinned if ref is not None else None
    if pinned is not None:  # run by REPO@sha256:<manifest digest>: the report's subject
        result["image"]["pinned"] = pinned
    result["runner"] = {"kind": "docker", "gpus": gpus, "network": "none"}
    return result


class _StderrPump:
    """Copy a container's stderr to envlock's stderr while it runs.

    A thread follows the log stream (docker-py ``logs(stream=True,
    follow=True)``; docker-py lifts the client's read timeout on such streams,
    so it lasts as long as the container) and writes each chunk as it arrives.
    ``finish`` takes the whole log once the container has ended and writes what
    the thread had not (all of it when the stream broke early), so nothing is
    lost or written twice.
    """

    def __init__(self, container: Any, sink: Any) -> None:
        import codecs

        self._container = container
        self._sink = sink
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._lock = threading.Lock()
        self._written = 0  # bytes of the log already copied to the sink
        self._closed = False
        self._stream: Any = None
        self._last = ""
        self._thread = threading.Thread(target=self._follow, name="envlock-smoke-log", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _emit(self, chunk: bytes) -> None:
        """Write ``chunk`` (bytes at offset ``_written`` of the log); under the lock."""
        text = self._decoder.decode(chunk)
        self._written += len(chunk)
        if text:
            self._sink.write(text)
            self._sink.flush()
            self._last = text

    def _follow(self) -> None:
        with contextlib.suppress(Exception):  # a broken stream: finish() writes the rest
            stream = self._container.logs(stream=True, follow=True, stdout=False, stderr=True)
            with self._lock:
                if self._closed:
                    stream.close()
                    return
                self._stream = stream
            for chunk in stream:
                with self._lock:
                    if self._closed:
                        return
                    self._emit(chunk)

    def finish(self, full: bytes, wait: float = 10.0) -> None:
        """Stop following and write what of ``full`` (the whole log) is not written yet."""
        self._thread.join(wait)
        with self._lock:
            self._closed = True
            if self._stream is not None:
                with contextlib.suppress(Exception):  # already closed by its end
                    self._stream.close()
            if len(full) > self._written:
                self._emit(full[self._written :])
            tail = self._decoder.decode(b"", final=True)
            if tail:
                self._sink.write(tail)
                self._last = tail
            if self._last and not self._last.endswith("\n"):
                self._sink.write("\n")
            self._sink.flush()


def _run_container(
    client: Any,
    image_id: str,
    command: list[str],
    payload: bytes,
    device_requests: list[Any],
    timeout: float,
    log: Any = None,
) -> tuple[str, str, int | None]:
    """Create, inject, start, wait; returns (stdout, stderr, exit code or None on timeout).

    The harness's stderr (its progress lines) reaches envlock's stderr while the
    container runs; stdout (the JSON document) is read whole at the end.
    """
    container = client.containers.create(
        image_id,
        command=command,
        entrypoint=[],
        network_mode="none",
        device_requests=device_requests or None,
        detach=True,
        labels={"io.envlock.smoke": "1"},
    )
    from docker.errors import APIError

    try:
        container.put_archive("/", payload)
        try:
            container.start()
        except APIError as e:
            text = str(getattr(e, "explanation", "") or e)
            if "/bin/sh" in text and ("no such file" in text or "not found" in text):
                stderr = f"envlock-smoke: no shell in the image ({text})\n"
                (log or sys.stderr).write(stderr)
                return "", stderr, EXIT_NO_SHELL
            raise
        pump = _StderrPump(container, log or sys.stderr)
        pump.start()
        code: int | None
        try:
            try:
                status = container.wait(timeout=timeout)
                code = int(status.get("StatusCode", 1))
            except Exception:  # noqa: BLE001 - requests' read timeout: the run is too long
                container.kill()
                code = None
            stdout = container.logs(stdout=True, stderr=False).decode("utf-8", "replace")
            raw_stderr = container.logs(stdout=False, stderr=True)
        except BaseException:
            pump.finish(b"", wait=0)
            raise
        pump.finish(raw_stderr)
        return stdout, raw_stderr.decode("utf-8", "replace"), code
    finally:
        with contextlib.suppress(Exception):  # best effort cleanup
            container.remove(force=True)
