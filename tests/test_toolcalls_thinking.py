"""FenceSplitter and strip_thinking."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from standardagents.exceptions import DefinitionError
from standardagents.toolcalls import ALL_FENCES, FenceSplitter, Piece, strip_thinking


def run(splitter: FenceSplitter, chunks: list[str]) -> tuple[str, str]:
    pieces: list[Piece] = []
    for chunk in chunks:
        pieces.extend(splitter.feed(chunk))
    pieces.extend(splitter.flush())
    text = "".join(p for kind, p in pieces if kind == "text")
    reasoning = "".join(p for kind, p in pieces if kind == "reasoning")
    return text, reasoning


def test_whole_reply_is_split() -> None:
    assert run(FenceSplitter(), ["<think>plan</think>Answer"]) == ("Answer", "plan")


def test_tag_split_across_chunks() -> None:
    assert run(FenceSplitter(), ["Hi <th", "ink>deep", " thought</thi", "nk> done"]) == (
        "Hi  done",
        "deep thought",
    )


def test_text_is_emitted_as_early_as_possible() -> None:
    splitter = FenceSplitter()
    assert splitter.feed("Hello wor") == [("text", "Hello wor")]
    assert splitter.feed("ld <") == [("text", "ld ")]
    assert splitter.feed("b>") == [("text", "<b>")]


def test_reasoning_is_emitted_as_early_as_possible() -> None:
    splitter = FenceSplitter()
    assert splitter.feed("<think>abc</") == [("reasoning", "abc")]
    assert splitter.feed("think>x") == [("text", "x")]


def test_unclosed_fence_flushes_as_reasoning() -> None:
    assert run(FenceSplitter(), ["<think>still going"]) == ("", "still going")


def test_held_back_prefix_flushes_as_text() -> None:
    splitter = FenceSplitter()
    assert splitter.feed("a <thi") == [("text", "a ")]
    assert splitter.flush() == [("text", "<thi")]


def test_start_inside_for_templates_that_open_the_fence() -> None:
    assert run(FenceSplitter(start_inside=True), ["reasoning</think>text"]) == ("text", "reasoning")


def test_several_fences() -> None:
    splitter = FenceSplitter(ALL_FENCES)
    assert run(splitter, ["a<thinking>b</thinking>c<reasoning>d</reasoning>e"]) == ("ace", "bd")


def test_a_fence_needs_both_tags() -> None:
    with pytest.raises(DefinitionError):
        FenceSplitter((("<think>", ""),))


def test_strip_thinking() -> None:
    assert strip_thinking("<think>\nplan\n</think>\n\nThe answer.") == ("The answer.", "plan")


def test_strip_thinking_with_only_a_closing_tag() -> None:
    assert strip_thinking("plan first</think>The answer.") == ("The answer.", "plan first")


def test_strip_thinking_without_fences() -> None:
    assert strip_thinking("  Just text. ") == ("Just text.", "")


ALPHABET = st.sampled_from(
    [
        "a",
        " ",
        "<",
        ">",
        "/",
        "t",
        "h",
        "i",
        "n",
        "k",
        "<think>",
        "</think>",
        "<thinking>",
        "</thinking>",
        "é",
    ]
)


@st.composite
def chunked(draw: st.DrawFn) -> tuple[str, list[str]]:
    text = "".join(draw(st.lists(ALPHABET, max_size=40)))
    cuts = sorted(draw(st.lists(st.integers(min_value=0, max_value=len(text)), max_size=12)))
    bounds = [0, *cuts, len(text)]
    return text, [text[a:b] for a, b in itertools.pairwise(bounds)]


@settings(max_examples=400)
@given(chunked(), st.sampled_from([(("<think>", "</think>"),), ALL_FENCES]), st.booleans())
def test_any_chunking_gives_the_same_split(
    case: tuple[str, list[str]], fences: tuple[tuple[str, str], ...], start_inside: bool
) -> None:
    text, chunks = case
    whole = run(FenceSplitter(fences, start_inside=start_inside), [text])
    assert run(FenceSplitter(fences, start_inside=start_inside), chunks) == whole


@settings(max_examples=200)
@given(chunked())
def test_nothing_is_lost_outside_the_tags(case: tuple[str, list[str]]) -> None:
    text, chunks = case
    out_text, reasoning = run(FenceSplitter(), chunks)
    assert len(out_text) + len(reasoning) <= len(text)
    if "<think>" not in text:
        assert (out_text, reasoning) == (text, "")
