"""The spec's visibility table and packed-metadata helpers, cell by cell."""

from __future__ import annotations

import pytest

from standardagents import define_tool
from standardagents.packages import (
    belongs_to_package,
    global_namespace,
    is_packed,
    is_visible_in_namespace,
    make_signature,
    namespace_context,
    namespace_key,
    packed_namespace,
)


def _tool(package: str | None) -> object:
    def probe() -> str:
        """A probe."""
        return "ok"

    tool = define_tool(probe)
    if package is None:
        return tool
    return tool.model_copy(update={"package": make_signature(package, "1.0.0", "local", 1)})


UNPACKED = _tool(None)
IN_A = _tool("pkg-a")
IN_B = _tool("pkg-b")


@pytest.mark.parametrize(("metadata", "namespace", "entry", "visible"), [
    (UNPACKED, global_namespace(), False, True),      # global -> unpacked
    (IN_A, global_namespace(), True, True),           # global -> entry agents
    (IN_A, global_namespace(), False, False),         # global -> package internals
    (UNPACKED, packed_namespace("pkg-a"), False, False),  # packed -> unpacked
    (IN_A, packed_namespace("pkg-a"), False, True),   # packed -> same package
    (IN_A, packed_namespace("pkg-a"), True, True),    # packed -> same package's entry agent
    (IN_B, packed_namespace("pkg-a"), True, True),    # packed -> other entry agents
    (IN_B, packed_namespace("pkg-a"), False, False),  # packed -> other package internals
])
def test_visibility_table_cell(metadata: object, namespace: dict, entry: bool, visible: bool) -> None:
    assert is_visible_in_namespace(metadata, namespace, entry) is visible  # type: ignore[arg-type]


def test_unpacked_is_visible_globally_even_when_called_an_entry_point() -> None:
    assert is_visible_in_namespace(UNPACKED, global_namespace(), True) is True
    assert is_visible_in_namespace(UNPACKED, packed_namespace("pkg-a"), True) is False


def test_missing_metadata_counts_as_unpacked() -> None:
    assert is_visible_in_namespace(None, global_namespace()) is True
    assert is_visible_in_namespace(None, packed_namespace("pkg-a")) is False


def test_the_specs_mapping_shape_is_read() -> None:
    metadata = {"__package": {"packageId": "pkg-a", "version": "1.0.0", "source": "local", "packedAt": 1},
                "__readonly": True}
    assert is_packed(metadata) and belongs_to_package(metadata, "pkg-a")
    assert is_visible_in_namespace(metadata, {"type": "packed", "packageId": "pkg-a"})
    assert not is_visible_in_namespace(metadata, {"type": "global"})


def test_is_packed_tells_packed_from_unpacked() -> None:
    assert (is_packed(IN_A), is_packed(UNPACKED), is_packed(None), is_packed({})) == (True, False, False, False)


def test_belongs_to_package_compares_the_package_id() -> None:
    assert belongs_to_package(IN_A, "pkg-a") is True
    assert belongs_to_package(IN_A, "pkg-b") is False
    assert belongs_to_package(UNPACKED, "pkg-a") is False


def test_namespace_contexts_map_to_registry_keys() -> None:
    assert namespace_key(global_namespace()) is None
    assert namespace_key(packed_namespace("pkg-a")) == "pkg-a"
    assert namespace_context("pkg-a") == {"type": "packed", "packageId": "pkg-a"}
    assert namespace_context(None) == {"type": "global"}


def test_a_malformed_context_is_refused() -> None:
    with pytest.raises(ValueError, match="not a namespace context"):
        namespace_key({"type": "packed"})  # type: ignore[arg-type]


def test_signature_source_must_be_installed_or_local() -> None:
    with pytest.raises(ValueError, match="'installed' or 'local'"):
        make_signature("pkg-a", "1.0.0", "npm", 1)  # type: ignore[arg-type]
