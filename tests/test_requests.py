"""Requests: the built-in workload, API-Bank, generic JSONL, and their error messages."""
import json
import re
from pathlib import Path

import pytest

from oilbird.data.requests import DataError, load_api_bank, load_jsonl, load_requests
from oilbird.data.requests import builtin_requests


def test_builtin_is_deterministic_and_seeded():
    a, b = builtin_requests(seed=0), builtin_requests(seed=0)
    assert [r.messages for r in a] == [r.messages for r in b]
    assert [r.messages for r in builtin_requests(seed=1)] != [r.messages for r in a]


def test_builtin_repeats_frames_with_fresh_values():
    reqs = builtin_requests()
    by_conv = {}
    for r in reqs:
        by_conv.setdefault(r.meta["conversation"], []).append(r)
    for conv in by_conv.values():
        calls = [r.reference for r in conv]
        frames = {re.sub(r"'[^']*'", "'_'", c) for c in calls}
        assert len(frames) == 1, calls                 # the same call frame ...
        assert len(set(calls)) == len(calls)           # ... with a different value every time
        # the value asked for later was minted earlier in the same conversation
        for r in conv:
            value = next(iter(r.meta["args"].values()))
            assert value in r.messages[-1]["content"]
        # and each later request repeats the earlier call frames verbatim in its prompt
        assert conv[-1].messages[-1]["content"].count("API-Request: [" + conv[0].meta["tool"]) == len(conv) - 1


def test_api_bank_534_requests_in_order(api_bank_path):
    reqs = load_api_bank(api_bank_path)
    assert len(reqs) == 534
    assert reqs[0].id == "level-1-api/0" and reqs[399].id == "level-2-api/0"
    assert reqs[0].messages[1]["content"].rstrip().endswith("Generate API Request:")
    assert reqs[0].reference.startswith("API-Request: [")


def test_jsonl_messages_and_prompt(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n\n"
                 + json.dumps({"id": "x", "prompt": "yo"}) + "\n")
    reqs = load_jsonl(p)
    assert [r.id for r in reqs] == ["0", "x"] and reqs[1].messages == [{"role": "user", "content": "yo"}]


@pytest.mark.parametrize("content,msg", [
    ("{not json\n", "bad.jsonl:1: not valid JSON"),
    ('{"foo": 1}\n', "needs 'messages' or 'prompt'"),
    ('{"prompt": 5}\n', "bad.jsonl:1: 'prompt' must be text, not 5"),
    ('{"turns": []}\n', "'turns' must be a non-empty list of texts, not []"),
    ('{"messages": []}\n', "non-empty list"),
    ("", "no requests"),
    ('{"id": "a", "prompt": "x"}\n{"id": "a", "prompt": "y"}\n', "bad.jsonl:2: id 'a' is already used by line 1"),
    ('{"prompt": "x"}\n{"id": "0", "prompt": "y"}\n', "bad.jsonl:2: id '0' is already used by line 1"),
    ('{"messages": [{"role": "user", "content": ""}]}\n', "bad.jsonl:1: the prompt is empty"),
    ('{\n  "methods": {}\n}\n', "one JSON dict, not requests"),
    ('{"prompt": "x"}\n{"prompt": \n', "bad.jsonl:2: not valid JSON"),
])
def test_malformed_jsonl_names_path_and_problem(tmp_path, content, msg):
    p = tmp_path / "bad.jsonl"
    p.write_text(content)
    with pytest.raises(DataError, match=re.escape(msg)) as e:
        load_jsonl(p)
    assert "bad.jsonl" in str(e.value)


def test_a_json_list_of_requests_loads_and_a_folder_must_be_api_bank(tmp_path):
    f = tmp_path / "reqs.json"
    f.write_text(json.dumps([{"id": "q1", "prompt": "x"}, {"messages": [{"role": "user", "content": "y"}]}], indent=2))
    assert [r.id for r in load_requests(f)] == ["q1", "1"]
    f.write_text(json.dumps([{"prompt": "x"}, {"prompt": "y"}]))                # the list on one line
    assert [r.id for r in load_requests(f)] == ["0", "1"]
    f.write_text(json.dumps({"id": "one", "prompt": "x"}, indent=2))            # one request, pretty-printed
    assert [r.id for r in load_requests(f)] == ["one"]
    with pytest.raises(DataError, match="not an API-Bank one"):
        load_requests(tmp_path)


def test_missing_paths_are_named(tmp_path):
    with pytest.raises(DataError, match="no such file or folder"):
        load_requests(str(tmp_path / "nope.jsonl"))
    # a pretty-printed request that gives one key twice: refused by name, not the last one kept
    twice = tmp_path / "twice.json"
    twice.write_text('[\n  {"prompt": "a",\n   "prompt": "b"}\n]\n')
    with pytest.raises(DataError, match="the key 'prompt' appears twice"):
        load_requests(str(twice))
    # a conversation set given where requests are wanted (bench, the app): told where it belongs
    with pytest.raises(DataError, match=r"recorded conversations, which are replayed \(python -m oilbird replay"):
        load_requests("agent-transcripts")
    with pytest.raises(DataError, match="test-data"):
        load_api_bank(tmp_path / "nothing")
    (tmp_path / "ab" / "test-data").mkdir(parents=True)
    (tmp_path / "ab" / "test-data" / "level-1-api.json").write_text("[{]")
    with pytest.raises(DataError, match="level-1-api.json:1: not valid JSON"):
        load_requests(str(tmp_path / "ab"))


def test_skip_then_limit_selects_a_later_slice():
    every = load_requests("builtin")
    assert [r.id for r in load_requests("builtin", skip=3, limit=2)] == [r.id for r in every[3:5]]
    assert [r.id for r in load_requests("builtin", skip=len(every) - 1)] == [every[-1].id]
    for bad in (len(every), -1):
        with pytest.raises(DataError, match=f"--skip {bad} leaves no requests"):
            load_requests("builtin", skip=bad)


@pytest.mark.parametrize("messages, words", [
    ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
     ["the last message is the assistant's", "python -m oilbird replay --data FILE"]),
    ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": [{"name": "f"}]},
      {"role": "tool", "content": "{}"}], ["an agent's recorded turns", "python -m oilbird replay --data FILE"]),
    ([{"role": "user", "content": "hi"}, {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}],
     ["an agent's recorded turns"]),
    ([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]}],
     ["an agent's recorded turns"]),
])
def test_a_recorded_conversation_given_as_live_requests_points_to_replay(tmp_path, messages, words):
    """bench, trace and serve-bench decode live requests: a recorded conversation (its assistant
    turns the outputs) would be benchmarked as one prompt with the answers in it, or not read."""
    p = tmp_path / "log.jsonl"
    p.write_text(json.dumps({"messages": messages}) + "\n")
    with pytest.raises(DataError) as exc:
        load_requests(p)
    assert all(w in str(exc.value) for w in words)
    image = tmp_path / "img.jsonl"            # not text, not recorded turns: no pointer to replay
    image.write_text(json.dumps({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}) + "\n")
    with pytest.raises(DataError) as exc:
        load_requests(image)
    assert "replay" not in str(exc.value)


def test_the_shared_data_is_looked_for_beside_the_checkout_from_any_folder(tmp_path, monkeypatch):
    """Run from notebooks/ (or anywhere else), the shared data sets are still ../shared/data of the
    checkout, never a folder inside it (the messages would send a user to the wrong place)."""
    from oilbird.data import requests
    monkeypatch.delenv("OILBIRD_DATA", raising=False)
    monkeypatch.chdir(tmp_path)                       # no ../shared/data beside this folder
    checkout = Path(requests.__file__).resolve().parents[2]           # .../oilbird/data/requests.py
    assert (checkout / "oilbird" / "data" / "requests.py").is_file()
    assert requests.data_root() == checkout.parent / "shared" / "data"
    monkeypatch.setenv("OILBIRD_DATA", str(tmp_path / "mine"))
    assert requests.data_root() == tmp_path / "mine"
    monkeypatch.delenv("OILBIRD_DATA")
    (tmp_path / "shared" / "data").mkdir(parents=True)          # ../shared/data of the current folder wins
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    assert requests.data_root() == tmp_path / "shared" / "data"


@pytest.mark.parametrize("text", ["caf\udce9", "lone \ud800"])
def test_a_prompt_that_is_not_text_is_refused_before_the_tokenizer(text):
    """A byte that was not UTF-8 (kept by surrogateescape) or a lone surrogate: the tokenizer
    raised a TypeError from inside the Rust binding; one PromptError names the request."""
    from oilbird.data.requests import PromptError, Request, encode

    class NeverCalled:
        chat_template = "x"

        def apply_chat_template(self, *a, **k):
            raise AssertionError("the tokenizer was called")
    with pytest.raises(PromptError, match="request 'r': the prompt holds bytes that are not UTF-8 text"):
        encode(NeverCalled(), Request("r", [{"role": "user", "content": text}]))


@pytest.mark.parametrize("name", ["humaneval", "gsm8k", "mt-bench"])
def test_a_named_set_that_is_not_there_says_where_to_point(name, tmp_path, monkeypatch):
    monkeypatch.setenv("OILBIRD_DATA", str(tmp_path))
    with pytest.raises(DataError, match=f"the {name} set is not there \\(set \\$OILBIRD_DATA"):
        load_requests(name)
