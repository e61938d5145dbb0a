"""The model-loop toolkit: pure, fast passes the engine runs on every model step.

Argument repair, tool calls recovered from text, schema compatibility with capability
latches, token estimates and compaction, on-demand tool loading, thinking fences and
one-shot side tasks. Nothing here keeps state except the capability latches.
"""

from ._arguments import ParsedArguments, coerce_to_schema, parse_tool_arguments
from ._compaction import (
    PRUNED_PLACEHOLDER,
    SUMMARY_PREFIX,
    CompactionPlan,
    compact_transcript,
    is_summary_message,
    plan_compaction,
    prune_tool_results,
)
from ._recover import RecoveredCall, recover_tool_calls
from ._schema_compat import (
    CAPABILITY_SNAPSHOT_VERSION,
    CapabilityLatches,
    CompatLevel,
    OutputMode,
    default_latches,
    export_capabilities,
    import_capabilities,
    is_grammar_error,
    prepare_tools,
    relax_tools,
    sanitize_tools,
)
from ._side_task import ask, ask_json, parse_json
from ._thinking import (
    ALL_FENCES,
    DEFAULT_FENCES,
    THINK_FENCE,
    Fence,
    FenceSplitter,
    Piece,
    strip_thinking,
)
from ._tokens import MESSAGE_OVERHEAD, estimate_tokens
from ._tool_loading import (
    LOAD_TOOLS_NAME,
    MAX_CARRIED,
    MAX_PER_LOAD,
    ExpandedNames,
    carry_over,
    catalogue_text,
    expand_names,
    load_tools_tool,
)

__all__ = [
    "ALL_FENCES",
    "CAPABILITY_SNAPSHOT_VERSION",
    "DEFAULT_FENCES",
    "LOAD_TOOLS_NAME",
    "MAX_CARRIED",
    "MAX_PER_LOAD",
    "MESSAGE_OVERHEAD",
    "PRUNED_PLACEHOLDER",
    "SUMMARY_PREFIX",
    "THINK_FENCE",
    "CapabilityLatches",
    "CompactionPlan",
    "CompatLevel",
    "ExpandedNames",
    "Fence",
    "FenceSplitter",
    "OutputMode",
    "ParsedArguments",
    "Piece",
    "RecoveredCall",
    "ask",
    "ask_json",
    "carry_over",
    "catalogue_text",
    "coerce_to_schema",
    "compact_transcript",
    "default_latches",
    "estimate_tokens",
    "expand_names",
    "export_capabilities",
    "import_capabilities",
    "is_grammar_error",
    "is_summary_message",
    "load_tools_tool",
    "parse_json",
    "parse_tool_arguments",
    "plan_compaction",
    "prepare_tools",
    "prune_tool_results",
    "recover_tool_calls",
    "relax_tools",
    "sanitize_tools",
    "strip_thinking",
]
