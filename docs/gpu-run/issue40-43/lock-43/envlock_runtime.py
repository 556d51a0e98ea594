"""Runtime settings of an envlock bundle, as code your training script imports.

    import envlock_runtime
    envlock_runtime.apply()        # before building any model
    import tensorflow as tf

The settings live in ``runtime.json`` (found through the ENVLOCK_RUNTIME_CONFIG
environment variable, else beside this file, else the current folder):

- ``visible_devices``: null (leave CUDA_VISIBLE_DEVICES alone), "" (no GPU),
  "0" or "0,1" (these GPUs only);
- ``memory_growth``: true to let TensorFlow take GPU memory as it needs it
  instead of all of it at start;
- ``mixed_precision``: "float32" (off), "mixed_float16" or "mixed_bfloat16";
- ``determinism``: true to make ops deterministic (slower, and some ops then
  refuse to run);
- ``seed``: an integer that seeds Python, NumPy and TensorFlow, or null.

``apply()`` returns what it did; ``active()`` reports what is in force now
(the smoke harness records it). Standard library only; imports TensorFlow
only when it is needed.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import random
import sys
from typing import Any, Optional, TypedDict

SCHEMA = "envlock.runtime/v1"
ENV_VAR = "ENVLOCK_RUNTIME_CONFIG"
POLICIES = ("float32", "mixed_float16", "mixed_bfloat16")


class Settings(TypedDict):
    """runtime.json complete: every key, defaults filled in (``validate``)."""

    schema: str
    visible_devices: Optional[str]
    memory_growth: bool
    mixed_precision: str
    determinism: bool
    seed: Optional[int]


class Applied(TypedDict, total=False):
    """What ``apply`` put in force."""

    visible_devices: str
    memory_growth: list[str]  # the GPUs whose memory growth was turned on
    mixed_precision: str
    determinism: bool
    seed: int


class Outcome(TypedDict):
    """``apply``'s answer."""

    config: Settings
    source: Optional[str]
    applied: Applied
    errors: list[str]


class Active(TypedDict):
    """``active``'s answer: what is in force in this process now."""

    cuda_visible_devices: Optional[str]
    gpus: list[str]
    memory_growth: dict[str, Optional[bool]]
    mixed_precision: str
    determinism: Optional[bool]
    tf_deterministic_ops: Optional[str]


DEFAULTS = Settings(
    schema=SCHEMA,
    visible_devices=None,
    memory_growth=True,
    mixed_precision="float32",
    determinism=False,
    seed=42,
)


class ConfigError(ValueError):
    """runtime.json is missing a key, has a wrong type or an unknown value."""


def config_path(path: Optional[str] = None) -> Optional[str]:
    """Where the settings come from: ``path``, $ENVLOCK_RUNTIME_CONFIG, beside
    this module, or ./runtime.json; None when there is no such file."""
    candidates = [
        path,
        os.environ.get(ENV_VAR),
        os.path.join(os.path.dirname(os.path.abspath(__file__)), "runtime.json"),
        os.path.join(os.getcwd(), "runtime.json"),
    ]
    for candidate in candidates:
        if candidate and os.path.isfile(candidate):
            return candidate
    if path:
        raise ConfigError(f"{path}: no such file")
    return None


def validate(data: object, origin: str = "runtime.json") -> Settings:
    """Check the settings and return them complete (defaults filled in)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{origin}: expected a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - set(DEFAULTS))
    if unknown:
        raise ConfigError(f"{origin}: unknown setting(s) {', '.join(unknown)}")
    out = DEFAULTS.copy()
    out.update(data)  # type: ignore[typeddict-item]  # known keys; each is checked below
    if out["schema"] != SCHEMA:
        raise ConfigError(f"{origin}: schema is {out['schema']!r}, expected {SCHEMA!r}")
    devices = out["visible_devices"]
    if devices is not None:
        if not isinstance(devices, str):
            raise ConfigError(f'{origin}: visible_devices must be null or a string like "0,1"')
        parts = [p.strip() for p in devices.split(",")] if devices.strip() else []
        if not all(p.isdigit() or p.startswith(("GPU-", "MIG-")) for p in parts):
            raise ConfigError(
                f"{origin}: visible_devices {devices!r} is not a comma-separated list "
                "of GPU indexes or UUIDs"
            )
    for key in ("memory_growth", "determinism"):
        if not isinstance(out[key], bool):
            raise ConfigError(f"{origin}: {key} must be true or false")
    if out["mixed_precision"] not in POLICIES:
        raise ConfigError(
            f"{origin}: mixed_precision {out['mixed_precision']!r} is not one of "
            f"{', '.join(POLICIES)}"
        )
    seed = out["seed"]
    if seed is not None and (
        isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32
    ):
        # NumPy's legacy seeding and PYTHONHASHSEED both stop at 2**32 - 1
        raise ConfigError(f"{origin}: seed must be null or an integer from 0 to 4294967295")
    return out


def load(path: Optional[str] = None) -> Settings:
    """The validated settings; the defaults when no runtime.json is found."""
    found = config_path(path)
    if found is None:
        return DEFAULTS.copy()
    try:
        with open(found, encoding="utf-8") as f:
            data = json.load(f)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{found}: not valid JSON ({e})") from e
    return validate(data, found)


def _tf() -> Any:
    return importlib.import_module("tensorflow")


def apply(config: Optional[dict[str, object]] = None, path: Optional[str] = None) -> Outcome:
    """Put the settings in force; call it before TensorFlow touches a GPU.

    Returns ``{"config": <settings>, "source": <file or None>, "applied": {...},
    "errors": [...]}``; a setting that TensorFlow refuses (for instance memory
    growth after the GPUs were initialised) is listed under ``errors``.
    """
    source = None
    if config is None:
        source = config_path(path)
        settings = load(path)
    else:
        settings = validate(config, "config")
    applied = Applied()
    errors: list[str] = []
    tf_loaded = "tensorflow" in sys.modules

    devices = settings["visible_devices"]
    if devices is not None:
        if tf_loaded:
            errors.append(
                "visible_devices: TensorFlow was imported before apply(); "
                "CUDA_VISIBLE_DEVICES only takes effect in a new process"
            )
        os.environ["CUDA_VISIBLE_DEVICES"] = devices
        applied["visible_devices"] = devices
    if settings["determinism"]:
        # Read by TensorFlow at import time (older releases) and by cuDNN.
        os.environ["TF_DETERMINISTIC_OPS"] = "1"
        os.environ["TF_CUDNN_DETERMINISTIC"] = "1"
    if settings["seed"] is not None:
        os.environ.setdefault("PYTHONHASHSEED", str(settings["seed"]))

    tf = _tf()
    gpus = tf.config.list_physical_devices("GPU")
    if settings["memory_growth"]:
        grown = []
        for gpu in gpus:
            try:
                tf.config.experimental.set_memory_growth(gpu, True)
                grown.append(gpu.name)
            except (RuntimeError, ValueError) as e:
                errors.append(f"memory_growth on {gpu.name}: {e}")
        applied["memory_growth"] = grown
    policy = settings["mixed_precision"]
    if policy != "float32":
        tf.keras.mixed_precision.set_global_policy(policy)
        applied["mixed_precision"] = policy
    if settings["determinism"]:
        enable = getattr(tf.config.experimental, "enable_op_determinism", None)
        if enable is None:
            errors.append("determinism: this TensorFlow has no enable_op_determinism()")
        else:
            enable()
            applied["determinism"] = True
    seed = settings["seed"]
    if seed is not None:
        random.seed(seed)
        with contextlib.suppress(ImportError):
            importlib.import_module("numpy").random.seed(seed)
        tf.random.set_seed(seed)
        applied["seed"] = seed
    return Outcome(config=settings, source=source, applied=applied, errors=errors)


def active() -> Active:
    """What is in force in this process now (TensorFlow must be importable)."""
    tf = _tf()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    gpus = tf.config.list_physical_devices("GPU")
    growth: dict[str, Optional[bool]] = {}
    for gpu in gpus:
        try:
            growth[gpu.name] = bool(tf.config.experimental.get_memory_growth(gpu))
        except (RuntimeError, ValueError):
            growth[gpu.name] = None
    try:
        policy = str(tf.keras.mixed_precision.global_policy().name)
    except Exception as e:  # keras missing or broken: report, do not fail
        policy = f"unknown ({type(e).__name__})"
    checker = getattr(tf.config.experimental, "is_op_determinism_enabled", None)
    if checker is None:  # not exported by TensorFlow up to 2.15 at least
        with contextlib.suppress(ImportError, AttributeError):
            internal = importlib.import_module("tensorflow.python.framework.config")
            checker = internal.is_op_determinism_enabled
    return Active(
        cuda_visible_devices=visible,
        gpus=[gpu.name for gpu in gpus],
        memory_growth=growth,
        mixed_precision=policy,
        determinism=bool(checker()) if checker is not None else None,
        tf_deterministic_ops=os.environ.get("TF_DETERMINISTIC_OPS"),
    )


def main(argv: Optional[list[str]] = None) -> int:
    """``python envlock_runtime.py [runtime.json]``: check the file, print it."""
    args = sys.argv[1:] if argv is None else argv
    try:
        settings = load(args[0] if args else None)
    except ConfigError as e:
        sys.stderr.write(f"envlock_runtime: {e}\n")
        return 2
    sys.stdout.write(json.dumps(settings, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
