"""The public surface of standardagents.toolcalls."""

from __future__ import annotations

import standardagents.toolcalls as toolcalls

EXPECTED = {
    "parse_tool_arguments",
    "coerce_to_schema",
    "ParsedArguments",
    "recover_tool_calls",
    "RecoveredCall",
    "sanitize_tools",
    "relax_tools",
    "is_grammar_error",
    "CapabilityLatches",
    "export_capabilities",
    "import_capabilities",
    "prepare_tools",
    "estimate_tokens",
    "prune_tool_results",
    "plan_compaction",
    "compact_transcript",
    "CompactionPlan",
    "MAX_PER_LOAD",
    "MAX_CARRIED",
    "expand_names",
    "carry_over",
    "catalogue_text",
    "load_tools_tool",
    "FenceSplitter",
    "strip_thinking",
    "ask",
    "ask_json",
    "parse_json",
    "CompatLevel",
    "OutputMode",
    "CAPABILITY_SNAPSHOT_VERSION",
    "default_latches",
    "MESSAGE_OVERHEAD",
    "PRUNED_PLACEHOLDER",
    "SUMMARY_PREFIX",
    "is_summary_message",
    "ExpandedNames",
    "LOAD_TOOLS_NAME",
    "Fence",
    "Piece",
    "THINK_FENCE",
    "DEFAULT_FENCES",
    "ALL_FENCES",
}


def test_public_names_are_exported() -> None:
    assert set(toolcalls.__all__) == EXPECTED
    for name in toolcalls.__all__:
        assert hasattr(toolcalls, name), name


def test_private_modules_declare_all() -> None:
    import importlib

    for module in (
        "_arguments",
        "_recover",
        "_schema_compat",
        "_compaction",
        "_tokens",
        "_tool_loading",
        "_thinking",
        "_side_task",
    ):
        mod = importlib.import_module(f"standardagents.toolcalls.{module}")
        assert mod.__all__, module
