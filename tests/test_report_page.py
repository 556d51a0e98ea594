"""envlock report page: many reports verified and written as one static HTML page.

The page is checked twice: its summary.json and HTML text here, and the DOM and
a screenshot from a real headless Chromium (Debian's ``chromium``, installed
by tests/chromium/setup.sh) in the tests marked below.
"""

from __future__ import annotations

import base64
import copy
import html.parser
import json
import os
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest

from envlock import fsutil
from envlock.ci.summary import write_ci_page
from envlock.report import envelope_bytes, sign_result, statement
from tests.report_support import cli, make_bundle, make_keys, smoke_result

XSS = '<script>document.title="pwned"</script><b>bold</b>'
ENV_DISTS = ["numpy==2.1.0", "nvidia-cublas-cu12==12.4.5.8", "tensorflow==2.15.1"]


def _result(version: str, python: str = "3.11.9", reason: str | None = None) -> dict[str, Any]:
    r = smoke_result()
    r["version"] = version
    r["expected"]["version"] = version
    r["host"]["python"] = python
    r["checks"][0]["reason"] = reason or f"TensorFlow {version}"
    r["benchmark"] = {
        "device": "gpu:0",
        "gpu": "NVIDIA H100 80GB HBM3",
        "results": [
            {"op": "matmul", "dtype": "fp32", "math": "fp32", "device": "gpu:0", "tflops": 48.1},
            {"op": "matmul", "dtype": "bf16", "math": "bf16", "device": "gpu:0", "tflops": 610.0},
        ],
    }
    return r


def _sign(tmp: Path, name: str, result: dict[str, Any], key: Path, **kw: Any) -> Path:
    env = sign_result(result, key, lock_dir=kw.pop("lock_dir", None), image_id=None, **kw)
    path = tmp / f"{name}.intoto.json"
    path.write_bytes(envelope_bytes(env))
    return path


def _tamper(path: Path, out: Path) -> Path:
    """The same envelope with PASSED rewritten in the payload; the signature kept."""
    env = json.loads(path.read_text())
    doc = json.loads(base64.b64decode(env["payload"]))
    doc["predicate"]["envlock"]["smoke"]["host"]["hostname"] = "somewhere-else"
    env["payload"] = base64.b64encode(json.dumps(doc).encode()).decode()
    out.write_text(json.dumps(env))
    return out


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Signed reports of a small matrix, plus a tampered one and one by another key."""
    tmp = tmp_path_factory.mktemp("page")
    key, pub = make_keys(tmp, "team")
    other, _ = make_keys(tmp, "stranger")
    bundle = make_bundle(tmp, "bundle-215")
    reports = [
        _sign(tmp, "tf-2.10", _result("2.10.1"), key, lock_dir=bundle),
        _sign(tmp, "tf-2.9", _result("2.9.3", "3.10.14"), key, lock_dir=bundle),
        _sign(tmp, "tf-2.15", _result("2.15.1", reason=XSS), key, lock_dir=bundle),
    ]
    host = _result("2.16.2")
    host["environment"] = {"distributions": ENV_DISTS}
    reports.append(_sign(tmp, "host-env", host, key))
    tampered = _tamper(reports[0], tmp / "tampered.intoto.json")
    unknown = _sign(tmp, "unknown-key", _result("2.11.0"), other, lock_dir=bundle)
    return {
        "tmp": tmp,
        "pub": pub,
        "key": key,
        "bundle": bundle,
        "good": reports,
        "tampered": tampered,
        "unknown": unknown,
    }


def _page(capsys: Any, m: dict[str, Any], out: Path, *extra: str) -> tuple[int, str, str]:
    files = [str(p) for p in [*m["good"], m["tampered"], m["unknown"]]]
    return cli(capsys, "report", "page", *files, "--key", str(m["pub"]), "-o", str(out), *extra)


def test_page_sorts_numerically_and_lists_the_unverified(
    capsys: Any, matrix: dict[str, Any], tmp_path: Path
) -> None:
    code, out, err = _page(capsys, matrix, tmp_path / "page")
    assert code == 1, err  # two reports did not verify; the page is written all the same
    assert "2 report(s) did not verify" in err
    doc = json.loads((tmp_path / "page" / "summary.json").read_text())
    assert doc["schema"] == "envlock.report-page/v1"
    assert [c["version"] for c in doc["cells"]] == ["2.9.3", "2.10.1", "2.15.1", "2.16.2"]
    assert all(c["verified"] and c["result"] == "PASSED" for c in doc["cells"])
    bad = {Path(r["report"]).name: r["reasons"] for r in doc["unverified"]}
    assert set(bad) == {"tampered.intoto.json", "unknown-key.intoto.json"}
    assert "changed after it was signed" in bad["tampered.intoto.json"][0]
    assert bad["unknown-key.intoto.json"][0].startswith("signed by an unknown key")
    assert "NOT VERIFIED" in out and str(tmp_path / "page" / "index.html") in out
    # nothing was compared with the subjects: each row says so
    assert {c["subject_note"] for c in doc["cells"]} == {"subject not checked"}
    cell = doc["cells"][0]
    assert cell["gpu"] == "NVIDIA H100 80GB HBM3" and cell["driver"] == "550.54.15"
    assert cell["python"] == "3.10.14"
    bf16 = cell["benchmark"][1]
    assert bf16["dtype"] == "bf16" and bf16["peak_tflops"] == 989.0  # from matrices/gpus.toml
    assert bf16["fraction_of_peak"] == round(610.0 / 989.0, 4)
    host = doc["cells"][3]
    assert host["subject_kind"] == "environment" and host["cuda_source"] == "pip (seen)"


def test_html_is_self_contained_and_escapes_reasons(
    capsys: Any, matrix: dict[str, Any], tmp_path: Path
) -> None:
    _page(capsys, matrix, tmp_path / "page")
    text = (tmp_path / "page" / "index.html").read_text()
    assert "&lt;script&gt;document.title=&#34;pwned&#34;&lt;/script&gt;" in text
    assert XSS not in text and "<b>bold" not in text
    assert text.count("<script") == 1  # the page's own few lines of sorting
    for external in ("src=", "href=", "@import", "url("):
        assert external not in text, external


def test_claimed_lock_that_differs_is_not_verified(
    capsys: Any, matrix: dict[str, Any], tmp_path: Path
) -> None:
    other = make_bundle(tmp_path, "other-bundle")
    code, _, _ = cli(
        capsys,
        "report",
        "page",
        str(matrix["good"][0]),
        "--key",
        str(matrix["pub"]),
        "--lock",
        str(other),
        "-o",
        str(tmp_path / "p"),
    )
    assert code == 1
    doc = json.loads((tmp_path / "p" / "summary.json").read_text())
    assert doc["cells"] == []
    assert any("configuration[pylock.toml].sha256" in r for r in doc["unverified"][0]["reasons"])
    code, _, _ = cli(
        capsys,
        "report",
        "page",
        str(matrix["good"][0]),
        "--key",
        str(matrix["pub"]),
        "--lock",
        str(matrix["bundle"]),
        "-o",
        str(tmp_path / "q"),
    )
    assert code == 0
    doc = json.loads((tmp_path / "q" / "summary.json").read_text())
    assert doc["cells"][0]["subject_checked"] is True
    assert doc["cells"][0]["subject_note"] == "subject matches pylock.toml"


def _ci_summary(folder: Path, cells: list[dict[str, Any]]) -> Path:
    path = folder / "summary.json"
    path.write_text(json.dumps({"schema": "envlock.ci-build/v1", "cells": cells}))
    return path


def test_summary_claims_the_pinned_image(tmp_path: Path, capsys: Any) -> None:
    key, pub = make_keys(tmp_path, "ci")
    run = tmp_path / "run"
    run.mkdir()
    digest_a, digest_b = "a1" * 32, "b2" * 32
    cells = []
    for cell, digest, pinned in (
        ("tf215-py311", digest_a, digest_a),
        ("tf216-py311", digest_a, digest_b),  # the report names another manifest
    ):
        folder = make_bundle(run, cell)
        ref = f"127.0.0.1:5000/page/tf@sha256:{digest}"
        _sign(folder, "report", _result("2.15.1"), key, lock_dir=folder, image_ref=ref)
        cells.append(
            {
                "cell": cell,
                "report": f"{cell}/report.intoto.json",
                "pinned": f"127.0.0.1:5000/page/tf@sha256:{pinned}",
            }
        )
    cells.append({"cell": "tf217-py312", "report": None, "reason": "build: step 3/9 failed"})
    summary = _ci_summary(run, cells)
    code, _, _ = cli(
        capsys, "report", "page", "--summary", str(summary), "--key", str(pub), "-o", str(run / "p")
    )
    assert code == 1
    doc = json.loads((run / "p" / "summary.json").read_text())
    assert [c["cell"] for c in doc["cells"]] == ["tf215-py311"]
    assert doc["cells"][0]["subject_checked"]
    assert "127.0.0.1:5000/page/tf@sha256:" + digest_a in doc["cells"][0]["subject_note"]
    assert doc["unverified"][0]["cell"] == "tf216-py311"
    assert any("subject.digest.sha256" in r for r in doc["unverified"][0]["reasons"])
    assert doc["cells_without_report"] == [
        {"cell": "tf217-py312", "reason": "build: step 3/9 failed"}
    ]
    # what ci build --sign calls at the end of a run: the same page, beside the summary
    path = write_ci_page(run, key)
    assert path == run / "report-page" / "index.html" and path.is_file()
    again = json.loads((run / "report-page" / "summary.json").read_text())
    assert [c["cell"] for c in again["cells"]] == ["tf215-py311"]
    assert "report page:" in capsys.readouterr().err


def test_bad_inputs_exit_2(capsys: Any, matrix: dict[str, Any], tmp_path: Path) -> None:
    base = ["report", "page", "--key", str(matrix["pub"]), "-o", str(tmp_path / "p")]
    code, _, err = cli(capsys, *base)
    assert code == 2 and "no REPORT given" in err
    code, _, err = cli(capsys, *base, str(tmp_path / "missing.json"))
    assert code == 2 and "does not exist" in err and "Traceback" not in err
    code, _, err = cli(
        capsys, *base[:2], str(matrix["good"][0]), "--key", str(matrix["key"]), "-o", "x"
    )
    assert code == 2 and "Traceback" not in err
    assert not (tmp_path / "p").exists()


def test_a_report_that_is_a_device_a_fifo_or_huge_is_exit_2_without_reading_it(
    capsys: Any, matrix: dict[str, Any], tmp_path: Path
) -> None:
    """Issue 38, break 6: a report path of /dev/zero was read whole (a MemoryError
    traceback), a FIFO hung forever. Every input a user names goes through
    fsutil.read_input: a regular file, bounded."""
    import os

    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    huge = tmp_path / "huge.intoto.json"
    with huge.open("wb") as f:
        f.truncate(fsutil.MAX_INPUT_BYTES + 1)  # sparse: no disk used
    base = ["report", "page", "--key", str(matrix["pub"]), "-o", str(tmp_path / "p")]
    for path, problem in [
        ("/dev/zero", "report /dev/zero is not a regular file (a FIFO, a device or a socket)"),
        (str(fifo), f"report {fifo} is not a regular file (a FIFO, a device or a socket)"),
        (str(huge), f"report {huge}: {fsutil.MAX_INPUT_BYTES + 1} bytes, more than the "),
    ]:
        code, _, err = cli(capsys, *base, str(matrix["good"][0]), path)
        assert code == 2 and problem in err and "Traceback" not in err, err
    assert not (tmp_path / "p").exists()


# ---------------------------------------------------------------- environment subject


def test_environment_subject_signs_and_verifies(
    capsys: Any, matrix: dict[str, Any], tmp_path: Path
) -> None:
    report = matrix["good"][3]
    doc = json.loads(base64.b64decode(json.loads(report.read_text())["payload"]))
    canonical = "".join(d + "\n" for d in sorted(ENV_DISTS)).encode()
    import hashlib

    assert doc["subject"] == [
        {"name": "environment", "digest": {"sha256": hashlib.sha256(canonical).hexdigest()}}
    ]
    assert doc["predicate"]["envlock"]["subject_kind"] == "environment"
    code, out, _ = cli(capsys, "verify", str(report), "--key", str(matrix["pub"]))
    assert code == 0, out
    assert "not checked (nothing given to compare it with)" in out


def test_environment_digest_is_bound(matrix: dict[str, Any], tmp_path: Path) -> None:
    from envlock.errors import DataError

    edited = _result("2.16.2")
    edited["environment"] = {"distributions": ENV_DISTS, "sha256": "0" * 64}
    with pytest.raises(DataError, match="environment.sha256"):
        sign_result(edited, matrix["key"], lock_dir=None, image_id=None)
    # a statement whose subject is not the digest of the signed list
    good = _result("2.16.2")
    good["environment"] = {"distributions": ENV_DISTS}
    doc = statement.build_statement(good)
    bad = copy.deepcopy(doc)
    bad["predicate"]["envlock"]["smoke"]["environment"]["distributions"] = ENV_DISTS[:2]
    assert statement.statement_problems(doc) == []
    assert any("not the digest" in p for p in statement.statement_problems(bad))


def test_harness_records_the_environment() -> None:
    from envlock.smoke import harness

    env = harness.installed_environment()
    assert env["distributions"] == sorted(env["distributions"])
    assert any(d.startswith("envlock-gpu==") for d in env["distributions"])
    assert env["sha256"] == statement.environment_digest({"environment": env})


# ---------------------------------------------------------------- real Chromium

CHROMIUM = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("ENVLOCK_REQUIRE_CHROMIUM"),
    reason="Debian's chromium is not installed (tests/chromium/setup.sh installs it)",
)


def _chromium(*args: str) -> subprocess.CompletedProcess[bytes]:
    assert CHROMIUM is not None, "chromium is required here (ENVLOCK_REQUIRE_CHROMIUM)"
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", *args]
    return subprocess.run(argv, capture_output=True, timeout=120, check=True)


class _Dom(html.parser.HTMLParser):
    """Cells, not-verified rows, and the text of reason elements, from a dumped DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[str] = []
        self.unverified: list[str] = []
        self.sections: list[str] = []
        self.scripts = 0
        self.title_text = ""
        self._in_title = False
        self.reasons: list[str] = []
        self._reason_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "section":
            self.sections.append(a.get("id") or "")
        if tag == "tbody" and "cell" in classes:
            self.cells.append(a.get("data-report") or "")
        if tag == "tr" and "unverified" in classes:
            self.unverified.append(a.get("data-report") or "")
        if tag in ("script", "b"):
            self.scripts += tag == "script"
            if tag == "b" and self._reason_depth:
                self.reasons.append("<b> ELEMENT")
        if "reason" in classes:
            self._reason_depth += 1
            self.reasons.append("")
        self._in_title = tag == "title"

    def handle_endtag(self, tag: str) -> None:
        if self._reason_depth and tag in ("span", "li"):
            self._reason_depth -= 1
        self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._reason_depth:
            self.reasons[-1] += data
        if self._in_title:
            self.title_text += data


@needs_chromium
@pytest.mark.chromium
def test_chromium_renders_the_page(capsys: Any, matrix: dict[str, Any], tmp_path: Path) -> None:
    _page(capsys, matrix, tmp_path / "page")
    url = (tmp_path / "page" / "index.html").as_uri()
    dom = _Dom()
    dom.feed(_chromium("--dump-dom", url).stdout.decode())
    page = tmp_path / "page"

    def rel(p: Path) -> str:  # paths are shown as seen from the page's folder
        return os.path.relpath(p, page)

    assert sorted(dom.cells) == sorted(rel(p) for p in matrix["good"])
    assert sorted(dom.unverified) == sorted([rel(matrix["tampered"]), rel(matrix["unknown"])])
    assert dom.sections[:2] == ["verified", "not-verified"]
    assert XSS in dom.reasons  # the reason is text in the DOM, not elements
    assert "<b> ELEMENT" not in dom.reasons and dom.scripts == 1
    assert "pwned" not in dom.title_text  # the script in the reason never ran
    shot = tmp_path / "page.png"
    _chromium(f"--screenshot={shot}", "--window-size=1280,900", url)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1280, 900)
    assert len(data) > 10_000  # a page, not a blank image


# ---------------------------------------------------------------- 1,400 px: where the images went

PUSHED_REPO = "ghcr.io/a-rather-long-organisation-name/tensorflow-gpu-environments"
CHECK_NAMES = [
    "framework_version", "build_cuda", "build_cudnn", "gpu_visible", "compute_capability",
    "cudnn_runtime", "op_on_gpu", "memory_growth", "cuda_libraries", "driver_floor",
    "xla_jit", "tf32_matmul",
]  # fmt: skip
BASE = "nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04"

# run by Chromium after the page's own script: every column header and every item of
# each cell's second line, measured where the browser laid it out
MEASURE = """<script>
(function () {
  var out = {vw: document.documentElement.clientWidth, items: [], bars: []};
  document.querySelectorAll("#cells thead th, tr.where .item, tr.where code").forEach(function (e) {
    var r = e.getBoundingClientRect();
    out.items.push({cls: e.className || e.tagName, text: e.textContent.slice(0, 80),
                    left: r.left, right: r.right, width: r.width});
  });
  document.querySelectorAll("svg.bar").forEach(function (svg) {
    var fill = svg.querySelector("rect.fill");
    var frac = svg.dataset.fraction;
    out.bars.push({text: svg.querySelector("text").textContent,
                   fraction: frac === undefined ? null : Number(frac),
                   width: fill ? fill.getBoundingClientRect().width : null});
  });
  var pre = document.createElement("pre");
  pre.id = "measured";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


def _pushed_result(version: str, python: str, *, cpu: bool = False) -> dict[str, Any]:
    r = _result(version, python)
    r["checks"] = [{"name": n, "status": "PASS", "reason": f"{n} ok"} for n in CHECK_NAMES]
    r["image"] = {
        "id": "sha256:" + "1f" * 32,
        "ref": "sha256:" + "1f" * 32,
        "labels": {
            "org.opencontainers.image.base.name": BASE,
            "org.opencontainers.image.base.digest": "sha256:" + "ba" * 32,
        },
    }
    if cpu:  # a CPU run: no datasheet peak, so its numbers get no bar
        r["gpus"] = []
        r["status"] = "WARNED"
        r["checks"][3] = {"name": "gpu_visible", "status": "WARN", "reason": "no GPU visible"}
        r["checks"][6] = {"name": "op_on_gpu", "status": "SKIP", "reason": "no GPU"}
        r["benchmark"]["results"] = [
            {"op": "matmul", "dtype": "fp32", "math": "fp32", "device": "cpu", "tflops": 0.0421},
            {"op": "matmul", "dtype": "bf16", "math": "bf16", "device": "cpu", "tflops": 0.0},
        ]
    return r


@needs_chromium
@pytest.mark.chromium
def test_at_1400_px_the_pushed_reference_signer_and_lock_are_in_view(
    capsys: Any, tmp_path: Path
) -> None:
    """Before: the pushed REPO@sha256 and signer columns began past ~2,500 px, bars of
    rows that each read `fp32 0.0 (no peak)` differed in length, and the details
    showed the runner's absolute paths."""
    import html as htmllib
    import re

    key, pub = make_keys(tmp_path, "ci-signer")
    bundle = make_bundle(tmp_path, "tf2.15.1-py3.10-cuda12.2")
    reports = []
    for i, (version, python, cpu) in enumerate(
        [("2.14.1", "3.10.14", False), ("2.15.1", "3.11.9", False), ("2.16.2", "3.11.9", True)]
    ):
        digest = f"{i:02x}" * 32
        reports.append(
            _sign(
                tmp_path,
                f"cell-{version}",
                _pushed_result(version, python, cpu=cpu),
                key,
                lock_dir=bundle,
                image_ref=f"{PUSHED_REPO}@sha256:{digest}",
            )  # fmt: skip
        )
    out = tmp_path / "site" / "page"
    code, _, err = cli(
        capsys, "report", "page", *map(str, reports), "--key", str(pub), "-o", str(out)
    )
    assert code == 0, err
    text = (out / "index.html").read_text()
    assert str(tmp_path) not in text  # no absolute path of the machine that wrote it
    assert str(tmp_path) not in (out / "summary.json").read_text()
    assert "../../cell-2.14.1.intoto.json" in text and "(../../ci-signer.pub.pem)" in text
    (out / "measure.html").write_text(text.replace("</body>", MEASURE + "\n</body>"))
    dumped = _chromium(
        "--dump-dom", "--window-size=1400,900", (out / "measure.html").as_uri()
    ).stdout.decode()
    found = re.search(r'<pre id="measured">(.*?)</pre>', dumped, re.S)
    assert found, dumped[-2000:]
    m = json.loads(htmllib.unescape(found.group(1)))
    assert 1380 <= m["vw"] <= 1400, m["vw"]
    outside = [i for i in m["items"] if i["left"] < 0 or i["right"] > m["vw"]]
    assert outside == [], outside  # every column and every item of the second lines in view
    codes = [
        i for i in m["items"] if i["cls"] in ("pushed", "pull", "lockdigest", "signer", "base")
    ]
    lock = "sha256:" + hashlib_sha256((bundle / "pylock.toml").read_bytes())
    for i in range(3):
        pushed = f"{PUSHED_REPO}@sha256:{f'{i:02x}' * 32}"
        assert {"cls": "pushed", "text": pushed[:80]}.items() <= next(
            c for c in codes if c["cls"] == "pushed" and c["text"] == pushed[:80]
        ).items()
        assert any(c["cls"] == "pull" and c["text"] == f"docker pull {pushed}"[:80] for c in codes)
        assert f'<code class="pull" title="select to copy">docker pull {pushed}</code>' in text
    assert sum(c["cls"] == "lockdigest" and c["text"] == lock for c in codes) == 3
    assert sum(c["cls"] == "base" and c["text"].startswith(BASE + "@sha256:ba") for c in codes) == 3
    assert all(c["width"] > 0 for c in codes)
    # bars: as long as their share of the peak says; no peak, no bar
    bars = m["bars"]
    assert len(bars) == 6
    for bar in bars:
        if bar["fraction"] is None:
            assert bar["width"] is None and "(no peak)" in bar["text"], bar
        else:
            assert abs(bar["width"] - 120 * min(bar["fraction"], 1.0)) < 0.6, bar
    shot = tmp_path / "page-1400.png"
    _chromium(f"--screenshot={shot}", "--window-size=1400,900", (out / "index.html").as_uri())
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", data[16:24]) == (1400, 900)
    assert {b["text"] for b in bars if b["fraction"] is None} == {
        "fp32 0.0421 (no peak)", "bf16 0 (no peak)",
    }  # fmt: skip


def hashlib_sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()
