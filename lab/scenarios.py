"""Generated sessions that make the compaction mechanisms (and the text prune) fire on purpose.

:func:`rounds_session`: one prompt then ``n`` Read/Bash rounds of ``result_chars`` each, then a
short reply: the classic micro-compaction probe (e2e.md §6).

:func:`turns_session`: ``turns`` typed prompts, each followed by assistant text, tool rounds and a
long multi-line reply: what the text prune works on (turn boundaries, STEP, untouched blocks).
Prompts alternate between string content and a list of text blocks, and some texts are short
enough (<= MAX_CHARS) to stay untouched, so every branch of the prune is visible in a request.
"""

from __future__ import annotations

from lab.session import DEFAULT_MODEL, SessionWriter, filler

LONG_PROMPT = (
    "Turn {t}: please look at module m{t} and explain what it does in detail.\n"
    "Context for turn {t}: " + "the quick brown fox jumps over the lazy dog " * 4
)
SHORT_PROMPT = "ok, go on ({t})"
LONG_REPLY = (
    "Summary of step {t}: the module m{t} reads its configuration, validates it and "
    "starts the workers.\n" + "Detail line for the reader. " * 12
)
SHORT_REPLY = "Done ({t})."


def rounds_session(
    cwd: str,
    n: int = 20,
    result_chars: int = 16000,
    last_usage: int = 135000,
    seed: int = 1,
    version: str = "2.0.76",
    model: str | None = None,
    sizes: list[int] | None = None,
) -> SessionWriter:
    """A prompt, ``n`` tool rounds (Read/Bash alternating), a reply with ``last_usage``."""
    s = SessionWriter(cwd=cwd, seed=seed, version=version, model=model or DEFAULT_MODEL)
    s.prompt("Please investigate the repository.")
    for i in range(n):
        size = sizes[i] if sizes else result_chars
        if i % 2 == 0:
            s.tool_round(
                "Read",
                {"file_path": f"{cwd}/src/f{i}.py"},
                filler(size, f"r{i}"),
                usage_total=7000 + 100 * i,
            )
        else:
            s.tool_round(
                "Bash",
                {"command": f"cat src/f{i}.py", "description": "show file"},
                filler(size, f"r{i}"),
                usage_total=7000 + 100 * i,
            )
    s.reply("Ready for the next step.", usage_total=last_usage)
    return s


def turns_session(
    cwd: str,
    turns: int = 9,
    tools_per_turn: int = 2,
    result_chars: int = 16000,
    last_usage: int = 60000,
    seed: int = 2,
    version: str = "2.0.76",
    model: str | None = None,
) -> SessionWriter:
    """``turns`` typed prompts with text, tool rounds and replies (see the module docstring)."""
    s = SessionWriter(cwd=cwd, seed=seed, version=version, model=model or DEFAULT_MODEL)
    for t in range(turns):
        if t % 3 == 2:
            s.prompt(SHORT_PROMPT.format(t=t))
        elif t % 2 == 1:
            s.prompt([{"type": "text", "text": LONG_PROMPT.format(t=t)}])
        else:
            s.prompt(LONG_PROMPT.format(t=t))
        for k in range(tools_per_turn):
            text = (
                (
                    f"Let me read part {k} of m{t}.\nI will then summarise it for you in "
                    "the reply that follows this tool call, as usual."
                )
                if k == 0
                else None
            )
            s.tool_round(
                "Read",
                {"file_path": f"{cwd}/src/m{t}_{k}.py"},
                filler(result_chars, f"t{t}k{k}", seed),
                usage_total=5000 + 1000 * t,
                text=text,
            )
        s.reply(
            (SHORT_REPLY if t % 4 == 3 else LONG_REPLY).format(t=t), usage_total=6000 + 1000 * t
        )
    s.set_last_usage(last_usage)
    return s


def newer_blocks_session(
    cwd: str,
    last_usage: int = 60000,
    thinking_chars: int = 8000,
    input_chars: int = 4000,
    seed: int = 3,
    version: str = "2.1.74",
    model: str | None = None,
) -> SessionWriter:
    """Tool rounds, a reply with ``last_usage``, then a ``<synthetic>`` assistant line (no usage
    of its own, so it counts among the newer messages) holding a ``thinking`` block of
    ``thinking_chars``, a text and a Write ``tool_use`` whose input is ``input_chars`` long, and
    its result, and a ``<synthetic>`` closing reply: what the newer-messages estimate counts
    from 2.1.74 and not before."""
    s = rounds_session(cwd, n=4, last_usage=last_usage, seed=seed, version=version, model=model)
    tid = s.next_tool_id()
    line = s.assistant(
        [
            {
                "type": "thinking",
                "thinking": filler(thinking_chars, "think", seed),
                "signature": "c2lnbmF0dXJl",
            },
            {"type": "text", "text": "Writing the notes file now."},
            {
                "type": "tool_use",
                "id": tid,
                "name": "Write",
                "input": {
                    "file_path": f"{cwd}/notes.txt",
                    "content": filler(input_chars, "notes", seed),
                },
            },
        ],
        usage_total=0,
    )
    line["message"]["model"] = "<synthetic>"
    s.tool_result(tid, "File created successfully.", "Write")
    # the turn ends on an assistant line (a session ending on a tool_result is resumed as an
    # interrupted turn), also <synthetic> so that the usage above stays the last one
    s.reply("The notes are written.", usage_total=0)["message"]["model"] = "<synthetic>"
    return s


UNSIGNED = "unsigned"
"""The signature of a thinking block the harness has not signed yet (see
:func:`lab.signing.sign_session`); the mock's check rejects it unless binding is off."""


def thinking_session(
    cwd: str,
    turns: int = 3,
    result_chars: int = 4000,
    last_usage: int = 20000,
    seed: int = 4,
    version: str = "2.1.112",
    model: str | None = None,
    tools_per_turn: int = 1,
) -> SessionWriter:
    """``turns`` typed prompts, each answered with a thinking block, a long text and a Read
    ``tool_use`` (one API reply) and its result, ``tools_per_turn - 1`` more replies of a
    thinking block and a Read with their results, then a thinking block and a long reply: what
    a thinking-on session looks like. Thinking texts are unique (the signer finds them by text);
    signatures are :data:`UNSIGNED` until :func:`lab.signing.sign_session` signs them."""
    s = SessionWriter(cwd=cwd, seed=seed, version=version, model=model or DEFAULT_MODEL)
    for t in range(turns):
        prompt = LONG_PROMPT.format(t=t)
        s.prompt(prompt if t % 2 == 0 else [{"type": "text", "text": prompt}])
        for k in range(tools_per_turn):
            tid = s.next_tool_id()
            think = {
                "type": "thinking",
                "thinking": f"Turn {t}, step {k}: I should read part {k} of m{t}.",
                "signature": UNSIGNED,
            }
            text = [
                {
                    "type": "text",
                    "text": f"Let me read m{t}.\nI will then summarise it in the reply.",
                }
            ]
            read = {
                "type": "tool_use",
                "id": tid,
                "name": "Read",
                "input": {"file_path": f"{cwd}/src/m{t}_{k}.py"},
            }
            s.assistant([think, *(text if k == 0 else []), read], usage_total=5000 + 1000 * t)
            s.tool_result(tid, filler(result_chars, f"th{t}k{k}", seed), "Read")
        s.assistant(
            [
                {
                    "type": "thinking",
                    "thinking": f"Turn {t}: m{t} is read; summarise it.",
                    "signature": UNSIGNED,
                },
                {"type": "text", "text": LONG_REPLY.format(t=t)},
            ],
            usage_total=6000 + 1000 * t,
        )
    s.set_last_usage(last_usage)
    return s
