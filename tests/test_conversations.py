"""Recorded conversations: validation by file/line/turn, the one rendered text form, and the
prompt/recording tokens of every assistant turn (fast tokenizers here; the real one is marked)."""
from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

import pytest

from oilbird.data.conversations import (ConversationError, ToolCall, conversation_from_obj, copied_arguments,
                                        encode_conversation, encode_conversation_per_turn, load_conversations,
                                        read_jsonl, render_messages)
from oilbird.data.requests import DataError, Request, data_root, encode
from conftest import CHATML

GOOD = ('{"id": "c0", "messages": [{"role": "user", "content": "hi"}, '
        '{"role": "assistant", "content": "hello"}]}')

# (second line of the file, what the error must say besides "line 2")
BAD = {
    "not json": ('{"id": "c1", "messages": [', ["not valid JSON"]),
    "not an object": ('[{"role": "user", "content": "hi"}]', ["expected a JSON object"]),
    "no messages": ('{"id": "c1", "prompt": "hi"}', ["'c1'", "'messages'", "this is a request, a 'prompt' to answer"]),
    "no assistant turn": ('{"id": "c1", "messages": [{"role": "user", "content": "hi"}]}',
                          ["'c1'", "no assistant turn"]),
    "opens with assistant": ('{"id": "c1", "messages": [{"role": "assistant", "content": "hi"}]}',
                             ["'c1'", "message 0", "no prompt"]),
    "nothing said before the assistant": (
        '{"id": "c1", "messages": [{"role": "system", "content": " "}, {"role": "assistant", "content": "hi"}]}',
        ["'c1'", "message 1", "no prompt"]),
    "unknown role": ('{"id": "c1", "messages": [{"role": "user", "content": "hi"}, '
                     '{"role": "robot", "content": "x"}, {"role": "assistant", "content": "y"}]}',
                     ["'c1'", "message 1", "unknown role 'robot'"]),
    "a trace record": ('{"kind": "request", "request_id": "r", "method": "goose"}',
                       ["a trace record, not a conversation (open traces in the app"]),
    "a role that is not a string": ('{"id": "c1", "messages": [{"role": "user", "content": "hi"}, '
                                    '{"role": [], "content": "x"}, {"role": "assistant", "content": "y"}]}',
                                    ["'c1'", "message 1", "unknown role []"]),
    "a content block whose type is not a string": (
        '{"id": "c1", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": '
        '[{"type": [], "text": "x"}, {"type": "tool_use", "id": "t", "name": "f", "input": {}}]}]}',
        ["'c1'", "message 1", "content part 0 is not text (type [])"]),
    "a lone surrogate": ('{"id": "c1", "messages": [{"role": "user", "content": "hi \\ud800"}, '
                         '{"role": "assistant", "content": "y"}]}', ["lone UTF-16 surrogate (\\ud800"]),
    "no role": ('{"id": "c1", "messages": [{"role": "user", "content": "hi"}, '
                '{"content": "x"}, {"role": "assistant", "content": "y"}]}',
                ["'c1'", "message 1", "without 'role'"]),
    "no content": ('{"id": "c1", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "y"}, '
                   '{"role": "user", "content": "and?"}, {"role": "assistant"}]}',
                   ["'c1'", "message 3", "a message of role 'assistant' without 'content'"]),
    "arguments disagree": (
        '{"id": "c1", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "", '
        '"tool_calls": [{"name": "f", "arguments": {"a": 1}, "arguments_json": "{\\"a\\": 2}"}]}]}',
        ["'c1'", "message 1", "disagree"]),
    "unknown tool_call_id": (
        '{"id": "c1", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}, '
        '{"role": "tool", "tool_call_id": "zz", "content": "{}"}, {"role": "assistant", "content": "done"}]}',
        ["'c1'", "message 2", "tool_call_id 'zz'"]),
    "non-text content": ('{"id": "c1", "messages": [{"role": "user", "content": [{"type": "image_url", '
                         '"image_url": {"url": "x"}}]}, {"role": "assistant", "content": "y"}]}',
                         ["'c1'", "message 0", "content part 0", "not text"]),
    "function_call on a user message": (
        '{"id": "c1", "messages": [{"role": "user", "content": "hi", "function_call": {"name": "f"}}, '
        '{"role": "assistant", "content": "y"}]}', ["'c1'", "message 0", "function_call"]),
    "function_call not an object": (
        '{"id": "c1", "messages": [{"role": "user", "content": "hi"}, '
        '{"role": "assistant", "content": null, "function_call": "f()"}]}', ["'c1'", "message 1", "'function_call' must"]),
    "arguments_json broken beside parsed arguments": (
        '{"id": "c1", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "", '
        '"tool_calls": [{"name": "f", "arguments": {"a": 1}, "arguments_json": "{\\"a\\": "}]}]}',
        ["'c1'", "message 1", "not a JSON object's text"]),
    "tools not a list of objects": (
        '{"id": "c1", "tools": ["f"], "messages": [{"role": "user", "content": "hi"}, '
        '{"role": "assistant", "content": "y"}]}', ["'c1'", "'tools' must be a list of JSON objects"]),
    "tool calls on a user message": (
        '{"id": "c1", "messages": [{"role": "user", "content": "hi", "tool_calls": [{"name": "f"}]}, '
        '{"role": "assistant", "content": "y"}]}', ["'c1'", "message 0", "tool_calls"]),
    "duplicate id": ('{"id": "c0", "messages": [{"role": "user", "content": "a"}, '
                     '{"role": "assistant", "content": "b"}]}', ["'c0'", "already used on line 1"]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_line_names_file_line_conversation_and_turn(tmp_path, case):
    line, expected = BAD[case]
    p = tmp_path / "convs.jsonl"
    p.write_text(GOOD + "\n" + line + "\n")
    with pytest.raises(ConversationError) as exc:
        load_conversations(p)
    msg = str(exc.value)
    assert isinstance(exc.value, DataError)
    assert msg.startswith(f"{p}:2: "), msg              # every error names a line as InputError does
    for part in expected:
        assert part in msg, (part, msg)


def test_empty_file_and_missing_data_are_refused_by_name(tmp_path, monkeypatch):
    p = tmp_path / "empty.jsonl"
    p.write_text("\n\n")
    with pytest.raises(ConversationError, match="empty.jsonl.*no conversations"):
        load_conversations(p)
    with pytest.raises(DataError, match="no such file"):
        load_conversations(tmp_path / "nope.jsonl")
    monkeypatch.setenv("OILBIRD_DATA", str(tmp_path))
    with pytest.raises(DataError) as exc:
        load_conversations("agent-transcripts")
    assert str(tmp_path / "agent-transcripts" / "tau-airline.jsonl") in str(exc.value)
    assert "OILBIRD_DATA" in str(exc.value)
    with pytest.raises(DataError, match="--limit"):
        load_conversations("agent-builtin", limit=0)


def test_a_bad_line_after_the_limit_is_still_refused(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text(GOOD + "\n" + BAD["unknown role"][0] + "\n")
    with pytest.raises(ConversationError, match="c.jsonl:2: "):
        load_conversations(p, limit=1)


OPENAI = {"id": "log-7", "model": "some-model", "messages": [
    {"role": "system", "content": [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}]},
    {"role": "user", "content": "Where is order A1?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "find_order", "arguments": "{\"order_id\": \"A1\",  \"full\": true}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "{\"status\": \"shipped\"}"},
    {"role": "assistant", "content": "Order A1 has shipped."}]}


def test_openai_log_form_is_read(tmp_path):
    p = tmp_path / "log.jsonl.gz"
    with gzip.open(p, "wt", encoding="utf-8") as f:
        f.write(json.dumps(OPENAI) + "\n")
    [c] = load_conversations(p)
    assert (c.id, c.model) == ("log-7", "some-model")
    assert [m["role"] for m in c.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert c.messages[0]["content"] == "Be brief."
    assert c.messages[2]["content"] == ""
    # the argument text is kept exactly as written (two spaces and all)
    assert c.messages[2]["tool_calls"] == (ToolCall("find_order", "{\"order_id\": \"A1\",  \"full\": true}"),)
    assert c.messages[2]["tool_calls"][0].arguments == {"order_id": "A1", "full": True}
    assert c.messages[3]["name"] == "find_order"
    assert c.messages[4]["tool_calls"] == ()
    assert c.assistant_indices == [2, 4]


def test_parsed_arguments_alone_are_reserialised_compactly(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text(json.dumps({"messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": "", "tool_calls": [{"name": "f", "arguments": {"a": 1, "b": "é"}}]}]}) + "\n")
    [c] = read_jsonl(p)
    assert c.id == "c-1"
    assert c.messages[1]["tool_calls"][0].arguments_json == '{"a":1,"b":"é"}'


TINY = (
    {"role": "system", "content": "S"},
    {"role": "user", "content": "Find A1."},
    {"role": "assistant", "content": "", "tool_calls": (ToolCall("find", '{"id":"A1"}'),)},
    {"role": "tool", "name": "find", "content": '{"ok": 1}'},
    {"role": "assistant", "content": "Checking both.", "tool_calls": (ToolCall("a", "{}"), ToolCall("b", '{"x": 2}'))},
    {"role": "assistant", "content": "A1 is fine.", "tool_calls": ()},
)


def test_rendering_is_the_documented_form():
    assert render_messages(TINY) == [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "Find A1."},
        {"role": "assistant", "content": '<tool_call>\n{"name": "find", "arguments": {"id":"A1"}}\n</tool_call>'},
        {"role": "tool", "content": '<tool_response>\n{"ok": 1}\n</tool_response>'},
        {"role": "assistant", "content": 'Checking both.\n<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>\n'
                                         '<tool_call>\n{"name": "b", "arguments": {"x": 2}}\n</tool_call>'},
        {"role": "assistant", "content": "A1 is fine."},
    ]
    assert render_messages(TINY, tool_role="user")[3] == {
        "role": "user", "content": '<tool_response>\n{"ok": 1}\n</tool_response>'}


def _conv(messages=TINY):
    from oilbird.data.conversations import Conversation
    return Conversation(id="t", model=None, messages=tuple(messages), source="x.jsonl:1")


class ChatMLBytes:
    """A ChatML template over byte tokens: <|im_start|> is 1, <|im_end|> is 2 (also EOS)."""
    chat_template = "chatml"
    eos_token_id = 2
    refuse_tool = False
    strip_old_assistant = False

    def _tok(self, text):
        ids = []
        for k, piece in enumerate(text.split("<|im_end|>")):
            if k:
                ids.append(2)
            for j, sub in enumerate(piece.split("<|im_start|>")):
                if j:
                    ids.append(1)
                ids += [b + 3 for b in sub.encode()]
        return ids

    def apply_chat_template(self, messages, add_generation_prompt=False, tokenize=True):
        text = ""
        for j, m in enumerate(messages):
            if m["role"] == "tool" and self.refuse_tool:
                raise ValueError("roles must alternate user/assistant")
            content = m["content"]
            if self.strip_old_assistant and m["role"] == "assistant" and j < len(messages) - 1:
                content = content[:3]
            text += f"<|im_start|>{m['role']}\n{content}<|im_end|>\n"
        if add_generation_prompt:
            text += "<|im_start|>assistant\n"
        return {"input_ids": self._tok(text)} if tokenize else text

    def decode(self, ids):
        return "".join("<|im_start|>" if i == 1 else "<|im_end|>" if i == 2 else chr(i - 3) for i in ids)


def test_turns_on_a_chatml_tokenizer_end_at_im_end_and_extend_the_previous_turn():
    tok = ChatMLBytes()
    turns = encode_conversation(tok, _conv())
    assert [(t.id, t.message_index) for t in turns] == [("t#0", 2), ("t#1", 4), ("t#2", 5)]
    rendered = render_messages(TINY)
    for t in turns:
        assert t.prompt_ids == encode(tok, Request(id="x", messages=rendered[:t.message_index]))
        assert tok.decode(t.recording_ids) == rendered[t.message_index]["content"] + "<|im_end|>"
        assert t.recording_ids[-1] == 2 and t.length == len(t.prompt_ids) + len(t.recording_ids)
    assert tok.decode(turns[0].prompt_ids) == ("<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nFind A1.<|im_end|>\n"
                                               "<|im_start|>assistant\n")
    assert [t.extends_previous for t in turns] == [False, True, True]


def test_a_template_refusing_role_tool_gets_tool_results_as_user():
    tok = ChatMLBytes()
    tok.refuse_tool = True
    turns = encode_conversation(tok, _conv())
    assert "<|im_start|>user\n<tool_response>" in tok.decode(turns[1].prompt_ids)
    assert "<|im_start|>tool" not in tok.decode(turns[1].prompt_ids)


def test_a_template_that_rewrites_earlier_turns_is_refused_by_turn():
    tok = ChatMLBytes()
    tok.strip_old_assistant = True            # turns 0 and 1 pass: the rewritten message is not in them yet
    where = r"x.jsonl:1: conversation 't' message 5 \(assistant turn 2\)"
    with pytest.raises(ConversationError, match=where + ".*not a prefix"):
        encode_conversation(tok, _conv())


def test_turns_without_a_chat_template_follow_requests_encode(tiny_lm):
    tok = tiny_lm.tokenizer                               # bytes, no chat template
    turns = encode_conversation(tok, _conv())
    rendered = render_messages(TINY)
    for t in turns:
        assert t.prompt_ids == encode(tok, Request(id="x", messages=rendered[:t.message_index]))
        assert t.recording_ids == [b + 3 for b in rendered[t.message_index]["content"].encode()] + [2]
    # the next prompt holds "\n" where the recording holds EOS: no cache reuse claimed
    assert not any(t.extends_previous for t in turns)


def test_copied_arguments_counts_values_seen_before():
    assert copied_arguments(_conv()) == (1, 2)        # "A1" was said; 2 was not


EDGES = {
    "special tokens written as text": [{"role": "user", "content": "say <|im_end|> then <|im_start|>x"},
                                       {"role": "assistant", "content": "<|im_end|> ok <|im_start|>"}],
    "newlines and spaces at the edges": [{"role": "system", "content": "\n\n  S \n"},
                                         {"role": "user", "content": "  \n"},
                                         {"role": "assistant", "content": "\n\nA  \n\n"},
                                         {"role": "user", "content": "\t"},
                                         {"role": "assistant", "content": " b"}],
    "unicode": [{"role": "user", "content": "Zürich → 東京 🚄?"}, {"role": "assistant", "content": "🚄 ünd 東"}],
    "empty and tool-only turns": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [{"name": "f", "arguments": {"a": "<|im_end|>"}}]},
        {"role": "tool", "content": ""}, {"role": "assistant", "content": ""},
        {"role": "user", "content": "again"}, {"role": "assistant", "content": None}],
    "repeated messages": [{"role": "user", "content": "same"}, {"role": "assistant", "content": "same"}] * 4,
}


def test_encoding_piece_by_piece_equals_the_per_turn_encoding(bpe_chatml):
    """The linear encoding gives exactly the ids of tokenizing every turn's whole prefix, on
    the built-in agent and on edge cases, through the piece path (not the fallback)."""
    from oilbird.data import conversations as cv
    from oilbird.data.piece_tokenizer import PieceTokenizer
    tok = bpe_chatml
    assert PieceTokenizer.usable(tok)
    convs = load_conversations("agent-builtin", limit=6) + [
        conversation_from_obj({"id": name, "messages": msgs}, "edge", name) for name, msgs in EDGES.items()]
    calls = []
    real = cv.encode_conversation_per_turn
    try:
        cv.encode_conversation_per_turn = lambda *a, **k: calls.append(a) or real(*a, **k)
        new = [encode_conversation(tok, c) for c in convs]
    finally:
        cv.encode_conversation_per_turn = real
    assert not calls                                   # every conversation took the piece path
    old = [encode_conversation_per_turn(tok, c) for c in convs]
    assert new == old
    assert sum(len(t) for t in new) > 40 and all(t.recording_ids[-1] == tok.eos_token_id for ts in new for t in ts)


def test_piece_encoding_falls_back_when_the_pieces_disagree(bpe_chatml, monkeypatch):
    """If tokenizing by pieces would give other ids than the tokenizer itself, the per-turn
    encoding is used: the result is never the pieces' guess."""
    from oilbird.data.piece_tokenizer import PieceTokenizer
    conv = load_conversations("agent-builtin", limit=1)[0]
    want = encode_conversation_per_turn(bpe_chatml, conv)
    monkeypatch.setattr(PieceTokenizer, "__call__", lambda self, text: [7] * len(text))
    assert encode_conversation(bpe_chatml, conv) == want


def test_piece_encoding_names_a_rewriting_template_as_before(bpe_chatml):
    tok = bpe_chatml.__class__(tokenizer_object=bpe_chatml.backend_tokenizer, eos_token="<|im_end|>",
                               chat_template=CHATML.replace("message['content']",
                                                           "(message['content'][:3] if not loop.last "
                                                           "and message['role'] == 'assistant' else message['content'])"))
    with pytest.raises(ConversationError, match=r"message 5 \(assistant turn 2\).*not a prefix"):
        encode_conversation(tok, _conv())


@pytest.mark.model
def test_real_tokenizer_on_the_builtin_agent(real_lm):
    tok = real_lm.tokenizer
    convs = load_conversations("agent-builtin")
    assert len(convs) == 24
    for c in convs:
        turns = encode_conversation(tok, c)
        assert turns == encode_conversation_per_turn(tok, c)
        rendered = render_messages(c.messages)
        assert len(turns) == len(c.assistant_indices) > 0
        for t in turns:
            full = list(tok.apply_chat_template(rendered[:t.message_index + 1], tokenize=True)["input_ids"])
            assert full[:t.length] == t.prompt_ids + t.recording_ids          # the prefix property
            assert full[t.length:] == tok("\n", add_special_tokens=False)["input_ids"]
            assert t.recording_ids[-1] == 2 and 2 not in t.recording_ids[:-1]
            assert tok.decode(t.recording_ids) == rendered[t.message_index]["content"] + "<|im_end|>"
        assert not turns[0].extends_previous and all(t.extends_previous for t in turns[1:])


@pytest.mark.model
def test_all_recorded_airline_conversations_load_and_encode(real_lm):
    path = data_root() / "agent-transcripts" / "tau-airline.jsonl"
    if not path.is_file():
        pytest.skip("agent transcripts not found in the shared data (never committed here)")
    convs = load_conversations("agent-transcripts")
    turns = [encode_conversation(real_lm.tokenizer, c) for c in convs]
    flat = [t for ts in turns for t in ts]
    calls = sum(len(m["tool_calls"]) for c in convs for m in c.messages if m["role"] == "assistant")
    assert (len(convs), len(flat), calls) == (100, 1381, 621)      # the counts its README gives
    assert all(t.recording_ids[-1] == 2 for t in flat)
    assert all(t.extends_previous for t in flat if t.index > 0)
    over = sum(ts[-1].length > 8192 for ts in turns)
    copied, total = map(sum, zip(*(copied_arguments(c) for c in convs)))
    print(f"\ntau-airline: {len(convs)} conversations, {len(flat)} assistant turns, {calls} tool calls; prompt "
          f"tokens mean {statistics.mean(len(t.prompt_ids) for t in flat):.0f}, max "
          f"{max(len(t.prompt_ids) for t in flat)}; recording mean "
          f"{statistics.mean(len(t.recording_ids) for t in flat):.1f}; {over} conversations over 8192 tokens; "
          f"{copied}/{total} argument values copied")
    assert 0 < over < len(convs)


def test_broken_argument_json_is_replayed_as_the_agent_wrote_it(tmp_path):
    """A recorded agent that wrote arguments which do not parse (or parse to no object) is
    still real traffic: the text is kept verbatim; ``arguments`` is None."""
    p = tmp_path / "c.jsonl"
    p.write_text(json.dumps({"messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "k", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1"}},
            {"name": "g", "arguments": "[1, 2]"}]}]}) + "\n")
    [c] = read_jsonl(p)
    calls = c.messages[1]["tool_calls"]
    assert calls == (ToolCall("f", '{"a": 1'), ToolCall("g", "[1, 2]"))
    assert [call.arguments for call in calls] == [None, None]
    assert '{"name": "f", "arguments": {"a": 1}' in render_messages(c.messages)[1]["content"]
    assert copied_arguments(c) == (0, 0)           # nothing parsed, nothing counted


def test_openai_older_spellings_are_read_as_the_current_ones():
    """``developer`` is a system message; a legacy ``function_call`` is one tool call, and the
    ``function`` message answering it is its tool result."""
    c = conversation_from_obj({"messages": [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": None,
         "function_call": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}},
        {"role": "function", "name": "get_weather", "content": "{\"temp\": 3}"},
        {"role": "assistant", "content": "3 degrees."}]}, "test", "c")
    assert [m["role"] for m in c.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert c.messages[2]["tool_calls"] == (ToolCall("get_weather", '{"city": "Oslo"}'),)
    assert c.messages[3]["name"] == "get_weather"
    with pytest.raises(ConversationError, match="both 'tool_calls' and 'function_call'"):
        conversation_from_obj({"messages": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"},
             "tool_calls": [{"name": "f", "arguments": {}}]}]}, "test", "c")


# the OpenAI log above as Anthropic's Messages API spells it (thinking, text and a call in one
# message; a tool result and the user's next words in one; the system prompt beside the messages)
ANTHROPIC = {"id": "log-7", "model": "some-model", "system": [{"type": "text", "text": "Be "},
                                                              {"type": "text", "text": "brief."}],
             "messages": [
    {"role": "user", "content": "Where is order A1?"},
    {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "Look it up first.", "signature": "sig"},
        {"type": "tool_use", "id": "toolu_1", "name": "find_order", "input": {"order_id": "A1", "full": True}}]},
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "{\"status\": \"shipped\"}"}]},
        {"type": "text", "text": "And B2?"}]},
    {"role": "assistant", "content": [{"type": "text", "text": "Order A1 has shipped."}]}]}


def test_anthropic_messages_form_is_read_as_the_openai_form():
    """Anthropic's spelling normalises to the same messages as the OpenAI log's, message for
    message (its parsed ``input`` re-serialised compactly, the thinking block left out), with
    the user's words after a tool result a user message of their own."""
    c = conversation_from_obj(ANTHROPIC, "test", "c")
    openai = json.loads(json.dumps(OPENAI))
    openai["messages"][2]["tool_calls"][0]["function"]["arguments"] = '{"order_id":"A1","full":true}'
    openai["messages"].insert(4, {"role": "user", "content": "And B2?"})
    assert c.messages == conversation_from_obj(openai, "test", "c").messages
    assert [m["role"] for m in c.messages] == ["system", "user", "assistant", "tool", "user", "assistant"]
    assert c.messages[0]["content"] == "Be brief." and c.messages[3]["name"] == "find_order"
    assert c.assistant_indices == [2, 5]
    # with tool definitions in Anthropic's own shape, they join the top-level system prompt
    tools = [{"name": "find_order", "description": "Find an order.", "input_schema": {"type": "object"}}]
    withtools = conversation_from_obj(ANTHROPIC | {"tools": tools}, "test", "c")
    assert withtools.messages[0]["content"].startswith("Be brief.\n\n# Tools")
    assert '"input_schema":{"type":"object"}' in withtools.messages[0]["content"]
    # an empty system prompt adds nothing; a plain-string one is the system message
    assert conversation_from_obj(ANTHROPIC | {"system": ""}, "t", "c").messages[0]["role"] == "user"
    assert conversation_from_obj(ANTHROPIC | {"system": "Hi."}, "t", "c").messages[0]["content"] == "Hi."


# a bad message in Anthropic's spelling, and what its refusal must say
BAD_ANTHROPIC = [
    (lambda m: m[2]["content"].append({"type": "tool_use", "id": "t9", "name": "f", "input": {}}),
     ["message 2", "a user message carries a 'tool_use' block"]),
    (lambda m: m[1]["content"].append({"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}),
     ["message 1", "an assistant message carries a 'tool_result' block"]),
    (lambda m: m[2]["content"][0].update(tool_use_id="toolu_9"),
     ["message 2", "tool_call_id 'toolu_9', which no earlier assistant turn made"]),
    (lambda m: m[2]["content"][0].update(content=[{"type": "image", "source": {}}]),
     ["message 2", "content part 0 is not text (type 'image')"]),
    (lambda m: m[1].update(tool_calls=[{"name": "f", "arguments": {}}]),
     ["message 1", "both as 'tool_use' blocks and as 'tool_calls'"]),
    (lambda m: m[1]["content"].__setitem__(1, {"type": "tool_use", "id": "toolu_1", "input": {}}),
     ["message 1", "tool call 0 has no function name"]),
    (lambda m: m.insert(0, {"role": "system", "content": [{"type": "tool_result", "tool_use_id": "x"}]}),
     ["message 0", "a system message carries tool_result blocks"]),
]


def test_anthropic_blocks_are_refused_by_their_own_index_and_thinking_alone_is_no_turn():
    d = json.loads(json.dumps(ANTHROPIC))
    d["messages"][1]["content"].append({"type": "image", "source": {}})      # block 2 of [thinking, tool_use, image]
    with pytest.raises(ConversationError, match="message 1: content part 2 is not text \\(type 'image'\\)"):
        conversation_from_obj(d, "f.jsonl:3", "c")
    d = json.loads(json.dumps(ANTHROPIC))
    d["messages"].insert(3, {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"}]})
    assert conversation_from_obj(d, "t", "c").messages == conversation_from_obj(ANTHROPIC, "t", "c").messages


def _as_anthropic(d: dict) -> dict:
    """A conversation of the agent-transcripts spelling respelt as Anthropic's Messages API logs it."""
    msgs, system, last_id = [], None, {}
    for m in d["messages"]:
        if m["role"] == "system" and system is None and not msgs:
            system = m["content"]
        elif m["role"] == "assistant":
            blocks = [{"type": "text", "text": m["content"]}] if m.get("content") else []
            for tc in m.get("tool_calls") or []:
                last_id[tc["name"]] = f"toolu_{len(last_id)}_{tc['name']}"
                blocks.append({"type": "tool_use", "id": last_id[tc["name"]], "name": tc["name"], "input": tc["arguments"]})
            msgs.append({"role": "assistant", "content": blocks})
        elif m["role"] == "tool":
            msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": last_id[m["name"]],
                                                     "content": m["content"]}]})
        else:
            msgs.append(m)
    return {"id": d["id"], "model": d.get("model"), "system": system, "messages": msgs}


def test_the_recorded_airline_set_respelt_as_anthropic_reads_the_same():
    """All 100 recorded conversations, respelt in Anthropic's form, normalise to the same messages
    (arguments compared parsed: a parsed ``input`` cannot carry the recording's spacing)."""
    path = data_root() / "agent-transcripts" / "tau-airline.jsonl"
    if not path.is_file():
        pytest.skip("agent transcripts not found in the shared data (never committed here)")

    def norm(c):
        return [(m["role"], m["content"], m.get("name"), tuple((t.name, t.arguments) for t in m.get("tool_calls", ())))
                for m in c.messages]
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert len(lines) == 100
    for d in lines:
        assert norm(conversation_from_obj(_as_anthropic(d), "a", "c")) == norm(conversation_from_obj(d, "o", "c"))


def test_a_bad_top_level_system_prompt_is_refused_by_name():
    with pytest.raises(ConversationError, match=r"'log-7': 'system' must be a string, null or a list of text parts, not int"):
        conversation_from_obj(ANTHROPIC | {"system": 3}, "f.jsonl:3", "c")


# the OpenAI log above as the Responses API's items (a call and its output stand without a role;
# reasoning is left out; text parts typed input_text / output_text)
RESPONSES = {"id": "log-7", "model": "some-model", "messages": [
    {"role": "system", "content": "Be brief."},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Where is order A1?"}]},
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {"type": "function_call", "call_id": "call_1", "name": "find_order",
     "arguments": "{\"order_id\": \"A1\",  \"full\": true}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "{\"status\": \"shipped\"}"},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Order A1 has shipped."}]}]}


def test_responses_api_items_are_read_as_the_openai_form():
    c = conversation_from_obj(RESPONSES, "test", "c")
    assert c.messages == conversation_from_obj(OPENAI, "test", "c").messages
    # calls right after an assistant message (or after each other) are that turn's calls
    d = json.loads(json.dumps(RESPONSES))
    d["messages"][2] = {"role": "assistant", "content": "Checking."}
    d["messages"].insert(4, {"type": "function_call", "call_id": "call_2", "name": "find_user", "arguments": "{}"})
    c2 = conversation_from_obj(d, "test", "c")
    assert [m["role"] for m in c2.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert c2.messages[2]["content"] == "Checking."
    assert c2.messages[2]["tool_calls"] == (ToolCall("find_order", "{\"order_id\": \"A1\",  \"full\": true}"),
                                            ToolCall("find_user", "{}"))
    # reasoning between the message and its call does not split the turn
    d["messages"].insert(3, {"type": "reasoning", "id": "rs_2", "summary": []})
    assert conversation_from_obj(d, "test", "c").messages == c2.messages
    # the Responses API's top-level instructions are the system prompt, as Anthropic's system
    d = json.loads(json.dumps(RESPONSES))
    d["messages"].pop(0)
    assert conversation_from_obj(d | {"instructions": "Be brief."}, "test", "c").messages == c.messages


def test_a_tool_result_logged_parsed_is_its_compact_json_text():
    """A logger that stored a tool's JSON result parsed (an object or a list of data) gets the
    text back, compact, as parsed arguments are; text parts stay text, an image is refused."""
    talk = [{"role": "user", "content": "x"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "f", "arguments": {}}]},
            {"role": "tool", "tool_call_id": "c1", "content": {"ok": 1, "city": "Tromsø"}},
            {"role": "tool", "tool_call_id": "c1", "content": [{"a": 1}, 2]},
            {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "plain"}]},
            {"role": "assistant", "content": "done"}]
    c = conversation_from_obj({"messages": talk}, "test", "c")
    assert [m["content"] for m in c.messages[2:5]] == ['{"ok":1,"city":"Tromsø"}', '[{"a":1},2]', "plain"]
    # data that merely looks like parts (records with a "type" of their own, strings), an empty
    # list and scalars are data too
    for data, text in (([{"type": "flight", "no": 1}], '[{"type":"flight","no":1}]'), (["SFO", "LAX"], '["SFO","LAX"]'),
                       ([], "[]"), (3, "3"), (True, "true")):
        talk[3]["content"] = data
        assert conversation_from_obj({"messages": talk}, "test", "c").messages[3]["content"] == text
    talk[2]["content"] = [{"type": "image_url", "image_url": {}}]
    with pytest.raises(ConversationError, match="message 2: content part 0 is not text"):
        conversation_from_obj({"messages": talk}, "test", "c")


# the same for the Responses API's items
BAD_RESPONSES = [
    (lambda m: m[4].update(call_id="call_9"), ["message 4", "tool_call_id 'call_9', which no earlier assistant turn"]),
    (lambda m: m[3].pop("name"), ["message 3", "tool call 0 has no function name"]),
    (lambda m: m.insert(1, {"type": "web_search_call", "id": "ws_1"}),
     ["message 1", "an item of type 'web_search_call' without a role"]),
    (lambda m: m.__setitem__(3, {"type": "function_call_output", "call_id": "call_1", "output": "x"}),
     ["message 3", "tool_call_id 'call_1', which no earlier assistant turn made"]),
]


@pytest.mark.parametrize("base, change, words", [(ANTHROPIC, *c) for c in BAD_ANTHROPIC] +
                         [(RESPONSES, *c) for c in BAD_RESPONSES])
def test_a_bad_message_in_another_spelling_is_refused_by_its_own_index(base, change, words):
    d = json.loads(json.dumps(base))
    change(d["messages"])
    with pytest.raises(ConversationError) as exc:
        conversation_from_obj(d, "f.jsonl:3", "c")
    for w in ["f.jsonl:3", "'log-7'"] + words:
        assert w in str(exc.value)


def test_tool_definitions_go_into_the_system_prompt():
    """A conversation's top-level ``tools`` are text the agent's prompt held (the serving
    template put them there): appended to the first system message, or a system message of
    their own, so the drafters can copy names and fields from them as the agent did."""
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"city": "string"}}}]
    talk = [{"role": "user", "content": "Weather in Oslo?"}, {"role": "assistant", "content": "Sunny."}]
    alone = conversation_from_obj({"tools": tools, "messages": talk}, "test", "c")
    assert [m["role"] for m in alone.messages] == ["system", "user", "assistant"]
    block = alone.messages[0]["content"]
    assert block.startswith("# Tools") and '{"name":"get_weather","parameters":{"city":"string"}}' in block
    withsys = conversation_from_obj({"tools": tools, "messages": [{"role": "system", "content": "Be brief."}] + talk},
                                    "test", "c")
    assert withsys.messages[0]["content"] == "Be brief.\n\n" + block
    assert len(withsys.messages) == 3 and withsys.assistant_indices == [2]
    assert conversation_from_obj({"tools": [], "messages": talk}, "test", "c").messages == tuple(
        conversation_from_obj({"messages": talk}, "test", "c").messages)


def test_a_folder_of_conversation_files_is_read_file_by_file(tmp_path):
    """``--data FOLDER`` with conversation JSONL files reads them all in name order (an API-Bank
    dialogue folder, whose lines are utterances, still goes to the dialogue reader)."""
    d = tmp_path / "logs"
    d.mkdir()
    (d / "b.jsonl").write_text(GOOD.replace('"c0"', '"c2"') + "\n")
    with gzip.open(d / "a.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write(GOOD + "\n" + GOOD.replace('"c0"', '"c1"') + "\n")
    (d / "notes.txt").write_text("not read")
    assert [c.id for c in load_conversations(d)] == ["c0", "c1", "c2"]
    assert [c.id for c in load_conversations(d, limit=2)] == ["c0", "c1"]
    (d / "c.jsonl").write_text(GOOD + "\n")
    with pytest.raises(ConversationError, match=r"c\.jsonl.*'c0'.*already used in .*a\.jsonl\.gz"):
        load_conversations(d)
    rotated = tmp_path / "rotated"              # ids left to the loader, a log rotated by date
    rotated.mkdir()
    (rotated / "a-empty.jsonl").write_text("\n")   # an empty first file does not make it API-Bank's
    no_id = json.dumps({"messages": json.loads(GOOD)["messages"]})
    (rotated / "log.2024-01-01.jsonl").write_text(no_id + "\n")
    (rotated / "log.2024-01-02.jsonl.gz").write_bytes(gzip.compress((no_id + "\n").encode()))
    assert [c.id for c in load_conversations(rotated)] == ["log.2024-01-01-1", "log.2024-01-02-1"]
    dialogues = tmp_path / "dialogues"
    dialogues.mkdir()
    (dialogues / "x.jsonl").write_text(json.dumps({"role": "User", "text": "hi"}) + "\n")
    with pytest.raises(DataError) as exc:          # read as API-Bank dialogues, refused by that reader
        load_conversations(dialogues)
    assert "messages" not in str(exc.value)


def test_every_bad_line_is_counted_and_the_first_is_told(tmp_path):
    """A long log with several bad lines: one message tells the first and lists the others'
    line numbers, so they can be mended in one go."""
    p = tmp_path / "log.jsonl"
    p.write_text("\n".join([GOOD, BAD["unknown role"][0], GOOD.replace('"c0"', '"c3"'), "{not json",
                            BAD["no assistant turn"][0]]) + "\n")
    with pytest.raises(ConversationError) as exc:
        load_conversations(p)
    msg = str(exc.value)
    assert msg.startswith(f"{p}:2: ") and "unknown role 'robot'" in msg
    assert msg.endswith("(and 2 more bad lines: 4, 5)")
    assert "\n" not in msg
    assert exc.value.reason.endswith("(and 2 more bad lines: 4, 5)")   # the parts still rebuild it


def test_skipping_bad_lines_keeps_the_good_ones_and_lists_the_bad(tmp_path):
    """With a ``skipped`` list the bad lines (and a repeated id across a folder's files) are
    listed and left out; a file, or a folder, with nothing good still stops the load."""
    p = tmp_path / "log.jsonl"
    p.write_text("\n".join([GOOD, BAD["unknown role"][0], GOOD.replace('"c0"', '"c3"'), "{not json"]) + "\n")
    skipped: list[dict] = []
    convs = load_conversations(p, skipped=skipped)
    assert [c.id for c in convs] == ["c0", "c3"]
    assert [(b["file"], b["line"]) for b in skipped] == [(str(p), 2), (str(p), 4)]
    assert "unknown role 'robot'" in skipped[0]["error"] and "not valid JSON" in skipped[1]["error"]
    only_bad = tmp_path / "bad.jsonl"
    only_bad.write_text("{not json\n")
    with pytest.raises(ConversationError):
        load_conversations(only_bad, skipped=[])
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "a.jsonl").write_text(GOOD + "\n")
    (folder / "b.jsonl").write_text("{not json\n" + GOOD + "\n")       # c0 again: a repeated id
    (folder / "c.jsonl").write_text("{not json\n")                       # nothing good in this file
    skipped = []
    assert [c.id for c in load_conversations(folder, skipped=skipped)] == ["c0"]
    assert [(Path(b["file"]).name, b["line"]) for b in skipped] == [("b.jsonl", 1), ("b.jsonl", 2), ("c.jsonl", 1)]
    assert "id already used" in skipped[1]["error"]
    with pytest.raises(ConversationError, match="no conversation in 1 file loads"):
        load_conversations(_only(tmp_path, "{not json\n"), skipped=[])


def test_a_truncated_gz_recording_keeps_its_lines_before_the_break(tmp_path):
    """A ``.jsonl.gz`` copied while it was written ends mid-stream: refused at the line where it
    breaks (the lines before it would load: ``skippable``); with a ``skipped`` list every whole
    line before the break loads and the break is one listed entry. A file cut inside its first
    line has nothing to keep and is refused either way."""
    lines = [GOOD.replace('"c0"', f'"c{i}"').replace("hello", f"hello {i} " * 30) for i in range(400)]
    whole = gzip.compress(("\n".join(lines) + "\n").encode())
    p = tmp_path / "log.jsonl.gz"
    p.write_bytes(whole[:len(whole) // 2])
    with pytest.raises(ConversationError, match="damaged or truncated gzip file") as exc:
        load_conversations(p)
    assert exc.value.skippable and exc.value.path == str(p)
    skipped: list[dict] = []
    convs = load_conversations(p, skipped=skipped)
    assert 0 < len(convs) < 400 and [c.id for c in convs] == [f"c{i}" for i in range(len(convs))]
    assert [(b["file"], b["line"]) for b in skipped] == [(str(p), len(convs) + 1)]
    assert f"it breaks after line {len(convs)}; what followed is lost" in skipped[0]["error"]
    assert exc.value.line == len(convs) + 1
    p.write_bytes(whole[:30])
    for kept in (None, []):
        with pytest.raises(ConversationError, match="truncated gzip") as exc:
            load_conversations(p, skipped=kept)
        assert not exc.value.skippable


def _only(tmp_path, text):
    d = tmp_path / "only-bad"
    d.mkdir()
    (d / "x.jsonl").write_text(text)
    return d


def test_a_line_that_is_not_utf8_is_one_bad_line_not_a_bad_file(tmp_path):
    """A log line with Latin-1 bytes is refused by its line number, and --skip-bad's list
    leaves it out while the file's other lines load."""
    p = tmp_path / "log.jsonl"
    p.write_bytes(GOOD.encode() + b"\n" + '{"id": "caf\u00e9"'.encode("latin-1") + b"}\n"
                  + GOOD.replace('"c0"', '"c3"').encode() + b"\n")
    with pytest.raises(ConversationError, match="not UTF-8 text") as exc:
        load_conversations(p)
    assert exc.value.line == 2 and exc.value.skippable
    skipped: list[dict] = []
    assert [c.id for c in load_conversations(p, skipped=skipped)] == ["c0", "c3"]
    assert len(skipped) == 1 and skipped[0]["line"] == 2 and "not UTF-8" in skipped[0]["error"]


def test_a_file_of_only_bad_lines_says_so_with_or_without_skipping(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text("{not json\n" + BAD["unknown role"][0] + "\n")
    with pytest.raises(ConversationError) as exc:
        load_conversations(p)
    assert not exc.value.skippable                  # nothing else would load: no --skip-bad hint
    with pytest.raises(ConversationError, match="no conversation in the file loads: 2 bad lines"):
        load_conversations(p, skipped=[])


def test_a_folder_refuses_its_bad_lines_after_reading_every_file(tmp_path):
    """Without skipping, a folder's refusal counts the bad lines of all its files and says
    whether the others would load (the --skip-bad hint); a folder of only bad lines would not."""
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "a.jsonl").write_text("{not json\n")
    (folder / "b.jsonl").write_text(GOOD + "\n{not json\n")
    with pytest.raises(ConversationError, match=r"and 1 more bad line in the folder") as exc:
        load_conversations(folder)
    assert exc.value.skippable
    (folder / "b.jsonl").write_text("{not json\n")
    with pytest.raises(ConversationError, match="no conversation in 2 files loads") as exc:
        load_conversations(folder)
    assert not exc.value.skippable


def test_a_log_with_a_line_per_call_is_folded_into_its_conversations(tmp_path):
    """One line per API call, each holding the history so far: every line but the last of a
    conversation is the start of the next one, and would replay its turns again (drafted from
    their own first replay). They are left out, and said; two conversations that only begin
    alike are both kept, and so are two equal ones (one request served twice)."""
    from oilbird.data.overlaps import fold_overlaps
    talk = [{"role": "system", "content": "S"}, {"role": "user", "content": "Find A1."},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "find", "arguments": "{}"}]},
            {"role": "tool", "tool_call_id": "c1", "content": "{\"ok\": 1}"},
            {"role": "assistant", "content": "A1 is fine."}, {"role": "user", "content": "Thanks."},
            {"role": "assistant", "content": "Bye."}]
    other = talk[:2] + [{"role": "assistant", "content": "Which A1?"}]      # begins alike, then differs
    lines = [{"id": "call-1", "messages": talk[:3]}, {"id": "call-2", "messages": talk[:5]},
             {"id": "other", "messages": other}, {"id": "call-3", "messages": talk},
             {"id": "again", "messages": other}]
    p = tmp_path / "gateway.jsonl"
    p.write_text("".join(json.dumps(d) + "\n" for d in lines))
    folded: list[dict] = []
    convs = load_conversations(p, folded=folded)
    # a kept conversation stands where its first call stood: sessions in the order they began
    assert [c.id for c in convs] == ["call-3", "other", "again"]
    assert [(f["id"], f["into"]) for f in folded] == [("call-1", "call-3"), ("call-2", "call-3")]
    assert folded[0]["source"].endswith("gateway.jsonl:1")
    folded = []
    assert [c.id for c in load_conversations(p, limit=1, folded=folded)] == ["call-3"]   # folded, then the limit
    assert len(folded) == 2
    # a fold into a conversation the limit leaves out is not reported as replayed by it
    p.write_text("".join(json.dumps(d) + "\n" for d in [lines[2], lines[0], lines[3]]))
    folded = []
    assert [c.id for c in load_conversations(p, limit=1, folded=folded)] == ["other"] and folded == []
    # nothing held by another: all kept, in order
    kept, gone = fold_overlaps(convs)
    assert kept == convs and gone == []


def test_an_assistant_turn_that_showed_nothing_is_no_turn():
    """An assistant message with no text and no call ("", null, blank, an empty block list) is no
    turn to replay (it would be a one-token request pulling tau toward 1); a conversation of only
    such turns has nothing to replay."""
    for empty in ("", None, "   \n", []):
        c = conversation_from_obj({"id": "c", "messages": [
            {"role": "user", "content": "Hi"}, {"role": "assistant", "content": empty},
            {"role": "user", "content": "Hello?"}, {"role": "assistant", "content": "Yes."}]}, "f.jsonl:1", "c")
        assert [m["content"] for m in c.messages if m["role"] == "assistant"] == ["Yes."], empty
    with pytest.raises(ConversationError, match="no assistant turn with text or a tool call"):
        conversation_from_obj({"id": "c", "messages": [{"role": "user", "content": "Hi"},
                                                       {"role": "assistant", "content": ""}]}, "f.jsonl:1", "c")


def test_a_turn_whose_tokens_change_once_it_follows_says_why_and_skip_bad_leaves_its_conversation_out(monkeypatch, capsys):
    """A turn whose text starts with whitespace the tokenizer joins with the template's: the error
    names that cause; replay --skip-bad leaves its conversation out (listed) and replays the others,
    without it the run stops in one line saying --skip-bad would go on."""
    import oilbird.data.conversations as C
    from oilbird.__main__ import _encoded
    conv = conversation_from_obj({"id": "w3", "messages": [{"role": "user", "content": "Hi"},
                                                            {"role": "assistant", "content": "\n\nHello"}]},
                                 "f.jsonl:2", "w3")
    with pytest.raises(ConversationError, match="starts with whitespace, which the tokenizer joins with the template"):
        C._turn(conv, 0, 1, [1, 2, 3], [1, 2, 9, 4], {4}, True, [], None)
    good = conversation_from_obj({"id": "g1", "model": "gpt-4o", "messages": [
        {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]}, "f.jsonl:1", "g1")

    def encode(tokenizer, c, **_):
        if c.id == "w3":
            raise ConversationError("f.jsonl:2: conversation 'w3': the turn's text starts with whitespace")
        return ["turns of " + c.id]
    monkeypatch.setattr(C, "encode_conversation", encode)

    class LM:
        tokenizer, eos_token_ids = None, {0}
    bad: list[dict] = []
    turns, kept = _encoded([good, conv], LM(), "text", bad)
    assert turns == [["turns of g1"]] and [c.id for c in kept] == ["g1"]
    assert bad == [{"file": "f.jsonl", "line": None, "error": "f.jsonl:2: conversation 'w3': the turn's text starts "
                                                            "with whitespace"}]
    assert "--skip-bad: left out w3" in capsys.readouterr().err
    with pytest.raises(ConversationError, match=r"starts with whitespace \(--skip-bad replays the other conversations\)"):
        _encoded([good, conv], LM(), "text", None)


def test_a_line_per_call_log_under_one_session_id_folds_too(tmp_path):
    """A gateway that logs a line per call with the session's id on every line: the lines of one
    id whose messages each start the next are one session (folded, replayed once), not repeated
    ids; a line repeated whole, or another conversation under the same id, is still refused."""
    talk = [{"role": "user", "content": "Find A1."}, {"role": "assistant", "content": "Looking."},
            {"role": "user", "content": "And?"}, {"role": "assistant", "content": "A1 is fine."},
            {"role": "user", "content": "Thanks."}, {"role": "assistant", "content": "Bye."}]
    p = tmp_path / "gw.jsonl"
    p.write_text("".join(json.dumps({"id": "sess1", "messages": talk[:n]}) + "\n" for n in (2, 4, 6)))
    folded: list[dict] = []
    convs = load_conversations(p, folded=folded)
    assert [(c.id, len(c.messages)) for c in convs] == [("sess1", 6)]
    assert [(f["id"], f["into"]) for f in folded] == [("sess1", "sess1"), ("sess1", "sess1")]
    for second in (talk[:4], [talk[0], {"role": "assistant", "content": "Which A1?"}]):   # repeated; another talk
        p.write_text("".join(json.dumps({"id": "sess1", "messages": m}) + "\n" for m in (talk[:4], second)))
        with pytest.raises(ConversationError, match=":2: .*id already used on line 1"):
            load_conversations(p)
    folder = tmp_path / "days"                            # a session that runs past midnight: two files
    folder.mkdir()
    (folder / "a.jsonl").write_text(json.dumps({"id": "sess1", "messages": talk[:2]}) + "\n")
    (folder / "b.jsonl").write_text(json.dumps({"id": "sess1", "messages": talk}) + "\n")
    assert [(c.id, len(c.messages)) for c in load_conversations(folder)] == [("sess1", 6)]


def test_content_may_be_left_out_beside_calls_only():
    """OpenAI's spelling leaves out an assistant message's 'content' where it makes calls; a
    message without calls must say it had no text ("" or null), or it is a formatting error."""
    calls = {"id": "c", "messages": [{"role": "user", "content": "hi"},
                                     {"role": "assistant", "tool_calls": [{"name": "f", "arguments": {}}]},
                                     {"role": "assistant", "function_call": {"name": "g", "arguments": "{}"}}]}
    conv = conversation_from_obj(calls, "test", "c")
    assert [len(m.get("tool_calls", ())) for m in conv.messages if m["role"] == "assistant"] == [1, 1]
    for empty in ("", None):
        quiet = {"id": "c", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"},
                                         {"role": "assistant", "content": empty}]}
        assert len(conversation_from_obj(quiet, "test", "c").messages) == 2      # no text: no turn, as documented
