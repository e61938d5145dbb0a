"""Approval tokens never start with a dot (a compressed payload made them), and a token made
that way by an earlier version still reads."""

from __future__ import annotations

import pytest
from itsdangerous import URLSafeTimedSerializer

from standardagents.engine.approval_tokens import ApprovalError, make_token, read_token

IDS = {"thread_id": "thr_" + "a" * 32, "execution_id": "exe_" + "b" * 32, "call_id": "call_1"}


def test_a_new_token_starts_with_a_letter_and_reads_back() -> None:
    token = make_token("secret", **IDS)
    assert token[0].isalpha() and set(token) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")
    assert read_token("secret", token) == IDS


def test_a_token_with_a_compressed_payload_from_an_earlier_version_still_reads() -> None:
    old = URLSafeTimedSerializer("secret", salt="standardagents.approval.v1").dumps(
        {"t": IDS["thread_id"], "e": IDS["execution_id"], "c": IDS["call_id"]})
    assert old.startswith(".")  # what tokens looked like before
    assert read_token("secret", old) == IDS


def test_a_token_signed_with_another_secret_is_refused() -> None:
    with pytest.raises(ApprovalError, match="not valid"):
        read_token("other", make_token("secret", **IDS))
