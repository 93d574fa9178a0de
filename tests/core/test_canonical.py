"""Canonical JSON (RFC 8785) and the digests stead derives from it."""

from __future__ import annotations

import hashlib
import json
import math
import random

import pytest
import rfc8785
from core_strategies import SAFE_INT, json_scalars, json_values
from hypothesis import given, settings
from hypothesis import strategies as st

from stead.core.canonical import (
    canonical_json,
    command_id,
    compact_encoder,
    digest,
    effect_id,
    idempotency_key,
    sha256_hex,
)

# -- RFC 8785 examples -----------------------------------------------------------------------


def test_rfc8785_section_3_2_4_example() -> None:
    value = json.loads(
        r"""{
          "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
          "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
          "literals": [null, true, false]
        }"""
    )
    assert canonical_json(value) == (
        '{"literals":[null,true,false],'
        '"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )


def test_keys_sort_by_utf16_code_units_not_code_points() -> None:
    # RFC 8785 section 3.2.3: the emoji (a surrogate pair, 0xD83D...) sorts before U+FB33
    # although its code point (U+1F600) is larger.
    value = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    text = canonical_json(value)
    keys = list(json.loads(text))
    assert keys == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]


def test_nested_keys_are_sorted_and_whitespace_is_gone() -> None:
    assert canonical_json({"b": {"z": 1, "a": [1, {"y": 2, "x": 1}]}, "a": None}) == (
        '{"a":null,"b":{"a":[1,{"x":1,"y":2}],"z":1}}'
    )


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (0.0, "0"),
        (-0.0, "0"),
        (0, "0"),
        (1.0, "1"),
        (-1.5, "-1.5"),
        (0.1, "0.1"),
        (4.50, "4.5"),
        (2e-3, "0.002"),
        (0.000001, "0.000001"),
        (1e-7, "1e-7"),
        (1e-27, "1e-27"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (1e30, "1e+30"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (-1.7976931348623157e308, "-1.7976931348623157e+308"),
        (9007199254740992.0, "9007199254740992"),
        (295147905179352830000.0, "295147905179352830000"),
        (333333333.33333329, "333333333.3333333"),
        (SAFE_INT, "9007199254740991"),
        (-SAFE_INT, "-9007199254740991"),
    ],
)
def test_number_formatting(number: float, text: str) -> None:
    assert canonical_json(number) == text


@pytest.mark.parametrize(
    ("string", "text"),
    [
        ("\u20ac", '"€"'),  # non-ASCII is kept as UTF-8, not escaped
        ("\U0001f600", '"\U0001f600"'),
        ("\n\r\t\b\f", '"\\n\\r\\t\\b\\f"'),
        ("\u000f", '"\\u000f"'),  # other controls: lowercase hex
        ("\u001f", '"\\u001f"'),
        ("\u007f", '"\u007f"'),  # DEL is not a control for JSON
        ('"\\', '"\\"\\\\"'),
        ("/", '"/"'),  # solidus is not escaped
    ],
)
def test_string_escapes(string: str, text: str) -> None:
    assert canonical_json(string) == text


def test_literals() -> None:
    assert canonical_json([None, True, False, [], {}]) == "[null,true,false,[],{}]"


@pytest.mark.parametrize(
    "value",
    [
        math.nan,
        math.inf,
        -math.inf,
        {"x": [math.nan]},
        {1: "non-string key"},
        pytest.param({"a", "set"}, id="a set"),  # ids the same in every xdist worker
        b"bytes",
        pytest.param(object(), id="object()"),
        "\ud800",  # a lone surrogate is not UTF-8
        SAFE_INT + 2,  # beyond what a JSON number carries exactly
        -(SAFE_INT + 2),
        {"n": [10**30]},
    ],
    ids=repr,
)
def test_values_json_cannot_carry_raise_value_error(value: object) -> None:
    with pytest.raises(ValueError, match="not canonicalisable JSON"):
        canonical_json(value)


# -- digests ---------------------------------------------------------------------------------


def test_idempotency_key_is_designs_formula() -> None:
    assert idempotency_key("run-1", "toolu_01") == hashlib.sha256(b"run-1toolu_01").hexdigest()


@settings(deadline=None)
@given(st.text(), st.text())
def test_idempotency_key_property(run_id: str, call_id: str) -> None:
    key = idempotency_key(run_id, call_id)
    assert key == hashlib.sha256((run_id + call_id).encode()).hexdigest()
    assert len(key) == 64
    assert key == key.lower()


def test_digest_is_sha256_of_canonical_text() -> None:
    value = {"b": 1, "a": [0.5, "x"]}
    assert digest(value) == hashlib.sha256(b'{"a":[0.5,"x"],"b":1}').hexdigest()
    assert sha256_hex("€") == hashlib.sha256("€".encode()).hexdigest()


def test_effect_and_command_ids_are_deterministic_and_distinct() -> None:
    base = effect_id("run", 0, "call", 1)
    assert base == effect_id("run", 0, "call", 1)
    assert len(base) == 32
    others = {
        effect_id("run2", 0, "call", 1),
        effect_id("run", 1, "call", 1),
        effect_id("run", 0, "call2", 1),
        effect_id("run", 0, "call", 2),
    }
    assert base not in others
    assert len(others) == 4
    assert command_id("start", base) == command_id("start", base)
    assert command_id("start", base) != command_id("settle", base)
    assert len(command_id("settle", base)) == 32


# -- properties ------------------------------------------------------------------------------


def _shuffled(value: object, rng: random.Random) -> object:
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: _shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [_shuffled(v, rng) for v in value]
    return value


@settings(max_examples=80, deadline=None)
@given(json_values, st.randoms(use_true_random=False))
def test_invariant_under_key_order(value: object, rng: random.Random) -> None:
    assert canonical_json(_shuffled(value, rng)) == canonical_json(value)
    assert digest(_shuffled(value, rng)) == digest(value)


# Integral floats of 2**53 and beyond print as integer literals, which Python's json reads
# back as ints; see test_canonical_text_of_a_large_float_is_canonicalisable_again (a bug).
_small_floats = st.floats(allow_nan=False, allow_infinity=False).filter(
    lambda f: not (f.is_integer() and abs(f) >= 2**53)
)
round_trippable = st.recursive(
    json_scalars.filter(lambda v: not isinstance(v, float)) | _small_floats,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=80, deadline=None)
@given(round_trippable)
def test_invariant_under_json_round_trip(value: object) -> None:
    text = canonical_json(value)
    assert canonical_json(json.loads(json.dumps(value))) == text
    # The canonical text is itself JSON of the same value, and canonical again.
    assert canonical_json(json.loads(text)) == text
    assert json.loads(text) == json.loads(json.dumps(value))


json_with_any_text = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-SAFE_INT, SAFE_INT)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=10,
)


@settings(max_examples=100, deadline=None)
@given(json_with_any_text)
def test_fast_path_agrees_with_the_reference_encoder(value: object) -> None:
    # canonical_json skips rfc8785 for float-free, ASCII-keyed values; it must not change a byte.
    assert canonical_json(value) == rfc8785.dumps(value).decode("utf-8")


@pytest.mark.parametrize(
    "value",
    [
        {"b": 1, "a": [True, None, 'x\u0001\u007f\u2028"\\']},
        {"z": {"y": [1, 2, {"x": ""}]}, "A": -5},
        ("tuple", 1),
        [SAFE_INT, -SAFE_INT],
        {"\u00e9": 1, "z": 2},  # non-ASCII key: the reference path
    ],
    ids=repr,
)
def test_fast_path_examples(value: object) -> None:
    assert canonical_json(value) == rfc8785.dumps(value).decode("utf-8")


@pytest.mark.parametrize("n", [2**53, -(2**53)])
def test_integer_domain_does_not_depend_on_neighbours(n: int) -> None:
    alone = _outcome(n)
    with_a_float = _outcome([n, 0.5])
    assert (alone is None) == (with_a_float is None)


def _outcome(value: object) -> str | None:
    try:
        return canonical_json(value)
    except ValueError:
        return None


@pytest.mark.parametrize("number", [1e17, 9007199254740994.0, -1e20])
def test_canonical_text_of_a_large_float_is_canonicalisable_again(number: float) -> None:
    text = canonical_json({"x": number})
    assert canonical_json(json.loads(text)) == text


@settings(max_examples=200, deadline=None)
@given(json_with_any_text, st.booleans())
def test_reused_compact_encoder_is_json_dumps(value: object, sort_keys: bool) -> None:
    # The store writes every row with it and the fast path hashes with it: byte-identical to
    # json.dumps with the same options, or rows and digests would change under our feet.
    expected = json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=sort_keys)
    assert compact_encoder(sort_keys=sort_keys)(value) == expected


def test_compact_encoder_refuses_what_json_refuses() -> None:
    encode = compact_encoder(sort_keys=False)
    with pytest.raises(TypeError, match="not JSON serializable"):
        encode({"a": object()})
    with pytest.raises(TypeError):
        encode({1j: 1})
