"""Shared helpers for the report tests (tests/test_report*.py)."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

from envlock.cli import main
from envlock.report import keys

# A smoke result shaped as docs/contracts.md says the harness prints it. It is
# input to the signer, not an expected output.
SMOKE_RESULT: dict[str, Any] = {
    "schema": "envlock.smoke/v1",
    "status": "PASSED",
    "framework": "tensorflow",
    "version": "2.15.1",
    "expected": {"framework": "tensorflow", "version": "2.15.1", "cuda": "12.2", "cudnn": "8.9"},
    "build_info": {"cuda_version": "12.2", "cudnn_version": "8"},
    "gpus": [
        {
            "name": "NVIDIA H100 80GB HBM3",
            "compute_capability": "9.0",
            "memory_total_mb": 81559,
            "driver": "550.54.15",
        }
    ],
    "checks": [
        {"name": "framework_version", "status": "PASS", "reason": "2.15.1"},
        {"name": "build_cuda", "status": "PASS", "reason": "12.2"},
        {"name": "gpu_visible", "status": "PASS", "reason": "1 GPU"},
        {"name": "op_on_gpu", "status": "PASS", "reason": "MatMul on /GPU:0"},
    ],
    "benchmark": {"matmul": {"fp32_tflops": 48.1, "fp16_tflops": 610.0}},
    "settings": {},
    "host": {"hostname": "gpu-1"},
    "duration_s": 12.5,
}


def smoke_result(status: str = "PASSED", **failing: str) -> dict[str, Any]:
    """A copy of SMOKE_RESULT with ``status``; ``failing`` maps check -> FAIL/WARN."""
    result = copy.deepcopy(SMOKE_RESULT)
    result["status"] = status
    for check in result["checks"]:
        if check["name"] in failing:
            check["status"] = failing[check["name"]]
    return result


def make_keys(tmp: Path, name: str = "key", key_type: str = "ecdsa-p256") -> tuple[Path, Path]:
    pair = keys.write_keypair(tmp / name, key_type)
    return pair.private_path, pair.public_path


def make_bundle(tmp: Path, name: str = "bundle") -> Path:
    """A bundle folder with the three files a report pins (content varies by name)."""
    d = tmp / name
    d.mkdir()
    (d / "pylock.toml").write_text(f'lock-version = "1.0"\n# {name}\n')
    (d / "requirements.txt").write_text(f"tensorflow==2.15.1 \\\n    --hash=sha256:{'0' * 64}\n")
    (d / "Dockerfile").write_text("ARG BASE_IMAGE=scratch\nFROM ${BASE_IMAGE}\n")
    return d


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def decode(envelope: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(base64.b64decode(envelope["payload"]))
    return doc


def cli(capsys: Any, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def signed_report(
    capsys: Any, tmp: Path, image: str, result: dict[str, Any] | None = None
) -> tuple[Path, Path]:
    """(report, public key): ``result`` (default: a PASSED smoke result) signed with
    ``envlock report sign --image IMAGE`` and a fresh key."""
    priv, pub = make_keys(tmp)
    source = tmp / "result.json"
    source.write_text(json.dumps(result or smoke_result()), encoding="utf-8")
    report = tmp / "report.intoto.json"
    argv = ["report", "sign", str(source), "--key", str(priv), "--image", image]
    code, _, err = cli(capsys, *argv, "-o", str(report))
    assert code == 0, err
    return report, pub


# -- fuzzing (tests/test_report_fuzz.py and bench/fuzz_reports.py) -------------
#
# Documents are built as Python values and written with json.dumps; the tokens
# below stand for what json.dumps cannot write (or writes differently) and are
# swapped into the text afterwards: a 5000-digit integer, NaN, a float that
# overflows to infinity, an escaped lone surrogate.

RAW_TOKENS = {
    "@@HUGE@@": "9" * 5000,
    "@@BIGINT@@": str(2**64),
    "@@NAN@@": "NaN",
    "@@INF@@": "1e999",
    "@@SURR@@": '"\\ud800x"',
}
IMAGE_ID = "sha256:" + "5e" * 32


def json_values() -> Any:
    """Hypothesis strategy: any JSON-ish value, including the raw tokens."""
    from hypothesis import strategies as st

    scalars = (
        st.none()
        | st.booleans()
        | st.integers(min_value=-(2**70), max_value=2**70)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=12)
        | st.sampled_from(sorted(RAW_TOKENS))
        | st.sampled_from(
            ["PASS", "FAIL", "WARN", "SKIP", "PASSED", "FAILED", "sha256:" + "0" * 64]
        )
    )
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
        ),
        max_leaves=12,
    )


def dump(doc: Any) -> bytes:
    """json.dumps with the raw tokens swapped in (as values, keys or inside lists)."""
    text = json.dumps(doc, allow_nan=True)
    for token, raw in RAW_TOKENS.items():
        text = text.replace(f'"{token}"', raw)
    return text.encode("utf-8", "surrogatepass")


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


def mutated_tree(base: Any, under: tuple[tuple[Any, ...], ...] = ((),)) -> Any:
    """Strategy: ``base`` with 1-3 values replaced by any JSON value, or removed;
    only values below one of the paths ``under`` (default: anywhere)."""
    from hypothesis import strategies as st

    @st.composite
    def build(draw: Any) -> Any:
        doc = copy.deepcopy(base)
        for _ in range(draw(st.integers(1, 3))):
            paths = [p for p in _paths(doc) if any(p[: len(u)] == u for u in under)]
            if not paths:
                break
            path = draw(st.sampled_from(paths))
            if not path:
                doc = draw(json_values())
                continue
            parent = doc
            try:
                for step in path[:-1]:
                    parent = parent[step]
                if draw(st.booleans()) and isinstance(parent, dict):
                    del parent[path[-1]]
                else:
                    parent[path[-1]] = draw(json_values())
            except (KeyError, IndexError, TypeError):
                continue
        return doc

    return build()


def mutated_bytes(base: bytes) -> Any:
    """Strategy: ``base`` with bytes flipped, inserted, deleted or cut off."""
    from hypothesis import strategies as st

    @st.composite
    def build(draw: Any) -> bytes:
        data = bytearray(base)
        for _ in range(draw(st.integers(1, 4))):
            if not data:
                break
            at = draw(st.integers(0, len(data) - 1))
            how = draw(st.sampled_from(["flip", "insert", "delete", "cut"]))
            if how == "flip":
                data[at] ^= 1 << draw(st.integers(0, 7))
            elif how == "insert":
                data[at:at] = draw(st.binary(min_size=1, max_size=4))
            elif how == "delete":
                del data[at : at + draw(st.integers(1, 8))]
            else:
                del data[at:]
        return bytes(data)

    return build()


def run_cli(*argv: str) -> tuple[int, str, str]:
    """envlock.cli.main in-process with stdout/stderr captured (no pytest fixture)."""
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


class FuzzBench:
    """Keys, a bundle, a good result and a good envelope in ``root``, and one
    check per kind: each runs the CLI the way a user would and returns the
    exit codes, failing (AssertionError) on an escaped exception, a traceback
    or an exit code outside 0-2."""

    def __init__(self, root: Path) -> None:
        from envlock.report import envelope_bytes, sign_result
        from envlock.report.statement import build_statement

        self.root = root
        self.priv, self.pub = make_keys(root, "fuzz")
        self.bundle = make_bundle(root, "fuzzbundle")
        self.result_bytes = json.dumps(SMOKE_RESULT).encode()
        self.good_result = root / "good-result.json"
        self.good_result.write_bytes(self.result_bytes)
        envelope = sign_result(SMOKE_RESULT, self.priv, lock_dir=self.bundle, image_id=IMAGE_ID)
        self.envelope_bytes = envelope_bytes(envelope)
        self.envelope = envelope
        self.good_report = root / "good.intoto.json"
        self.good_report.write_bytes(self.envelope_bytes)
        self.statement = build_statement(SMOKE_RESULT, lock_dir=self.bundle, image_id=IMAGE_ID)
        self.private_key = keys.load_private(self.priv)
        self.pem = {"private": self.priv.read_bytes(), "public": self.pub.read_bytes()}

    def signed(self, statement_bytes: bytes) -> bytes:
        from envlock.report import dsse

        env = dsse.sign(dsse.INTOTO_PAYLOAD_TYPE, statement_bytes, self.private_key)
        return json.dumps(env.to_dict()).encode()

    @staticmethod
    def _call(*argv: str) -> int:
        code, _, err = run_cli(*argv)
        assert code in (0, 1, 2), (argv, code, err)
        assert "Traceback" not in err, (argv, err)
        if code == 2:
            assert err.startswith("envlock: error: "), (argv, err)
        return code

    def result(self, data: bytes, with_lock: bool) -> list[int]:
        path = self.root / "result.json"
        path.write_bytes(data)
        report = self.root / "fuzzed.intoto.json"
        report.unlink(missing_ok=True)
        lock = ["--lock", str(self.bundle)] if with_lock else []
        argv = ["report", "sign", str(path), "--key", str(self.priv), "--image", IMAGE_ID, *lock]
        code = self._call(*argv, "-o", str(report))
        assert code in (0, 2), code
        codes = [code]
        if code == 0:  # whatever sign writes, its own verify accepts
            v = self._call(
                "verify", str(report), "--key", str(self.pub), "--image", IMAGE_ID, *lock
            )
            assert v == 0, "sign wrote an envelope its own verify rejects"
            assert self._call("report", "show", str(report)) == 0
            codes.append(v)
        else:
            assert not report.exists()
        return codes

    def envelope_file(self, data: bytes) -> list[int]:
        path = self.root / "envelope.json"
        path.write_bytes(data)
        return [
            self._call("verify", str(path), "--key", str(self.pub), "--lock", str(self.bundle)),
            self._call("verify", str(path), "--key", str(self.pub), "--json"),
            self._call("report", "show", str(path)),
            self._call("report", "show", str(path), "--json"),
        ]

    def key_file(self, data: bytes) -> list[int]:
        path = self.root / "key.pem"
        path.write_bytes(data)
        path.chmod(0o600)
        out = self.root / "keyed.intoto.json"
        verify_code = self._call("verify", str(self.good_report), "--key", str(path))
        sign_code = self._call(
            *["report", "sign", str(self.good_result), "--key", str(path)],
            *["--image", IMAGE_ID, "-o", str(out)],
        )
        return [verify_code, sign_code]


def key_strategy(bench: FuzzBench) -> Any:
    from hypothesis import strategies as st

    pems = list(bench.pem.values())
    armor = st.builds(
        lambda label, body: (
            f"-----BEGIN {label}-----\n".encode()
            + base64.encodebytes(body)
            + f"-----END {label}-----\n".encode()
        ),
        st.sampled_from(["PUBLIC KEY", "PRIVATE KEY", "EC PRIVATE KEY", "ENCRYPTED PRIVATE KEY"]),
        st.binary(max_size=200),
    )
    return st.one_of(
        st.sampled_from(pems).flatmap(mutated_bytes),
        armor,
        st.binary(max_size=300),
        st.sampled_from(pems).map(lambda p: p.replace(b"PUBLIC", b"PRIVATE")),
    )


def result_strategy(bench: FuzzBench) -> Any:
    from hypothesis import strategies as st

    free = (("benchmark",), ("host",), ("settings",), ("build_info",), ("gpus",))
    return st.one_of(
        mutated_tree(SMOKE_RESULT).map(dump),
        mutated_tree(SMOKE_RESULT, free).map(dump),
        mutated_bytes(bench.result_bytes),
        json_values().map(dump),
        st.binary(max_size=200),
    )


def envelope_strategy(bench: FuzzBench) -> Any:
    from hypothesis import strategies as st

    smoke = ("predicate", "envlock", "smoke")
    free = ((*smoke, "benchmark"), (*smoke, "host"), ("predicate", "envlock", "measurements"))
    return st.one_of(
        mutated_tree(bench.statement).map(dump).map(bench.signed),
        mutated_tree(bench.statement, free).map(dump).map(bench.signed),
        mutated_tree(bench.envelope).map(dump),
        mutated_bytes(bench.envelope_bytes),
        json_values().map(dump),
        st.binary(max_size=200),
    )
