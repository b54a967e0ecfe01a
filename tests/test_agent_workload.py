"""The built-in scripted agent: deterministic, valid for the conversation loader, and copying
IDs and values out of earlier tool results the way real agent traffic does."""
from __future__ import annotations

import json
import re

import pytest

from oilbird.data.agent_workload import KINDS, TRIALS, generate_conversations, write_jsonl
from oilbird.data.conversations import copied_arguments, encode_conversation, load_conversations, read_jsonl


def test_deterministic_and_prefix_stable():
    a = generate_conversations(24, seed=0)
    assert a == generate_conversations(24, seed=0)
    assert generate_conversations(5, seed=0) == a[:5]
    b = generate_conversations(24, seed=1)
    assert [c["messages"] for c in b] != [c["messages"] for c in a]
    assert len({c["id"] for c in a}) == 24
    with pytest.raises(ValueError):
        generate_conversations(0)


def test_written_file_reads_back_as_the_builtin_set(tmp_path):
    p = write_jsonl(tmp_path / "agent.jsonl", n=8, seed=0)
    from_file = read_jsonl(p)
    builtin = load_conversations("agent-builtin", limit=8)
    assert [(c.id, c.model, c.messages) for c in from_file] == [(c.id, c.model, c.messages) for c in builtin]
    assert all("scripted" in c.model for c in builtin)
    assert len(load_conversations("agent-builtin")) == 24


def test_tasks_repeat_over_trials_with_varied_phrasing():
    convs = generate_conversations(24)
    tasks = [convs[t * TRIALS:(t + 1) * TRIALS] for t in range(24 // TRIALS)]
    kinds = set()
    for trials in tasks:
        # the same customer and the same actions in every trial of a task...
        calls = [[(tc["name"], tc["arguments_json"]) for m in c["messages"] for tc in m.get("tool_calls", [])]
                 for c in trials]
        assert all(c == calls[0] for c in calls[1:]) and calls[0]
        kinds.add(calls[0][-1][0])
        # ...asked and answered in different words
        texts = [tuple(m["content"] for m in c["messages"] if m["role"] != "tool") for c in trials]
        assert len(set(texts)) == TRIALS
    assert len(kinds) == len(KINDS)              # every kind of request appears in the default 24


def test_later_turns_copy_ids_and_values_from_earlier_messages():
    convs = load_conversations("agent-builtin")
    copied, total = map(sum, zip(*(copied_arguments(c) for c in convs)))
    assert total > 100 and copied / total >= 0.9, (copied, total)
    # every booking ID an assistant reply names was read from a tool result before it
    named = 0
    for c in convs:
        for i, m in enumerate(c.messages):
            if m["role"] != "assistant":
                continue
            tool_text = " ".join(x["content"] for x in c.messages[:i] if x["role"] == "tool")
            for bid in re.findall(r"\b[A-Z0-9]{6}\b", m["content"]):
                named += 1
                assert bid in tool_text, (c.id, i, bid)
    assert named > 24


def test_tool_results_are_json_and_booking_ids_look_alike():
    for c in generate_conversations(10):
        for m in c["messages"]:
            if m["role"] == "tool":
                json.loads(m["content"])
        profile = json.loads(c["messages"][[m["role"] for m in c["messages"]].index("tool")]["content"])
        assert all(re.fullmatch(r"[A-Z0-9]{6}", b) for b in profile["bookings"])


@pytest.mark.model
def test_builtin_prompts_fit_a_quick_cpu_replay(real_lm):
    convs = load_conversations("agent-builtin")
    turns = [t for c in convs for t in encode_conversation(real_lm.tokenizer, c)]
    longest = max(t.length for t in turns)
    assert 1000 < longest < 2500, longest


def test_the_long_variant_has_a_long_policy_prompt_and_several_customers_per_conversation():
    from oilbird.data.agent_workload import generate_conversations, long_policy
    from oilbird.data.conversations import load_conversations
    short, long = generate_conversations(8), generate_conversations(8, long=True)
    assert long == generate_conversations(8, long=True)                   # deterministic
    assert long[0]["messages"][0]["content"].endswith(long_policy()) and 15_000 < len(long_policy()) < 18_000
    assert long[0]["messages"][1:] == short[0]["messages"][1:]           # task 0: one customer
    assert len(long[4]["messages"]) > len(short[4]["messages"])          # task 1: two customers
    convs = load_conversations("agent-builtin-long", limit=5)
    assert [c.id for c in convs][-1] == "agent-builtin-long-task1-trial0" and len(convs) == 5
