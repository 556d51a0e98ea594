"""The smoke result checked before it is signed: its shape, its test lists, its verdict.

``check_result`` takes the JSON that ``envlock smoke --json`` or a bundle's
harness printed (schema ``envlock.smoke/v1``) and refuses, as a DataError, one
whose fields have the wrong types, whose checks do not hold up the status it
claims, or whose per-framework ``frameworks`` entries (issue 40) are malformed
or claim better than the run. It returns the verdict and the passed, warned and
failed test lists that a statement's test-result predicate carries. Also here:
the sha256 digest form (``HEX64``, ``parse_digest``) a result's
``expected.lock_digest`` and a report's digests take.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from envlock.errors import DataError, UsageError

SMOKE_SCHEMA = "envlock.smoke/v1"
RESULTS = ("PASSED", "WARNED", "FAILED")
HEX64 = re.compile(r"[0-9a-f]{64}")
_CHECK_STATUS = {
    "PASS": "passedTests",
    "PASSED": "passedTests",
    "WARN": "warnedTests",
    "WARNED": "warnedTests",
    "FAIL": "failedTests",
    "FAILED": "failedTests",
    "SKIP": None,
    "SKIPPED": None,
}


def parse_digest(value: str, what: str) -> str:
    """'sha256:<hex>' or '<hex>' -> '<hex>'; anything else is a UsageError."""
    hexpart = value[7:] if value.startswith("sha256:") else value
    if not HEX64.fullmatch(hexpart):
        raise UsageError(
            f"{what} {value!r} is not a sha256 digest",
            hint="expected 'sha256:' followed by 64 lowercase hex digits",
        )
    return hexpart


def _tests(result: Mapping[str, Any], where: str) -> dict[str, list[str]]:
    checks = result.get("checks")
    if not isinstance(checks, list):
        raise DataError(f"{where}: checks: missing or not a list", hint=RESULT_HINT)
    lists: dict[str, list[str]] = {"passedTests": [], "warnedTests": [], "failedTests": []}
    for i, check in enumerate(checks):
        if not isinstance(check, dict):
            raise DataError(f"{where}: checks[{i}]: not an object", hint=RESULT_HINT)
        name = check.get("name")
        status = check.get("status")
        if not isinstance(name, str) or not name:
            raise DataError(f"{where}: checks[{i}].name: missing or not a string", hint=RESULT_HINT)
        reason = check.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise DataError(f"{where}: checks[{i}].reason: not a string", hint=RESULT_HINT)
        if not isinstance(status, str) or status.upper() not in _CHECK_STATUS:
            raise DataError(
                f"{where}: checks[{i}].status: {status!r} is not PASS, WARN, FAIL or SKIP",
                hint=RESULT_HINT,
            )
        bucket = _CHECK_STATUS[status.upper()]
        if bucket:
            lists[bucket].append(name)
    return lists


_OPTIONAL_TYPES: dict[str, tuple[type, ...]] = {
    "framework": (str,),
    "version": (str,),
    "expected": (dict,),
    "build_info": (dict,),
    "gpus": (list,),
    "benchmark": (dict,),
    "settings": (dict,),
    "host": (dict,),
    "image": (dict,),
    "environment": (dict,),
    "duration_s": (int, float),
}
_TYPE_NAMES = {str: "a string", dict: "an object", list: "a list", int: "a number"}


def _field_types(result: Mapping[str, Any], where: str) -> None:
    """The fields envlock reads, when present, have the type the harness gives them."""
    for name, types in _OPTIONAL_TYPES.items():
        value = result.get(name)
        if value is None or (isinstance(value, types) and not isinstance(value, bool)):
            continue
        raise DataError(
            f"{where}: {name}: {type(value).__name__} where {_TYPE_NAMES[types[0]]} belongs",
            hint=RESULT_HINT,
        )
    for i, gpu in enumerate(result.get("gpus") or []):
        if not isinstance(gpu, dict):
            raise DataError(f"{where}: gpus[{i}]: not an object", hint=RESULT_HINT)
    expected = result.get("expected") or {}
    digest = expected.get("lock_digest")
    if digest is not None and not isinstance(digest, str):
        raise DataError(f"{where}: expected.lock_digest: not a string", hint=RESULT_HINT)
    if isinstance(digest, str) and digest:
        try:
            parse_digest(digest, "expected.lock_digest")
        except UsageError as e:
            raise DataError(f"{where}: {e.message}", hint=e.hint) from e
    image = result.get("image") or {}
    for name in ("id", "ref"):
        if image.get(name) is not None and not isinstance(image.get(name), str):
            raise DataError(f"{where}: image.{name}: not a string", hint=RESULT_HINT)


RESULT_HINT = "sign the JSON that 'envlock smoke --json' or the bundle's harness printed"


def check_result(result: Any, where: str = "result") -> tuple[str, dict[str, list[str]]]:
    """Validate a smoke result; return (PASSED|WARNED|FAILED, test lists)."""
    if not isinstance(result, dict):
        raise DataError(f"{where}: not a JSON object", hint=RESULT_HINT)
    schema = result.get("schema")
    if schema != SMOKE_SCHEMA:
        raise DataError(
            f"{where}: schema is {schema!r}, expected {SMOKE_SCHEMA!r}", hint=RESULT_HINT
        )
    status = result.get("status")
    if status not in RESULTS:
        raise DataError(
            f"{where}: status is {status!r}, expected one of {', '.join(RESULTS)}",
            hint=RESULT_HINT,
        )
    _field_types(result, where)
    lists = _tests(result, where)
    _status_holds(status, lists, where)
    _frameworks(result, status, where)
    return status, lists


def _worst(lists: Mapping[str, list[str]]) -> str:
    return "FAILED" if lists["failedTests"] else "WARNED" if lists["warnedTests"] else "PASSED"


def _status_holds(status: str, lists: Mapping[str, list[str]], where: str) -> None:
    """A status no better than its checks say (an edited result says better)."""
    worst = _worst(lists)
    if RESULTS.index(worst) > RESULTS.index(status):
        raise DataError(
            f"{where}: status is {status} but the checks say {worst} "
            f"({', '.join(lists['failedTests'] or lists['warnedTests'])})",
            hint="the result was edited or is corrupt; run the smoke test again",
        )


# a run tests the frameworks the harness knows (tensorflow, torch, jax), each once
MAX_FRAMEWORKS = 8
_FRAMEWORK_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")
_FRAMEWORK_TYPES: dict[str, tuple[type, ...]] = {
    "version": (str,),
    "build_info": (dict,),
    "gpus": (list,),
    "benchmark": (dict,),
    "settings": (dict,),
}


def _frameworks(result: Mapping[str, Any], status: str, where: str) -> None:
    """``frameworks`` (issue 40), when present: at most MAX_FRAMEWORKS objects, each
    a known-shaped framework name (each once), a status no better than its own checks
    and no better than the run's, its fields of the harness's types; the first is
    the framework the top level names."""
    runs = result.get("frameworks")
    if runs is None:
        return  # a result written before issue 40
    if not isinstance(runs, list):
        raise DataError(f"{where}: frameworks: not a list", hint=RESULT_HINT)
    if len(runs) > MAX_FRAMEWORKS:
        raise DataError(
            f"{where}: frameworks: {len(runs)} entries, at most {MAX_FRAMEWORKS}",
            hint=RESULT_HINT,
        )
    seen: set[str] = set()
    for i, run in enumerate(runs):
        at = f"{where}: frameworks[{i}]"
        if not isinstance(run, dict):
            raise DataError(f"{at}: not an object", hint=RESULT_HINT)
        name = run.get("framework")
        if not isinstance(name, str) or not _FRAMEWORK_NAME.fullmatch(name):
            raise DataError(f"{at}.framework: {name!r} is not a framework name", hint=RESULT_HINT)
        if name in seen:
            raise DataError(f"{at}.framework: {name} is listed twice", hint=RESULT_HINT)
        seen.add(name)
        if i == 0 and name != result.get("framework"):
            raise DataError(
                f"{at}.framework: {name}, but the result's framework is "
                f"{result.get('framework')!r} (the first entry is the top level's)",
                hint=RESULT_HINT,
            )
        for key, types in _FRAMEWORK_TYPES.items():
            value = run.get(key)
            if value is not None and not isinstance(value, types):
                raise DataError(
                    f"{at}.{key}: {type(value).__name__} where {_TYPE_NAMES[types[0]]} belongs",
                    hint=RESULT_HINT,
                )
        run_status = run.get("status")
        if run_status not in RESULTS:
            raise DataError(
                f"{at}.status: {run_status!r}, expected one of {', '.join(RESULTS)}",
                hint=RESULT_HINT,
            )
        _status_holds(run_status, _tests(run, at), at)
        if RESULTS.index(run_status) > RESULTS.index(status):
            raise DataError(
                f"{where}: status is {status} but frameworks[{i}] ({name}) is {run_status}",
                hint="the result was edited or is corrupt; run the smoke test again",
            )
