"""expand_names, carry_over, catalogue_text and load_tools_tool."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from standardagents.toolcalls import (
    LOAD_TOOLS_NAME,
    MAX_CARRIED,
    MAX_PER_LOAD,
    carry_over,
    catalogue_text,
    expand_names,
    load_tools_tool,
)

CATALOGUE = ["fs_read", "fs_write", "web_search", "fs_list", "calc"]


def test_limits_are_the_specified_numbers() -> None:
    assert (MAX_PER_LOAD, MAX_CARRIED) == (12, 16)


def test_expand_follows_catalogue_order_and_deduplicates() -> None:
    names = expand_names(["calc", "fs_*", "fs_read"], CATALOGUE)
    assert list(names) == ["fs_read", "fs_write", "fs_list", "calc"]
    assert names.unknown == []


def test_expand_reports_unknown_names_and_patterns() -> None:
    names = expand_names(["calc", "nope", "db_*", "nope"], CATALOGUE)
    assert list(names) == ["calc"]
    assert names.unknown == ["nope", "db_*"]


def test_star_alone_matches_everything() -> None:
    assert list(expand_names(["*"], CATALOGUE)) == CATALOGUE


def test_star_in_the_middle_is_literal() -> None:
    assert expand_names(["fs_*ead"], CATALOGUE).unknown == ["fs_*ead"]


def test_carry_keeps_previous_in_place_and_appends_new() -> None:
    assert carry_over(["a", "b", "c"], ["c", "d", "a", "e"]) == ["a", "b", "c", "d", "e"]


def test_carry_does_not_move_used_names() -> None:
    assert carry_over(["a", "b"], ["a"]) == ["a", "b"]


def test_carry_drops_earliest_unused_first_past_the_cap() -> None:
    assert carry_over(["a", "b", "c", "d"], ["a", "e"], max=3) == ["a", "d", "e"]


def test_carry_drops_earliest_of_all_when_all_were_used() -> None:
    assert carry_over(["a", "b"], ["a", "b", "c", "d"], max=3) == ["b", "c", "d"]


def test_carry_reads_a_cap_below_one_as_one() -> None:
    assert carry_over(["a", "b"], ["b"], max=0) == ["b"]
    assert carry_over(["a", "b"], [], max=-5) == ["b"]


def test_carry_default_cap_is_max_carried() -> None:
    previous = [f"t{i}" for i in range(20)]
    assert len(carry_over(previous, [])) == MAX_CARRIED


def test_carry_takes_any_ordered_iterable() -> None:
    assert carry_over(["a"], (n for n in ["c", "b", "c"])) == ["a", "c", "b"]


def reference_carry(previous: list[str], used: list[str], cap: int) -> list[str]:
    """The 2.18.1 rule written as its literal loop: one removal at a time."""
    used_set = set(used)
    ordered_used = list(dict.fromkeys(used))
    result = previous + [n for n in ordered_used if n not in previous]
    cap = max(1, cap)
    while len(result) > cap:
        index = next((i for i, n in enumerate(result) if n not in used_set), 0)
        del result[index]
    return result


NAMES = st.sampled_from([f"t{i}" for i in range(12)])


@given(
    st.lists(NAMES, unique=True, max_size=10),
    st.lists(NAMES, max_size=10),
    st.integers(min_value=-2, max_value=12),
)
def test_carry_matches_the_one_at_a_time_rule(
    previous: list[str], used: list[str], cap: int
) -> None:
    assert carry_over(previous, used, max=cap) == reference_carry(previous, used, cap)


def test_catalogue_lists_each_tool_with_its_first_line() -> None:
    tools = [
        {"type": "function", "function": {"name": "fs_read", "description": "Read a file.\nMore."}},
        {"type": "function", "function": {"name": "calc", "description": "Do maths."}},
    ]
    text = catalogue_text(tools, loaded=["calc"])
    assert "- fs_read: Read a file." in text
    assert "More." not in text
    assert "- calc (loaded): Do maths." in text
    assert LOAD_TOOLS_NAME in text


def test_load_tools_tool_definition() -> None:
    definition = load_tools_tool()
    fn = definition["function"]
    assert definition["type"] == "function"
    assert fn["name"] == LOAD_TOOLS_NAME
    names = fn["parameters"]["properties"]["names"]
    assert (names["type"], names["items"]) == ("array", {"type": "string"})
    assert fn["parameters"]["required"] == ["names"]
