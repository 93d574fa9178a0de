"""Tokens: named, compared in constant time, never optional off loopback; approval tokens too."""

from __future__ import annotations

import inspect

import pytest

from stead.core import builders
from stead.errors import UserError
from stead.server import check_bind, is_loopback, parse_tokens
from stead.server._security import who


def test_tokens_have_names_and_are_matched_exactly() -> None:
    tokens = parse_tokens(["alice:" + "a" * 20, "bob:" + "b" * 20, "c" * 20])
    assert tokens == {"a" * 20: "alice", "b" * 20: "bob", "c" * 20: "api"}
    assert who(tokens, "Bearer " + "b" * 20) == "bob"
    assert who(tokens, "bearer " + "a" * 20) == "alice"
    for header in (None, "", "Bearer", "Bearer " + "a" * 19, "Basic " + "a" * 20, "a" * 20):
        assert who(tokens, header) is None
    assert who(tokens, "Bearer ünïcode-is-not-a-token") is None


def test_bad_token_specs_are_refused_with_what_to_do() -> None:
    with pytest.raises(UserError, match="at least 16 characters"):
        parse_tokens(["alice:short"])
    with pytest.raises(UserError, match="same secret"):
        parse_tokens(["a:" + "x" * 20, "b:" + "x" * 20])


def test_only_loopback_may_go_without_a_chosen_token() -> None:
    for host in ("127.0.0.1", "127.8.0.1", "::1", "[::1]", "localhost"):
        assert is_loopback(host)
        check_bind(host, {})
    for host in ("0.0.0.0", "::", "10.1.2.3", "example.org"):
        assert not is_loopback(host)
        with pytest.raises(UserError, match="refusing to listen"):
            check_bind(host, {})
        check_bind(host, {"x" * 20: "alice"})


def test_approval_tokens_are_compared_in_constant_time() -> None:
    # A `!=` on the secret leaks, by timing, how much of a guess was right.
    # The check lives in the builder that validates a decision (decision_events' helper).
    source = inspect.getsource(builders)
    assert "hmac.compare_digest(" in source
    assert 'token.encode("utf-8", "surrogatepass"), pending.token.encode(' in source
    assert "token != pending.token" not in source and "pending.token != token" not in source


def test_every_stead_error_maps_to_a_4xx_or_503_never_a_500() -> None:
    from stead.errors import (
        ApprovalError,
        Conflict,
        CorruptEvent,
        Fenced,
        IllegalTransition,
        LeaseHeld,
        RunNotFound,
        StoreError,
        UnknownAgent,
        UserError,
    )
    from stead.server import status_of

    assert status_of(RunNotFound("r")) == 404
    assert status_of(ApprovalError("a")) == 409
    assert status_of(UnknownAgent("u")) == 422
    assert status_of(UserError("u")) == 400
    assert status_of(Conflict("c")) == status_of(LeaseHeld("l")) == 409
    assert status_of(Fenced("f")) == status_of(IllegalTransition("a", "b")) == 409
    assert status_of(StoreError("s")) == status_of(CorruptEvent("r", 1, "x")) == 503
