"""The package's public surface: what ``import standardagents`` promises."""

from __future__ import annotations

import standardagents


def test_the_root_exports_exactly_its_public_names():
    missing = [name for name in standardagents.__all__ if not hasattr(standardagents, name)]
    assert missing == []
    assert len(set(standardagents.__all__)) == len(standardagents.__all__)
    for name in ("define_agent", "define_prompt", "define_tool", "define_model", "define_hook", "define_effect",
                 "define_controller", "define_thread_endpoint", "Runtime", "ThreadState", "load_project",
                 "validate_project", "Message", "ToolResult", "DefinitionError", "ProviderError"):
        assert name in standardagents.__all__, name
        assert getattr(standardagents, name) is not None


def test_the_package_is_typed():
    from importlib.resources import files

    assert files("standardagents").joinpath("py.typed").is_file()
