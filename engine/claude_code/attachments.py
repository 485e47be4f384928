"""Attachment records as the newer-messages estimate sees them from Claude Code 2.1.45 on.

Up to 2.1.44 (from 2.1.33) the auto-compact count adds an attachment record as the chars/4 of its
JSON. From 2.1.45 on ``cli.js`` first turns the attachment into the user message(s) it sends
(its ``normalizeAttachmentForAPI``) and counts the content of each message on its own, like any
other newer message: chars/4 of each string, rounded per message. Most of those messages are the
attachment's text in a ``<system-reminder>`` wrapper.

``render_attachment`` returns the texts of those messages for the attachment types modelled
here, or ``None`` for the others, which the caller keeps counting as their JSON (the pre-2.1.45
rule: close for the text-only types, whose JSON holds the same text, but not exact). Modelled,
each read in every published ``cli.js`` from 2.1.45 to 2.1.112 (the same text in all of them):

* ``skill_listing``: "The following skills are available for use with the Skill tool:" and the
  listing; nothing when the listing is empty;
* ``critical_system_reminder``: its content;
* ``date_change``: the fixed sentence with ``newDate``;
* ``hook_success``: "<hookName> hook success: <content>" for the SessionStart and
  UserPromptSubmit events only, nothing for the others or an empty content;
* ``hook_additional_context``: "<hookName> hook additional context: " and the lines joined by
  newlines; nothing for no lines;
* ``hook_stopped_continuation``: "<hookName> hook stopped continuation: <message>";
* types sent as nothing in every version: ``already_read_file``, ``command_permissions``,
  ``edited_image_file``, ``hook_cancelled``, ``hook_error_during_execution``,
  ``hook_non_blocking_error``, ``hook_system_message``, ``structured_output``,
  ``hook_permission_decision``, ``autocheckpointing``, ``background_task_status``.

Not modelled (JSON count kept): files, directories and edited files (rendered as a Read or Bash
tool call and its result), todo/task reminders, plan mode, memories, queued commands, MCP
resources, diagnostics, task status, token/budget usage and the deltas of deferred tools,
agents and MCP instructions; several of them changed their text between versions (``todo`` is
sent as a reminder up to 2.1.50 and as nothing in 2.1.68), or depend on state the transcript does
not hold.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SKILL_LISTING_HEAD = "The following skills are available for use with the Skill tool:\n\n"

SENT_AS_NOTHING = frozenset(
    {
        "already_read_file",
        "command_permissions",
        "edited_image_file",
        "hook_cancelled",
        "hook_error_during_execution",
        "hook_non_blocking_error",
        "hook_system_message",
        "structured_output",
        "hook_permission_decision",
        "autocheckpointing",
        "background_task_status",
    }
)
"""Attachment types that produce no message in 2.1.45-2.1.112 (a ``return[]`` branch, or the
``[...].includes(type)`` list of 2.1.45-2.1.112)."""

MODELLED = (
    frozenset(
        {
            "skill_listing",
            "critical_system_reminder",
            "date_change",
            "hook_success",
            "hook_additional_context",
            "hook_stopped_continuation",
        }
    )
    | SENT_AS_NOTHING
)


def system_reminder(text: str) -> str:
    """The wrapper every reminder gets: ``<system-reminder>\\n…\\n</system-reminder>``."""
    return f"<system-reminder>\n{text}\n</system-reminder>"


def _str(att: Mapping[str, Any], key: str) -> str | None:
    v = att.get(key)
    return v if isinstance(v, str) else None


def render_attachment(att: Mapping[str, Any]) -> list[str] | None:
    """The texts of the messages ``cli.js`` 2.1.45+ makes of ``att``; ``None`` if not modelled.

    Fields of an unexpected type (where JavaScript would print ``undefined`` or throw) also give
    ``None``, so the caller falls back to the JSON count rather than guess.
    """
    t = att.get("type")
    if t in SENT_AS_NOTHING:
        return []
    if t == "skill_listing":
        content = att.get("content")
        if not content:
            return []
        if not isinstance(content, str):
            return None
        return [system_reminder(SKILL_LISTING_HEAD + content)]
    if t == "critical_system_reminder":
        content = _str(att, "content")
        # an empty content becomes the CLI's "no content" placeholder: not modelled
        return [system_reminder(content)] if content else None
    if t == "date_change":
        date = _str(att, "newDate")
        if date is None:
            return None
        return [
            system_reminder(
                f"The date has changed. Today's date is now {date}. DO NOT mention this to the user "
                "explicitly because they are already aware."
            )
        ]
    if t == "hook_success":
        if att.get("hookEvent") not in ("SessionStart", "UserPromptSubmit"):
            return []
        if att.get("content") == "":
            return []
        name, content = _str(att, "hookName"), _str(att, "content")
        if name is None or content is None:
            return None
        return [system_reminder(f"{name} hook success: {content}")]
    if t == "hook_additional_context":
        lines = att.get("content")
        if not isinstance(lines, list) or not all(isinstance(x, str) for x in lines):
            return None
        if not lines:
            return []
        name = _str(att, "hookName")
        if name is None:
            return None
        return [system_reminder(f"{name} hook additional context: " + "\n".join(lines))]
    if t == "hook_stopped_continuation":
        name, message = _str(att, "hookName"), _str(att, "message")
        if name is None or message is None:
            return None
        return [system_reminder(f"{name} hook stopped continuation: {message}")]
    return None
