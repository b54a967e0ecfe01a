"""``replay --tool-calls template``: a recorded conversation in the model's own spelling of tool
calls and tool definitions, on a real fast tokenizer whose template spells them its own way."""
from __future__ import annotations

import pytest

from oilbird.data.conversations import (ConversationError, conversation_from_obj, encode_conversation,
                                        encode_conversation_per_turn)

# Not Hermes: calls as [CALL id]name(arguments)[/CALL], tool definitions as one system line, tool
# results naming the call they answer. A template of this project's tests, not any model's.
CALLS = ("{% for c in message.tool_calls or [] %}[CALL {{ c.id }}]{{ c.function.name }}("
         "{% if c.function.arguments is mapping %}{{ c.function.arguments | tojson }}"
         "{% else %}{{ c.function.arguments }}{% endif %})[/CALL]{% endfor %}")
OWN = ("{% if tools %}<|im_start|>system\nTOOLS:{% for t in tools %} {{ t.function.name }}{% endfor %}<|im_end|>\n"
       "{% endif %}{% for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content or '' }}" + CALLS +
       "{% if message.role == 'tool' %} (answers {{ message.tool_call_id }}){% endif %}<|im_end|>\n{% endfor %}"
       "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
CALLS_ONLY = ("{% for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content or '' }}" + CALLS +
              "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
TOOLS = [{"type": "function", "function": {"name": "find_booking", "description": "a booking by id",
                                           "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}}]


def _tok(bpe_chatml, template):
    return bpe_chatml.__class__(tokenizer_object=bpe_chatml.backend_tokenizer, eos_token="<|im_end|>",
                                chat_template=template)


def _conv(system=True):
    msgs = ([{"role": "system", "content": "S"}] if system else []) + [
        {"role": "user", "content": "Find A1."},
        {"role": "assistant", "content": "Looking.", "tool_calls": [{"name": "find_booking", "arguments": {"id": "A1"}}]},
        {"role": "tool", "name": "find_booking", "content": '{"id": "A1", "seat": "3C"}'},
        {"role": "assistant", "content": "", "tool_calls": [{"name": "find_booking", "arguments_json": '{"id": "A1"'}]},
        {"role": "tool", "name": "find_booking", "content": "error: bad arguments"},
        {"role": "assistant", "content": "Seat 3C."}]
    return conversation_from_obj({"id": "t", "messages": msgs, "tools": TOOLS}, "x.jsonl:1", "t")


def test_the_template_spells_the_calls_the_definitions_and_the_answers(bpe_chatml):
    tok = _tok(bpe_chatml, OWN)
    conv = _conv()
    turns = encode_conversation(tok, conv, tool_calls="template")
    text = [(tok.decode(t.prompt_ids), tok.decode(t.recording_ids)) for t in turns]
    assert [t.message_index for t in turns] == conv.assistant_indices == [2, 4, 6]
    assert text[0][1] == 'Looking.[CALL call00001]find_booking({"id": "A1"})[/CALL]<|im_end|>'
    assert text[1][1] == '[CALL call00002]find_booking({"id": "A1")[/CALL]<|im_end|>'     # broken JSON, as written
    assert text[0][0].startswith("<|im_start|>system\nTOOLS: find_booking<|im_end|>\n<|im_start|>system\nS<|im_end|>")
    assert "<tools>" not in text[2][0] and "<tool_call>" not in text[2][0]   # the text form's spelling is gone
    assert "(answers call00001)" in text[1][0] and "(answers call00002)" in text[2][0]
    assert [t.extends_previous for t in turns] == [False, True, True]
    assert encode_conversation_per_turn(tok, conv, tool_calls="template") == turns
    hermes = encode_conversation(tok, conv)                  # the default stays the one text form
    assert "<tool_call>" in tok.decode(hermes[0].recording_ids) and "<tools>" in tok.decode(hermes[0].prompt_ids)


def test_a_system_message_that_held_only_the_tools_goes(bpe_chatml):
    tok = _tok(bpe_chatml, OWN)
    conv = _conv(system=False)
    assert conv.messages[0]["role"] == "system"              # the text form's own system message, tools only
    turns = encode_conversation(tok, conv, tool_calls="template")
    assert [t.message_index for t in turns] == [2, 4, 6]
    assert tok.decode(turns[0].prompt_ids) == ("<|im_start|>system\nTOOLS: find_booking<|im_end|>\n"
                                               "<|im_start|>user\nFind A1.<|im_end|>\n<|im_start|>assistant\n")


def test_a_template_that_spells_calls_but_not_definitions_keeps_the_tools_block(bpe_chatml):
    tok = _tok(bpe_chatml, CALLS_ONLY)
    turns = encode_conversation(tok, _conv(), tool_calls="template")
    prompt = tok.decode(turns[0].prompt_ids)
    assert prompt.startswith("<|im_start|>system\nS\n\n# Tools") and '"name":"find_booking"' in prompt
    assert "[CALL call00001]" in tok.decode(turns[0].recording_ids)


def test_a_template_that_writes_no_tool_calls_is_refused_by_name(bpe_chatml):
    # SmolLM2's template writes content only: every recorded call would vanish from the tokens
    with pytest.raises(ConversationError, match="does not write tool calls.*--tool-calls text"):
        encode_conversation(bpe_chatml, _conv(), tool_calls="template")
    bare = _tok(bpe_chatml, None)
    with pytest.raises(ConversationError, match="no chat template.*--tool-calls text"):
        encode_conversation(bare, _conv(), tool_calls="template")
    with pytest.raises(ValueError, match="tool_calls must be one of text, template"):
        encode_conversation(_tok(bpe_chatml, OWN), _conv(), tool_calls="hermes")


def test_parallel_calls_a_template_refuses_are_one_error_naming_the_turn(bpe_chatml):
    """Llama 3.1's template raises on a second call in one message: a ConversationError naming
    the turn and the way out, not the template engine's traceback."""
    one_call = OWN.replace("{% for c in message.tool_calls or [] %}",
                           "{% if (message.tool_calls or []) | length > 1 %}{{ raise_exception('only single tool-calls "
                           "at once') }}{% endif %}{% for c in message.tool_calls or [] %}")
    msgs = [{"role": "user", "content": "Weather in Paris and Rome?"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"name": "weather", "arguments": {"city": "Paris"}}, {"name": "weather", "arguments": {"city": "Rome"}}]},
            {"role": "tool", "content": "sun"}, {"role": "tool", "content": "rain"},
            {"role": "assistant", "content": "Sun and rain."}]
    conv = conversation_from_obj({"id": "p", "messages": msgs}, "x.jsonl:2", "p")
    with pytest.raises(ConversationError, match=r"x.jsonl:2: conversation 'p' message 1 \(assistant turn 0\).*"
                                                r"only single tool-calls at once.*--tool-calls text"):
        encode_conversation(_tok(bpe_chatml, one_call), conv, tool_calls="template")


def test_results_answer_the_calls_their_recorded_ids_name_whatever_the_order(bpe_chatml):
    tok = _tok(bpe_chatml, OWN)
    calls = [{"id": "call_pa", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Paris"}'}},
             {"id": "call_ro", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Rome"}'}}]
    msgs = [{"role": "user", "content": "Weather in Paris and Rome?"},
            {"role": "assistant", "content": None, "tool_calls": calls},
            {"role": "tool", "tool_call_id": "call_ro", "content": "rain"},
            {"role": "tool", "tool_call_id": "call_pa", "content": "sun"},
            {"role": "assistant", "content": "Sun in Paris, rain in Rome."}]
    conv = conversation_from_obj({"id": "o", "messages": msgs}, "x.jsonl:3", "o")
    prompt = tok.decode(encode_conversation(tok, conv, tool_calls="template")[1].prompt_ids)
    assert "[CALL call00001]weather(" in prompt and '{"city": "Paris"}' in prompt
    assert "<|im_start|>tool\nrain (answers call00002)" in prompt and "<|im_start|>tool\nsun (answers call00001)" in prompt


def test_tool_definitions_reach_the_template_in_openai_shape_whatever_the_log_spelled(bpe_chatml):
    tok = _tok(bpe_chatml, OWN.replace("{{ t.function.name }}", "{{ t.function.name }}={{ t.function.parameters | tojson }}"))
    fn = TOOLS[0]["function"]
    spellings = {"openai": TOOLS,
                 "anthropic": [{"name": fn["name"], "description": fn["description"], "input_schema": fn["parameters"]}],
                 "responses": [{"type": "function", **fn}]}
    prompts = {}
    for name, tools in spellings.items():
        conv = conversation_from_obj({"id": name, "tools": tools, "messages": [
            {"role": "system", "content": "S"}, {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello."}]}, "x", name)
        prompts[name] = tok.decode(encode_conversation(tok, conv, tool_calls="template")[0].prompt_ids)
    assert prompts["openai"] == prompts["anthropic"] == prompts["responses"]
    assert 'TOOLS: find_booking={"type": "object"' in prompts["openai"]


def test_a_template_that_drops_tool_results_is_refused(bpe_chatml):
    drops = OWN.replace("{% for message in messages %}", "{% for message in messages if message.role != 'tool' %}")
    with pytest.raises(ConversationError, match="drops tool results.*--tool-calls text"):
        encode_conversation(_tok(bpe_chatml, drops), _conv(), tool_calls="template")


def test_a_template_that_joins_arguments_as_text_gets_the_recorded_text(bpe_chatml):
    """DeepSeek's templates concatenate the arguments as a string: parsed ones would make them
    raise, so the probe finds that and the recorded text goes in as written."""
    joins = OWN.replace("{% if c.function.arguments is mapping %}{{ c.function.arguments | tojson }}"
                        "{% else %}{{ c.function.arguments }}{% endif %}", "{{ '<args>' + c.function.arguments }}")
    tok = _tok(bpe_chatml, joins)
    conv = conversation_from_obj({"id": "j", "messages": [
        {"role": "user", "content": "Find A1."},
        {"role": "assistant", "content": "", "tool_calls": [{"name": "find_booking", "arguments": '{"id" :"A1"}'}]},
        {"role": "tool", "content": "ok"}, {"role": "assistant", "content": "Found."}]}, "x", "j")
    turns = encode_conversation(tok, conv, tool_calls="template")
    assert tok.decode(turns[0].recording_ids) == '[CALL call00001]find_booking(<args>{"id" :"A1"})[/CALL]<|im_end|>'


def test_a_template_that_writes_calls_only_with_tools_gets_them_always(bpe_chatml):
    """Hermes-style pairs ({"default", "tool_use"}: the second only when tools= is given) and
    templates that write calls only {% if tools %}: the probe finds they need tools=, so every
    conversation gets it; one whose calls still vanish is refused by name, not replayed without them."""
    plain = CALLS_ONLY.replace(CALLS, "")                       # content only, like SmolLM2's
    pair = _tok(bpe_chatml, {"default": plain, "tool_use": OWN})
    turns = encode_conversation(pair, _conv(), tool_calls="template")
    assert "[CALL call00001]find_booking" in pair.decode(turns[0].recording_ids)
    untooled = _conv()
    untooled = conversation_from_obj({"id": "u", "messages": [
        m if m["role"] != "assistant" else {"role": "assistant", "content": m["content"], "tool_calls": [
            {"name": c.name, "arguments_json": c.arguments_json} for c in m["tool_calls"]]}
        for m in untooled.messages[1:]]}, "y.jsonl:4", "u")    # the same conversation without its tools
    assert "[CALL call00001]" in pair.decode(encode_conversation(pair, untooled, tool_calls="template")[0].recording_ids)
    only_if_tools = _tok(bpe_chatml, OWN.replace(CALLS, "{% if tools %}" + CALLS + "{% endif %}"))
    assert "[CALL call00001]" in only_if_tools.decode(
        encode_conversation(only_if_tools, _conv(), tool_calls="template")[0].recording_ids)
    with pytest.raises(ConversationError, match=r"y.jsonl:4: conversation 'u': the chat template leaves the call "
                                                r"to 'find_booking' out.*--tool-calls text"):
        encode_conversation(only_if_tools, untooled, tool_calls="template")


def test_answers_name_the_call_in_every_spelling_and_keep_two_logs_apart():
    """A result's "answers" is the index of the call its id names: for the Responses API's calls
    joined into one turn as for a chat log's; two logs alike but for which call a result answers
    are two conversations, not one folded into the other."""
    from oilbird.data.overlaps import fold_overlaps
    items = [{"role": "user", "content": "Paris and Rome?"},
             {"type": "function_call", "call_id": "fc_p", "name": "weather", "arguments": '{"city":"Paris"}'},
             {"type": "function_call", "call_id": "fc_r", "name": "weather", "arguments": '{"city":"Rome"}'},
             {"type": "function_call_output", "call_id": "fc_r", "output": "rain"},
             {"type": "function_call_output", "call_id": "fc_p", "output": "sun"},
             {"role": "assistant", "content": "Sun and rain."}]
    conv = conversation_from_obj({"id": "r", "messages": items}, "z", "r")
    assert [m.get("answers") for m in conv.messages if m["role"] == "tool"] == [1, 0]
    same = items[:3] + [{"type": "function_call_output", "call_id": "fc_r", "output": "ok"},
                        {"type": "function_call_output", "call_id": "fc_p", "output": "ok"},
                        {"role": "assistant", "content": "Done."}]
    longer = conversation_from_obj({"id": "l", "messages": same + [{"role": "user", "content": "Thanks"},
                                                                  {"role": "assistant", "content": "Bye."}]}, "z", "l")
    start = conversation_from_obj({"id": "s", "messages": same[:3] + [same[4], same[3]] + same[5:]}, "z", "s")
    assert [m["content"] for m in start.messages] == [m["content"] for m in longer.messages[:len(start.messages)]]
    assert fold_overlaps([start, longer]) == ([start, longer], [])      # the results answer other calls
    prefix = conversation_from_obj({"id": "p", "messages": same}, "z", "p")
    assert fold_overlaps([prefix, longer])[0] == [longer]               # the same answers: folded
