"""Generated conversations for the clearing policy's tests (the twin, its resumable walk, the
gateway, node): results and inputs of different sizes, so that the break-even rule and the
ceiling both decide; now and then the odd message a real client may send too."""

from __future__ import annotations

from hypothesis import strategies as st

TEXTS = st.sampled_from(["", "ok", "x" * 700, "é" * 300, "\U0001f600" * 90, "line\n" * 2_000])
# an assistant message's thinking: none, shown (a summary, its text counts), omitted (display
# "omitted": an empty text, counted by its signature), or a block without a signature
THINKING = st.one_of(
    st.none(),
    st.builds(
        lambda text, sig, unit: {"type": "thinking", "thinking": text, "signature": unit * sig},
        st.sampled_from(["", "hmm", "é" * 300]),
        st.sampled_from([0, 3, 4_001, 40_000]),
        st.sampled_from(["S", "\U0001f600"]),  # not base64: counted in UTF-16 units, as in JS
    ),
    st.just({"type": "thinking", "thinking": ""}),
)


@st.composite
def conversations(draw, odd: bool = False) -> list[dict]:
    """A human prompt, then tool rounds of 1-3 parallel uses with results of 0-40K chars (a
    reply now and then with a thinking block, shown or omitted), a typed prompt now and then;
    the last round's results may be missing. ``odd``: also rounds whose results come late (in
    a later user message) or twice, and messages of another role."""
    msgs: list[dict] = [{"role": "user", "content": draw(TEXTS)}]
    k = 0
    late: list[dict] = []
    rounds = draw(
        st.lists(
            st.tuples(
                st.integers(1, 3),
                st.booleans(),
                st.integers(0, 40_000),
                st.sampled_from(["Read", "Bash", "Edit"]),
            ),
            max_size=30,
        )
    )
    for width, typed, size, name in rounds:
        uses = [
            {"type": "tool_use", "id": f"t{k + i}", "name": name, "input": {"p": "y" * (size // 7)}}
            for i in range(width)
        ]
        thinking = draw(THINKING)
        said = [{"type": "text", "text": "on it"}, *uses]
        msgs.append({"role": "assistant", "content": [thinking, *said] if thinking else said})
        content = "r" * size if size % 2 else [{"type": "text", "text": "r" * size}]
        results = [
            {"type": "tool_result", "tool_use_id": f"t{k + i}", "content": content}
            for i in range(width)
        ]
        if odd and draw(st.integers(0, 5)) == 0:
            late.append(results.pop())  # answered in a later user message
        if odd and late and draw(st.booleans()):
            results.append(late.pop(0))
        if odd and results and draw(st.integers(0, 7)) == 0:
            results.append(results[0])  # the same result twice
        msgs.append({"role": "user", "content": results})
        if odd and draw(st.integers(0, 9)) == 0:
            msgs.append({"role": "system", "content": [results[0]] if results else "note"})
        k += width
        if typed:
            msgs.append({"role": "assistant", "content": [{"type": "text", "text": draw(TEXTS)}]})
            msgs.append({"role": "user", "content": [{"type": "text", "text": draw(TEXTS)}]})
    if len(msgs) > 2 and draw(st.booleans()):
        msgs.pop()  # the round in progress: results not there yet
    return msgs
