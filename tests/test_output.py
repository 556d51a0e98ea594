"""envlock.output.dumps writes exactly what json.dumps(indent=2,
ensure_ascii=False) writes, with or without json's help."""

from __future__ import annotations

import json
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from envlock.output import dumps

_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12
) | st.sampled_from(['"', "\\", "\n\t\r\b\f", "\x00\x1f\x7f", "\u2028\u2029", "é ü 中"])
_scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | _text
_floats = st.floats(allow_nan=True, allow_infinity=True)
_values = st.recursive(
    _scalars | _floats,
    lambda inner: st.lists(inner, max_size=4)
    | st.tuples(inner, inner)
    | st.dictionaries(_text | st.integers(0, 3), inner, max_size=4),
    max_leaves=25,
)


def _reference(obj: object) -> str:
    return json.dumps(obj, indent=2, sort_keys=False, ensure_ascii=False) + "\n"


@settings(max_examples=600, deadline=None)
@given(_values)
def test_dumps_is_json_dumps(obj: object) -> None:
    assert dumps(obj) == _reference(obj)


def test_a_resolution_is_written_without_json() -> None:
    code = (
        "import sys\n"
        "from envlock.output import dumps\n"
        "from envlock.resolve import Constraints, resolve\n"
        "text = dumps(resolve(Constraints(spec='tensorflow==2.15')).to_dict())\n"
        "print('json' in sys.modules)\n"
        "sys.stdout.write(text)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    flag, _, text = out.stdout.partition("\n")
    assert flag == "False"
    from envlock.resolve import Constraints, resolve

    assert text == _reference(resolve(Constraints(spec="tensorflow==2.15")).to_dict())
