"""Tool.validate: canonical arguments, or a message the model can act on."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, field_validator

from stead.tools import tool


class Address(BaseModel):
    street: str
    number: int = 1


class Picky(BaseModel):
    value: str

    @field_validator("value")
    @classmethod
    def buggy(cls, v: str) -> str:
        if v == "boom":
            raise TypeError("validator bug")
        return v


@tool
def ship(city: str, days: int = 3, addr: Address | None = None, tags: list[int] = []) -> str:  # noqa: B006
    """Ship something."""
    return city


def error(raw: str) -> str:
    out, err = ship.validate(raw)
    assert err is not None, raw
    assert out == raw
    assert "Invalid arguments for tool 'ship'" in err
    assert "Expected one JSON object matching:" in err
    return err


def test_valid_arguments_become_canonical_json() -> None:
    assert ship.validate('{ "days": 2,\n "city": "Paris" }') == ('{"city":"Paris","days":2}', None)


def test_canonical_json_is_of_what_the_model_sent() -> None:
    # Defaults are not filled in, and a coerced "3" stays "3": the record is the model's call.
    assert ship.validate('{"city":"P"}') == ('{"city":"P"}', None)
    assert ship.validate('{"city":"P","days":"3"}') == ('{"city":"P","days":"3"}', None)


def test_empty_text_means_no_arguments() -> None:
    @tool
    def ping() -> str:
        return "pong"

    assert ping.validate("") == ("{}", None)
    assert ping.validate("  ") == ("{}", None)


def test_invalid_json() -> None:
    assert "not valid JSON" in error('{"city": "P"')
    assert "not valid JSON" in error("city=Paris")


def test_not_an_object() -> None:
    for raw, kind in [("[1]", "array"), ('"P"', "string"), ("3", "number"), ("null", "null")]:
        assert f"must be a JSON object, not a JSON {kind}" in error(raw)


def test_missing_and_wrong_type() -> None:
    err = error('{"days": "many"}')
    assert "2 problems" in err
    assert "- city: required but missing" in err
    assert "- days: Input should be a valid integer" in err and '(got "many")' in err


def test_extra_arguments_are_refused_with_the_valid_names() -> None:
    err = error('{"city": "P", "colour": "red"}')
    assert "- colour: not an argument of this tool (arguments: addr, city, days, tags)" in err


def test_nested_error_paths() -> None:
    err = error('{"city": "P", "addr": {"street": 3}, "tags": [1, "x"]}')
    assert "- addr.street: Input should be a valid string (got 3)" in err
    assert "- tags[1]: Input should be a valid integer" in err


def test_values_without_one_canonical_form_are_refused() -> None:
    assert "NaN is not valid JSON" in error('{"city": "P", "days": NaN}')
    assert "appears more than once" in error('{"city": "P", "city": "Q"}')
    assert "cannot be recorded exactly" in error('{"city": "P", "days": 12345678901234567890}')
    assert "cannot be recorded exactly" in error('{"city": "\\ud800"}')


def test_long_error_lists_are_cut() -> None:
    raw = json.dumps({"city": "P", **{f"x{i}": i for i in range(15)}})
    assert "- ...and 5 more" in error(raw)


def test_a_buggy_validator_is_reported_not_raised() -> None:
    @tool
    def pick(p: Picky) -> str:
        return p.value

    assert pick.validate('{"p": {"value": "ok"}}')[1] is None
    _, err = pick.validate('{"p": {"value": "boom"}}')
    assert err is not None and "TypeError: validator bug" in err


@given(st.text())
def test_validate_never_raises_on_any_text(raw: str) -> None:
    out, err = ship.validate(raw)
    if err is not None:
        assert out == raw
    else:
        assert ship.validate(out) == (out, None)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(st.dictionaries(st.sampled_from(["city", "days", "addr", "tags", "x"]), json_values))
def test_validate_never_raises_on_any_json_object(args: dict[str, Any]) -> None:
    raw = json.dumps(args)
    out, err = ship.validate(raw)
    assert (out == raw) if err is not None else (ship.validate(out) == (out, None))


def shuffled(value: dict[str, Any], rnd: Any) -> dict[str, Any]:
    items = [(k, shuffled(v, rnd) if isinstance(v, dict) else v) for k, v in value.items()]
    rnd.shuffle(items)
    return dict(items)


@given(st.text(), st.integers(0, 9), st.text(), st.randoms(use_true_random=False))
def test_canonical_json_does_not_depend_on_key_order(
    street: str, number: int, city: str, rnd: Any
) -> None:
    args = {"city": city, "days": 1, "addr": {"street": street, "number": number}, "tags": [2, 1]}
    canonical, err = ship.validate(json.dumps(args))
    assert err is None
    assert ship.validate(json.dumps(shuffled(args, rnd), indent=1)) == (canonical, None)


_PADDING = st.sampled_from(["", " ", "\n\t", "\r\n ", "\u00a0", "\u2028", "x", ",", "}"])


@tool
def echo(x: Any = None, city: str = "") -> str:
    """Any JSON value."""
    return city


@given(_PADDING, json_values, _PADDING, st.booleans())
def test_arguments_read_as_the_json_decoder_reads_them(
    before: str, value: Any, after: str, duplicate: bool
) -> None:
    """The arguments are scanned straight by the decoder's C scanner; text it does not read
    whole (padding JSON does not allow, trailing data, a repeated key, NaN) is refused with
    the decoder's own message, and text it does read is the decoder's value."""
    from stead.core.canonical import canonical_json
    from stead.tools._arguments import _DECODER

    body = json.dumps({"city": "P", "x": value})
    if duplicate:
        body = body[:-1] + ', "city": "Q"}'
    raw = before + body + after
    out, err = echo.validate(raw)
    try:
        expected = canonical_json(_DECODER.decode(raw))
    except ValueError as exc:
        assert err is not None and out == raw
        assert "not valid JSON" not in err or f"not valid JSON ({exc})" in err
        return
    assert (out, err) == (expected, None)
