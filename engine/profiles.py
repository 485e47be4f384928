"""Version profiles: one frozen set of numbers per behaviour era of Claude Code's ``cli.js``.

(Over 500 lines on purpose: it is the one place for every version rule, the table of eras
and, in this docstring, the evidence for each boundary; split, the rules would drift from
their evidence. The version parser is :mod:`engine.versions`.)

:data:`PROFILES` is folded from the table :data:`ERAS`: each era is the previous one plus only
what changed in its first version, with the reason as a short comment next to each change.

Every field names the versions it holds for. ``verified_in`` lists the real ``cli.js`` files the
numbers were read from (npm tarballs of ``@anthropic-ai/claude-code``); the other versions of an
era are assigned by bisection data from ``shared/research/versions.md``. Where that survey and a
real file disagreed, the real file won and the disagreement is noted on the field:

* ``blocking_base``: the blocking limit is ``contextWindow - 3000`` (the raw window, no output
  reserve) in 2.0.77, 2.1.0, 2.1.2, 2.1.14, 2.1.20, 2.1.21 and 2.1.39, but ``effectiveWindow -
  3000`` in 2.1.7, 2.1.9 and 2.1.112 (versions.md says ``effectiveWindow`` throughout).
* ``count_mode``: the auto-compact token count is the last API usage alone up to 2.1.0, and the
  last usage plus a chars/4 estimate of the newer messages from 2.1.2 on (that estimate has no
  x4/3 and, up to 2.1.73, counts ``tool_use``/``thinking`` blocks as 0; images 1334 up to 2.1.21,
  2000 in 2.1.39).
* ``reserve_cap``: the 20000 cap on the output reserve first appears in 2.1.21 (2.1.20 has none).

The full sweep of ``ctxpatch inspect`` over every published version (cc 1.0.60-2.1.112, sdk
0.0.4-0.2.112; ``docs/support-matrix.md``) pinned the first version of each change, and the
profiles were split there (versions.md had bisected only a sample):

* ``mc_tools``: MultiEdit joins the compactable tools in 1.0.91 (1.0.90 has none) and LS leaves
  in 1.0.98 (1.0.96 has it; 1.0.97 was never published).
* ``has_pct_override``: ``CLAUDE_AUTOCOMPACT_PCT_OVERRIDE`` is read from 2.0.20 (2.0.19: not).
* ``disable_compact_scope``: ``DISABLE_COMPACT`` (2.0.30 on) is read only by the auto-compact
  dispatcher up to 2.0.64, and also by the "auto-compact enabled" function from 2.0.65.
* ``estimate_factor_4_3`` and ``session_memory``: both first in 2.0.47 (2.0.46: neither).
* ``mc_remote_kill_switch``: ``tengu_cache_plum_violet`` is read by MC from 2.1.19 (2.1.18: not).
* ``blocking_base``: effective window again from 2.1.75 (2.1.74: raw window), through 2.1.112.
* ``newer_counts_attachments``: attachment records counted (as JSON, chars/4) in the
  newer-messages estimate from 2.1.33 (2.1.32: not); ``newer_image_tokens`` 2000 and
  ``mc_clears_images`` from 2.1.38 (2.1.37: 1334, and MC leaves images alone).
* ``newer_renders_attachments``: from 2.1.45 that estimate no longer counts an attachment's
  JSON but the messages it is rendered to (its ``<system-reminder>`` text; ``engine.claude_code.attachments``
  says which types are modelled). 2.1.44 still counts the JSON (2.1.43 was never published);
  2.1.45 renders, and so does every published version read after it (2.1.47-2.1.112, each
  ``cli.js`` checked). The e2e suite sees it with 2.1.112's skill listing: 2612 JSON chars
  (653 tokens) but 2597 rendered chars (649).
* ``newer_counts_all_blocks``: up to 2.1.73 the newer-messages estimate counts text,
  tool_result content and images only (``tool_use``, ``thinking``, documents ...: 0); from 2.1.74
  it counts every block: ``tool_use`` as name + JSON input, ``thinking``/``redacted_thinking``
  as their text, documents as images, any other block as its JSON. Read in every published
  ``cli.js`` 2.1.2-2.1.112 (2.1.73 the old rule, 2.1.74 the new one, unchanged through 2.1.112)
  and seen in real runs of 2.1.73 and 2.1.74 with thinking and tool_use blocks after the last
  usage (``tests/e2e/test_engine_vs_real.py``). The 2.1.75 changelog's "over-count fix
  (thinking/tool_use)" is the message-level estimate (``estimate_messages``), not this one.
* ``estimate_counts_documents``: the message-level (x4/3) estimate counts ``document`` blocks
  like images (2000), in the message and inside tool_result content (so also the legacy
  micro-compaction's tool-result sizes), from 2.1.47; up to 2.1.45 they are counted as their JSON
  (2.1.46 was never published). Read in every published ``cli.js`` 2.0.47-2.1.104 that has the
  estimator (2.1.45 ``Ep6``/``mo4``: JSON; 2.1.47 ``MU6``/``gt4``: 2000; unchanged through
  2.1.104).
* ``estimate_counts_block_text``: from 2.1.75 the message-level estimate counts ``thinking`` as
  its text, ``redacted_thinking`` as its ``data`` and ``tool_use`` as name + JSON input (the
  rules of the newer-messages estimate), no longer as the block's JSON (signature included).
  2.1.74 (``uW6``) still counts JSON; 2.1.75 (``wG6``) through 2.1.104 (``gt6``) the text, each
  cached ``cli.js`` 2.1.75-2.1.104 read.
* ``message_estimate_is_newer``: 2.1.105 removed the x4/3 estimator together with session
  memory, its last caller (2.1.104's ``gt6`` is called only by session memory; 2.1.105, 2.1.107-
  2.1.112 have no such function and no ``tengu_sm_compact``). The post-compaction count uses
  the newer-messages estimate (``Hy6`` in 2.1.104, ``xh`` in 2.1.105, ``qT`` in 2.1.112), so from
  2.1.105 the engine's ``estimate_messages`` is ``estimate_newer``: no x4/3, string contents and
  attachment records counted.
* ``usage_final_in_memory``: the auto-compact count reads the last reply's usage as held in
  memory. Up to 2.1.7 the query streams through the SDK's ``MessageStream``, whose
  ``message_delta`` handler sets ``usage.output_tokens`` on the ``message_start`` usage object
  every block's message shares: the final count. 2.1.8-2.1.29 iterate the raw stream
  (``messages.create({stream:true})``) and nothing updates it: the count uses the placeholder the
  file recorded (seen to the token in real 2.1.17 and 2.1.29 sessions). 2.1.30 replaces the last
  block's usage on ``message_delta`` (2.1.112: every block's). The 2.1.7 era is split at 2.1.8.
* the request as sent (``user_string_blocks``, ``merge_seam_newline``,
  ``compaction_through_loop``; ``engine.claude_code.flatten``, ``lab.predict``): seen in real
  requests. A user message's string content is sent as a text block up to 2.1.29 (1.0.128,
  2.0.30, 2.0.76, 2.1.7, 2.1.9, 2.1.14, 2.1.20, 2.1.25, 2.1.29) and as the string from 2.1.30
  (2.1.30, 2.1.50, 2.1.68, 2.1.112). Consecutive user messages are joined with a ``"\\n"`` seam
  from 2.1.78, the oldest version seen doing it (2.1.68 joins as is; 2.1.69-2.1.77 not
  checked): the 2.1.75 era is split there. The summary request is made by a forked query loop
  from 2.1.86 (2.1.86, 2.1.88-2.1.90, 2.1.112; 2.1.77-2.1.85 call the model directly): the
  2.1.81 era is split there.
* ``compact_reads_cache``: what the summary request of a compaction costs
  (``engine.replay.compaction_cost``). Up to 2.1.28 it sends its own system prompt ("You are a
  helpful AI assistant tasked with summarizing conversations."), no thinking and its own tool
  list (2.1.7: the Read tool and the MCP tools), so no cached prefix of the main prompt is one
  of its own: it writes the whole conversation. 2.1.29-2.1.78 first try a fork that sends the
  main prompt's system prompt, tools and messages (``cacheSafeParams``), reading their cache,
  behind the remote flag ``tengu_compact_cache_prefix``, default off (read in the cached
  ``cli.js`` 2.1.29, 2.1.44, 2.1.47, 2.1.59, 2.1.75, 2.1.78); 2.1.87, 2.1.90 and 2.1.112
  default it on. The flag is taken at its default, as the engine takes every remote flag
  (the 2.1.86 era, not read, with the forked loop).
* ``newer_from_message_start``: when the last usage's reply is split over several records with
  the same ``message.id``, the auto-compact counter walks back to the first of them and counts
  the newer messages from there, in 2.1.64 (``PN``) and from 2.1.69 (``XV``) on, not only from
  2.1.105 as first modelled. 2.1.63, 2.1.66 (sdk 0.2.66), 2.1.67 and 2.1.68 count from the
  usage record itself (2.1.65/2.1.66 were published only in the agent SDK). Read in every cached
  ``cli.js`` 2.1.0-2.1.112 (cc) and sdk 0.2.63-0.2.69; the id function (assistant, not
  ``<synthetic>``, ``message.id``) is the same in 2.1.64, 2.1.85, 2.1.90 and 2.1.112.
* ``tool_search_defers_mcp``: what an MCP server's tools (recall's, ``engine.replay.recall_tools``)
  add to every request. Talking to Anthropic's API (no base URL), 2.0.76-2.1.68 send their
  definitions in ``tools``; from 2.1.69 tool search is on by default and sends only their names,
  in the list of deferred tools (the real ``cli.js`` 2.0.76, 2.1.7, 2.1.20, 2.1.39, 2.1.50-2.1.68
  and 2.1.69, 2.1.80, 2.1.90, 2.1.100, 2.1.105, 2.1.110, 2.1.112 run offline with
  ``api.anthropic.com`` as the mock, ``tests/e2e/test_recall_first_party.py``, with
  claude-sonnet-4-5, a model tool search serves). Native builds keep it behind ``ctxpatch run``,
  which sets ``ENABLE_TOOL_SEARCH=true`` when its upstream is Anthropic's API (2.1.113), and
  2.1.330 on through any base URL (``tests/e2e/test_recall_real.py``). Through another base URL
  2.1.69-2.1.2xx turn it off and send the definitions (not modelled).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from engine.versions import FIRST_TOOL_SEARCH, parse_version

__all__ = [
    "PROFILES",
    "Profile",
    "model_max_output",
    "model_problem",
    "parse_version",
    "profile_for",
]

# The compactable tools of micro-compaction, each list the one before it plus what changed
# (versions.md, the inspect sweep): Edit and Write join in 1.0.80 ...
LEGACY_TOOLS_1_0_80 = (
    "Read",
    "Bash",
    "Grep",
    "Glob",
    "LS",
    "WebSearch",
    "WebFetch",
    "Edit",
    "Write",
)
# ... MultiEdit in 1.0.91 (before Write), LS leaves in 1.0.98, MultiEdit in 2.0.0
LEGACY_TOOLS_1_0_91 = (*LEGACY_TOOLS_1_0_80[:-1], "MultiEdit", "Write")
LEGACY_TOOLS_1_0_128 = tuple(t for t in LEGACY_TOOLS_1_0_91 if t != "LS")
LEGACY_TOOLS_2_0 = tuple(t for t in LEGACY_TOOLS_1_0_128 if t != "MultiEdit")
TOOLS_2_1_90 = (*LEGACY_TOOLS_2_0, "PowerShell")

CLEARED_TEXT = "[Old tool result content cleared]"
"""Replacement text of a cleared tool result (legacy micro-compaction, 1.0.60-2.1.68)."""

MicroCompactKind = Literal["legacy", "stub", "time-based"]


@dataclass(frozen=True)
class Profile:
    """Numbers and switches of one behaviour era (``first``..``last`` inclusive)."""

    name: str
    first: str
    last: str
    verified_in: tuple[str, ...]
    # --- window and output reserve -------------------------------------------------------
    context_window: int = 200_000  # all eras; 1e6 when the model id contains "[1m]"
    context_window_1m: int = 1_000_000
    default_max_output: int = 32_000  # CLAUDE_CODE_MAX_OUTPUT_TOKENS default (2.0.76, 2.1.39)
    max_output_env_ceiling: int = 64_000  # the env value is capped at 64000 (2.1.39)
    reserve_cap: int | None = None  # min(maxOut, 20000) from 2.1.21; None = full reserve
    # --- thresholds ------------------------------------------------------------------------
    autocompact_offset: int = 13_000  # 1.0.80+
    warning_offset: int = 20_000  # 1.0.80+
    error_offset: int = 20_000  # 1.0.80+
    blocking_offset: int | None = None  # 3000 from 2.0.77
    blocking_base: Literal["window", "effective"] = "window"
    has_pct_override: bool = False  # CLAUDE_AUTOCOMPACT_PCT_OVERRIDE, 2.0.20+
    has_disable_compact: bool = False  # DISABLE_COMPACT, 2.0.30+
    # "dispatcher" (2.0.30-2.0.64): only the auto-compact dispatcher reads DISABLE_COMPACT, so it
    # stops auto-compaction but the warning/error thresholds still count from the auto-compact
    # threshold; "enabled" (2.0.65+): the "auto-compact enabled" function reads it too.
    disable_compact_scope: Literal["enabled", "dispatcher"] = "enabled"
    has_disable_auto_compact: bool = False  # DISABLE_AUTO_COMPACT, 2.0.77+
    has_blocking_override: bool = False  # CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE, 2.0.77+
    # --- token counting --------------------------------------------------------------------
    count_mode: Literal["usage", "usage+newer"] = "usage"
    # newer = after the first record of the last usage's message.id: 2.1.64, 2.1.69+
    newer_from_message_start: bool = False
    newer_image_tokens: int = 1334  # image in the newer-messages estimate (2.1.2-2.1.37)
    newer_counts_attachments: bool = False  # attachment records counted, 2.1.33+
    # ... as their JSON (2.1.33-2.1.44), or rendered to the messages sent for them (2.1.45+)
    newer_renders_attachments: bool = False
    # tool_use (name + JSON input), thinking, redacted_thinking, documents and any other block
    # counted in the newer-messages estimate, 2.1.74+ (before: text, tool_result, images only)
    newer_counts_all_blocks: bool = False
    estimate_factor_4_3: bool = False  # message-level estimate x4/3, 2.0.47-2.1.104
    # documents (also inside tool_result content) counted like images in the message-level
    # estimate, 2.1.47+ (before: as their JSON)
    estimate_counts_documents: bool = False
    # thinking / redacted_thinking / tool_use by their text in the message-level estimate,
    # 2.1.75+ (before: their JSON)
    estimate_counts_block_text: bool = False
    # no message-level estimator in cli.js: estimate_messages is the newer estimate, 2.1.105+
    message_estimate_is_newer: bool = False
    image_tokens: int = 2000  # image/document in the message-level estimate, 1.0.80+
    # the final usage of a streamed reply (message_delta) reaches the messages in memory: by the
    # SDK's MessageStream mutating the message_start usage they share (up to 2.1.7), by an
    # explicit replacement on the last block's message (2.1.30+); 2.1.8-2.1.29 read the raw
    # stream and keep the message_start placeholder (``output_tokens`` 1..~30) in memory (read in
    # 2.1.0-2.1.7: messages.stream; 2.1.8-2.1.29: messages.create stream:true; 2.1.30, 2.1.37,
    # 2.1.45, 2.1.50: the replacement; 2.1.112 sets it on every block of the reply)
    usage_final_in_memory: bool = True
    # --- micro-compaction ------------------------------------------------------------------
    microcompact: MicroCompactKind | None = "legacy"
    mc_tools: tuple[str, ...] = LEGACY_TOOLS_2_0
    mc_keep: int = 3
    mc_target: int = 40_000
    mc_min_saving: int = 20_000
    mc_has_env_gate: bool = True  # DISABLE_MICROCOMPACT, 1.0.60-2.1.68
    mc_remote_kill_switch: bool = False  # tengu_cache_plum_violet, 2.1.19-2.1.68 (default off)
    mc_replacement: Literal["cleared", "persisted"] = "cleared"  # persisted pointer from 2.1.0
    mc_clears_images: bool = False  # images of answered user messages → "[image]" (2.1.38+)
    # --- other compaction ------------------------------------------------------------------
    session_memory: bool = False  # SM compaction tried before the full summary, 2.0.47-2.1.104
    sm_min_tokens: int = 10_000
    sm_min_text_messages: int = 5
    sm_max_tokens: int = 40_000
    restore_max_files: int = 5
    restore_total_tokens: int = 50_000
    restore_file_tokens: int = 5_000
    # --- the request as sent (engine.claude_code.flatten, lab.predict) ----------------------------
    # a user message's string content sent as [text block], up to 2.1.29 (2.1.30: as the string)
    user_string_blocks: bool = True
    # consecutive user messages merged with a "\n" seam between their text, 2.1.78+ (engine.claude_code.flatten)
    merge_seam_newline: bool = False
    # the summary request made by a forked query loop (a patched cli.js prunes it once more), 2.1.86+
    compaction_through_loop: bool = False
    # the summary request shares the main prompt's cache prefix (same system prompt and tools;
    # tengu_compact_cache_prefix: absent up to 2.1.28, default off 2.1.29-2.1.78, on in 2.1.87+);
    # before, it sends its own system prompt and tool list, so it writes the whole conversation
    compact_reads_cache: bool = False
    # --- native builds (2.1.113+, read out of the Bun binaries by patcher.native) -----------
    # background compaction precomputed once the count reaches
    # min(eff - round(eff * fraction), threshold); None = no precompute (up to the levels era)
    precompute_buffer_fraction: float | None = None
    # the proactive eff - 13000 auto-compaction fires only when the auto-compact window was
    # configured (CLAUDE_CODE_AUTO_COMPACT_WINDOW, settings autoCompactWindow, server, experiment,
    # model default); with the "auto" window the precomputed summary is swapped in when the API
    # refuses the prompt as too long (reactive compaction)
    proactive_needs_configured_window: bool = False
    # the auto-compact count adds back the input tokens server-side clearing removed
    # (context_management.applied_edits of the last response)
    count_adds_server_cleared: bool = False
    # attachment records carry ``rendered`` (the message contents sent for them, 2.1.330 writes
    # it): the newer estimate counts each rendered content at chars/4 rounded, and an attachment
    # without ``rendered`` (prompt_snapshot, session_context) as nothing; measured on the real
    # 2.1.330 binary offline (tests/e2e/test_native_binary.py: its boundary to the token)
    attachments_count_rendered: bool = False
    # models whose built-in capability table says ``context: {window: 1e6, native_1m: true}``:
    # a 1M window without the [1m] suffix (first-party API; CLAUDE_CODE_DISABLE_1M_CONTEXT off)
    native_1m_models: tuple[str, ...] = ()
    # talking to Anthropic's API, tool search keeps MCP tools (recall's) out of ``tools`` and
    # sends their names only: 2.1.69 on (measured; see the module docstring)
    tool_search_defers_mcp: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def range(self) -> str:
        return f"{self.first}..{self.last}"


# --------------------------------------------------------------------------- the eras


@dataclass(frozen=True)
class Era:
    """One row of :data:`ERAS`: a version range and what changed in its first version."""

    range: str  # "first..last", both inclusive
    verified_in: tuple[str, ...]  # the real cli.js files (or native builds) it was read from
    changes: Mapping[str, Any]  # the Profile fields that differ from the era it derives from
    notes: tuple[str, ...] = ()  # this era's notes (not inherited)
    like: str | None = None  # derive from this era (its first version), not the previous one


def _era(
    versions: str,
    verified_in: tuple[str, ...],
    *,
    notes: tuple[str, ...] = (),
    like: str | None = None,
    **changes: Any,
) -> Era:
    return Era(versions, verified_in, changes, notes, like)


# Native builds (2.1.113-2.1.330) keep 2.1.105's counting; what changed is read by
# ``ctxpatch inspect`` out of the binaries (patcher.native.levels), each change bisected over
# the published linux-x64 builds (34 inspected; both sides of every boundary in verified_in):
# the level function (2.1.122), the precomputed compaction (2.1.142), the proactive threshold
# only for a configured window (2.1.195), the count adding back server-cleared tokens (2.1.284);
# the JavaScript is one module up to 2.1.241 and code-split from 2.1.242. The request as sent
# is taken as 2.1.105's (not re-checked on native builds).
# 2.1.330's model table (2.1.217's: sonnet-5, opus-4-7, opus-4-8, fable-5, mythos-5); newer
# models reach older builds through the server's capability table, so the newest list is used
NATIVE_1M_MODELS = (
    "claude-opus-4-7",
    "claude-opus-4-8",
    "claude-opus-5",
    "claude-opus-5-5",
    "claude-sonnet-5",
    "claude-sonnet-5-5",
    "claude-haiku-5-5",
    "claude-fable-5",
    "claude-fable-5-1",
    "claude-fable-5-2",
    "claude-mythos-5",
    "claude-mythos-5-1",
    "claude-mythos-5-2",
)
_NATIVE_NOTES = (
    "context window (2.1.217 and 2.1.330 read): 1e6 when the model id matches /\\[1m\\]/i, or "
    "the betas carry context-1m-2025-08-07 and the model supports the 1M beta (not claude-3-*, "
    "opus-4-0/4-1/4-5, haiku-4-5), or the model is natively 1M; all off with "
    "CLAUDE_CODE_DISABLE_1M_CONTEXT; DISABLE_COMPACT + CLAUDE_CODE_MAX_CONTEXT_TOKENS override it; "
    "else 200000",
    "auto-compact window: CLAUDE_CODE_AUTO_COMPACT_WINDOW (clamped to 100k-1M), settings "
    "autoCompactWindow, a server value, an experiment or a per-model default cap the window "
    "(only the env variable is modelled)",
    "the context-hint keep-recent MC and time-based MC (tengu_time_based_microcompact, keep "
    "recent N tool results, placeholder or persisted pointer) exist but are not modelled; "
    "2.1.330 writes no microcompact_boundary record, it only reads them (hidden in the UI, a "
    "boundary like compact_boundary when scanning back)",
)
_LEVELS_NOTE = (
    "thresholds come from a level function {level: ok|warn|compact|blocked, pctLeft}: compact "
    "at eff - 13000 (PCT override lowers it), warn at base - 20000, blocked at eff(model "
    "window) - 3000"
)
_REACTIVE_NOTE = (
    "with the auto-compact window not configured the eff - 13000 compaction does not fire: a "
    "summary precomputed in the background from min(eff - round(0.2 eff), eff - 13000) is "
    "swapped in when the API refuses the prompt as too long (modelled as: compaction when the "
    "count passes the context window; no blocking limit)"
)
_SERVER_NOTE = (
    "the auto-compact count adds back what server-side clearing removed (2.1.330 YG/eCt): the "
    "sum of cleared_input_tokens over the clear_tool_uses_20250919 entries of "
    "message.context_management.applied_edits of the last assistant record (or "
    "client_estimated_cleared_input_tokens when client_cut_tool_uses > 0, not modelled); "
    "engine.claude_code.count adds the applied_edits sum. Claude Code keeps applied_edits in the message "
    "only for an edit it built itself (xq): an edit added by a gateway (ctxpatch run) leaves "
    "context_management null, so there the count follows the edited usage (measured)"
)
_MC_OFF_NOTE = "time-based MC is behind the remote flag tengu_slate_heron (off)"

ERAS: tuple[Era, ...] = (
    # the first era: Profile's defaults plus these
    _era("1.0.80..1.0.90", ("1.0.80", "1.0.90"), mc_tools=LEGACY_TOOLS_1_0_80),
    # MultiEdit joins the compactable tools (1.0.90: not)
    _era("1.0.91..1.0.97", ("1.0.91", "1.0.96"), mc_tools=LEGACY_TOOLS_1_0_91),
    # LS leaves the compactable tools (1.0.96 has it; 1.0.97 was never published)
    _era("1.0.98..1.0.127", ("1.0.98", "1.0.127"), mc_tools=LEGACY_TOOLS_1_0_128),
    # no modelled change: 1.0.128 (call-site shape S1) read on its own
    _era("1.0.128..1.0.999", ("1.0.128",)),
    # MultiEdit leaves the compactable tools (versions.md: 2.0.0-2.1.68 have 8)
    _era("2.0.0..2.0.19", ("2.0.0", "2.0.19"), mc_tools=LEGACY_TOOLS_2_0),
    # CLAUDE_AUTOCOMPACT_PCT_OVERRIDE read (2.0.19: not)
    _era("2.0.20..2.0.29", ("2.0.20", "2.0.29"), has_pct_override=True),
    _era(
        "2.0.30..2.0.46",
        ("2.0.30", "2.0.46"),
        has_disable_compact=True,  # DISABLE_COMPACT read ...
        disable_compact_scope="dispatcher",  # ... by the auto-compact dispatcher only
    ),
    _era(
        "2.0.47..2.0.59",
        ("2.0.47", "2.0.59"),
        estimate_factor_4_3=True,  # the message-level estimate x4/3 (2.0.46: not)
        session_memory=True,  # session-memory compaction (2.0.46: not)
        notes=("session-memory numbers before 2.1.7 (no config object) are assumed as in 2.1.7",),
    ),
    # no modelled change: an era start of versions.md's bisection (x4/3 "between 2.0.30 and 2.0.60")
    _era("2.0.60..2.0.64", ("2.0.60", "2.0.64")),
    # the "auto-compact enabled" function reads DISABLE_COMPACT too (2.0.64: the dispatcher only)
    _era("2.0.65..2.0.76", ("2.0.65", "2.0.76"), disable_compact_scope="enabled"),
    _era(
        "2.0.77..2.0.999",
        ("2.0.77",),
        blocking_offset=3000,  # the blocking limit, window - 3000 (2.0.76 lacks all three)
        has_disable_auto_compact=True,  # DISABLE_AUTO_COMPACT
        has_blocking_override=True,  # CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE
        notes=("the persisted-output pointer is behind the flag tengu_compact_mc_files (off)",),
    ),
    # MC replaces a cleared result by the persisted-output pointer
    _era("2.1.0..2.1.1", ("2.1.0",), mc_replacement="persisted"),
    # the count is the last usage plus a chars/4 estimate of the newer messages (2.1.0: usage)
    _era("2.1.2..2.1.6", ("2.1.2",), count_mode="usage+newer"),
    # blocking limit from the effective window (2.1.7, 2.1.9 read; 2.1.2, 2.1.14: the raw window)
    _era("2.1.7..2.1.7", ("2.1.7",), blocking_base="effective"),
    # the raw stream keeps the message_start usage placeholder in memory (2.1.7: MessageStream)
    _era("2.1.8..2.1.13", ("2.1.8", "2.1.9", "2.1.12"), usage_final_in_memory=False),
    # blocking limit from the raw window again (2.1.14, 2.1.20, 2.1.21, 2.1.39 read)
    _era("2.1.14..2.1.18", ("2.1.14", "2.1.18"), blocking_base="window"),
    # MC reads the remote kill switch tengu_cache_plum_violet (2.1.18: not)
    _era("2.1.19..2.1.20", ("2.1.19", "2.1.20"), mc_remote_kill_switch=True),
    # the output reserve capped at 20000 (2.1.20: no cap)
    _era("2.1.21..2.1.29", ("2.1.21", "2.1.29"), reserve_cap=20_000),
    _era(
        "2.1.30..2.1.32",
        ("2.1.30", "2.1.32"),
        usage_final_in_memory=True,  # message_delta's usage replaces the last block's
        user_string_blocks=False,  # a user message's string content sent as the string
    ),
    # attachment records counted (as JSON) in the newer-messages estimate (2.1.32: not)
    _era("2.1.33..2.1.37", ("2.1.33", "2.1.37"), newer_counts_attachments=True),
    _era(
        "2.1.38..2.1.38",
        ("2.1.38",),
        newer_image_tokens=2000,  # an image in the newer-messages estimate (2.1.37: 1334)
        mc_clears_images=True,  # MC clears images of answered user messages (2.1.37: not)
    ),
    # no modelled change: 2.1.39 read on its own (the era start before the sweep found 2.1.38)
    _era("2.1.39..2.1.44", ("2.1.39", "2.1.44")),
    # attachments counted as their rendered messages, not their JSON (2.1.44: JSON)
    _era("2.1.45..2.1.46", ("2.1.45",), newer_renders_attachments=True),
    # documents counted like images in the message-level estimate (2.1.45: their JSON)
    _era("2.1.47..2.1.63", ("2.1.47", "2.1.50", "2.1.63"), estimate_counts_documents=True),
    _era(
        "2.1.64..2.1.64",
        ("2.1.64",),
        newer_from_message_start=True,  # newer messages from the reply's first record (PN)
        microcompact="stub",  # the legacy MC body removed ...
        mc_has_env_gate=False,  # ... with DISABLE_MICROCOMPACT,
        mc_remote_kill_switch=False,  # its kill switch,
        mc_replacement="cleared",  # its pointer
        mc_clears_images=False,  # and its image clearing
    ),
    # non-monotonic: 2.1.67/2.1.68 are the 2.1.47 era again (legacy MC, count from the usage
    # record; 2.1.65/2.1.66 were published only in the agent SDK, sdk 0.2.66 read)
    _era(
        "2.1.65..2.1.68",
        ("2.1.67", "2.1.68"),
        like="2.1.47",
        notes=("legacy micro-compaction came back in 2.1.67/2.1.68 (non-monotonic)",),
    ),
    # ... and from 2.1.69 on the 2.1.64 era again (stub MC, XV counts from the first record)
    # ... with tool search on by default: MCP tools deferred (their names only); the era starts
    # at FIRST_TOOL_SEARCH, the boundary recall's server reads from a client's version
    _era(
        f"{FIRST_TOOL_SEARCH}..2.1.73",
        ("2.1.69", "2.1.71", "2.1.73"),
        like="2.1.64",
        tool_search_defers_mcp=True,
    ),
    # every block counted in the newer-messages estimate (2.1.73: text, tool_result, images)
    _era("2.1.74..2.1.74", ("2.1.74",), newer_counts_all_blocks=True),
    _era(
        "2.1.75..2.1.77",
        ("2.1.75",),
        blocking_base="effective",  # the effective window again, through 2.1.112 (2.1.74: raw)
        estimate_counts_block_text=True,  # message-level estimate: blocks by text (2.1.74: JSON)
    ),
    # consecutive user messages joined with a "\n" seam (2.1.78 the oldest seen; 2.1.68: as is)
    _era("2.1.78..2.1.80", ("2.1.80",), merge_seam_newline=True),
    _era(
        "2.1.81..2.1.85",
        ("2.1.81", "2.1.85"),
        microcompact="time-based",  # time-based MC inside deps.microcompact (2.1.81-2.1.104) ...
        mc_tools=TOOLS_2_1_90,  # ... with PowerShell (versions.md: from 2.1.90; 2.1.81 has 8)
        mc_keep=5,  # ... keeping the last 5 (tengu_slate_heron default keepRecent)
        notes=(_MC_OFF_NOTE,),
    ),
    # the summary request made by a forked query loop (2.1.77-2.1.85 call the model directly)
    _era(
        "2.1.86..2.1.104",
        ("2.1.90", "2.1.104"),
        compaction_through_loop=True,
        compact_reads_cache=True,
        notes=(_MC_OFF_NOTE,),
    ),
    _era(
        "2.1.105..2.1.112",
        ("2.1.112",),
        estimate_factor_4_3=False,  # the x4/3 estimator removed with session memory ...
        session_memory=False,  # ... (2.1.104 has both; no tengu_sm_compact from 2.1.105)
        message_estimate_is_newer=True,  # the post-compaction count uses the newer estimate
        microcompact="stub",  # time-based MC gone: the stub (2.1.64's) again ...
        mc_tools=LEGACY_TOOLS_2_0,  # ... with the 8 tools
        mc_keep=3,  # ... and keep 3
        notes=("reactive compact and the context-hint keep-recent MC are not modelled",),
    ),
    # --- native builds: read out of the linux-x64 binaries (patcher.native), never patched ----
    # no modelled change in the counting: 2.1.105's
    _era("2.1.113..2.1.121", ("2.1.113", "2.1.121"), notes=_NATIVE_NOTES),
    # the level function replaces isAboveAutoCompactThreshold (2.1.121): same numbers
    _era(
        "2.1.122..2.1.141",
        ("2.1.122", "2.1.136", "2.1.141"),
        notes=(*_NATIVE_NOTES, _LEVELS_NOTE),
    ),
    # background compaction precomputed at min(eff - round(0.2 eff), threshold) (2.1.141: none)
    _era(
        "2.1.142..2.1.193",
        ("2.1.142", "2.1.168", "2.1.193"),
        precompute_buffer_fraction=0.2,
        notes=(*_NATIVE_NOTES, _LEVELS_NOTE),
    ),
    _era(
        "2.1.195..2.1.283",
        ("2.1.195", "2.1.217", "2.1.228", "2.1.229", "2.1.241", "2.1.242", "2.1.247", "2.1.283"),
        # the proactive eff - 13000 compaction only with a configured window (2.1.193: always)
        proactive_needs_configured_window=True,
        native_1m_models=NATIVE_1M_MODELS,  # natively 1M models (see NATIVE_1M_MODELS)
        notes=(*_NATIVE_NOTES, _LEVELS_NOTE, _REACTIVE_NOTE),
    ),
    _era(
        "2.1.284..2.1.330",
        ("2.1.284", "2.1.330"),
        count_adds_server_cleared=True,  # the count adds back server-cleared tokens (2.1.283: not)
        attachments_count_rendered=True,  # attachments counted by `rendered` (2.1.330 read)
        notes=(*_NATIVE_NOTES, _LEVELS_NOTE, _REACTIVE_NOTE, _SERVER_NOTE),
    ),
)
"""The table :data:`PROFILES` is folded from: each era, its first version's changes."""


def _fold(eras: tuple[Era, ...]) -> tuple[Profile, ...]:
    """Each era's profile: the previous one's (or its ``like`` era's) with the era's changes."""
    done: dict[str, Profile] = {}
    prev: Profile | None = None
    for era in eras:
        first, last = era.range.split("..")
        own: dict[str, Any] = dict(
            name=first, first=first, last=last, verified_in=era.verified_in, notes=era.notes
        )
        base = done[era.like] if era.like else prev
        prev = (
            Profile(**own, **era.changes) if base is None else replace(base, **own, **era.changes)
        )
        done[first] = prev
    return tuple(done.values())


PROFILES: tuple[Profile, ...] = _fold(ERAS)
"""One profile per era of :data:`ERAS`, oldest first."""


def beyond_profiles(version: str) -> str | None:
    """The newest profile's last version when ``version`` is newer than every profile, else None."""
    newest = PROFILES[-1].last
    return newest if parse_version(version) > parse_version(newest) else None


def profile_for(version: str) -> Profile:
    """The profile whose version range holds ``version``.

    Versions before 1.0.80 used a ratio model (0.92 of the window) and are not modelled; versions
    newer than every profile get the newest one with a note (callers warn: ``beyond_profiles``).
    """
    v = parse_version(version)
    if v < (1, 0, 80):
        raise ValueError(
            f"Claude Code {version} predates the offset thresholds (1.0.80): not modelled"
        )
    for p in PROFILES:
        if parse_version(p.first) <= v <= parse_version(p.last):
            return p
    last = PROFILES[-1]
    extrapolated = f"{version} is newer than every profile; numbers extrapolated from {last.range}"
    return replace(last, notes=(*last.notes, extrapolated))


MODEL_ALIASES = ("default", "opus", "sonnet", "haiku", "opusplan")
"""Claude Code's ``--model`` aliases (each may end in ``[1m]``)."""


def model_problem(model: str) -> str | None:
    """Why ``model`` cannot be modelled, or None for a Claude model id or alias.

    The thresholds depend on the model's max output and context window, which ctxpatch knows
    for Claude models only (``claude-*`` ids, also as Bedrock/Vertex ids, and the aliases).
    """
    m = model.strip().lower()
    if "claude" in m or m.removesuffix("[1m]") in MODEL_ALIASES:
        return None
    return (
        f"{model!r} is not a Claude model: the thresholds come from a Claude model's max output"
        " and context window, which ctxpatch knows only for Claude models"
    )


def model_max_output(model: str) -> int:
    """The model's max output tokens as ``cli.js`` maps it (same table in 2.0.76 and 2.1.39)."""
    m = model.lower()
    if "3-5" in m:
        return 8192
    if "claude-3-opus" in m:
        return 4096
    if "claude-3-sonnet" in m:
        return 8192
    if "claude-3-haiku" in m:
        return 4096
    if "opus-4-5" in m:
        return 64_000
    if "opus-4" in m:
        return 32_000
    if "sonnet-4" in m or "haiku-4" in m:
        return 64_000
    return 32_000
