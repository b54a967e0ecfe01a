"""API-Bank's recorded dialogues as replay conversations: the mapping to the one rendered form,
bad files named by file and line, the named set. Every dialogue here is written for the test
(none is API-Bank's text); the real folder is read by the test marked ``model``-free at the end
only when ``../shared/data`` is present."""
from __future__ import annotations

import json

import pytest
from test_conversations import ChatMLBytes

from oilbird.data import api_bank_dialogues as ab
from oilbird.data.conversations import (ConversationError, conversation_from_obj, encode_conversation,
                                        load_conversations, render_messages)
from oilbird.data.requests import DataError

LOGIN = {"role": "API", "api_name": "Login", "param_dict": {"user": "kim", "pin": "4417"},
         "result": {"api_name": "Login", "input": {"user": "kim", "pin": "4417"},
                    "output": {"key": "q9w8e7"}, "exception": None}}
PARK = {"role": "API", "api_name": "BookParking", "param_dict": {"key": "q9w8e7", "spot": "B12"},
        "result": {"api_name": "BookParking", "input": {"key": "q9w8e7", "spot": "B12"},
                   "output": "success", "exception": None}}
DIALOGUE = [
    {"role": "User", "text": "Please book parking spot B12 for me."},
    {"role": "AI", "text": "Sure. Your user name and PIN, please?"},
    {"role": "User", "text": "kim, 4417"},
    LOGIN,
    {"role": "AI", "text": "Logged in."},
    PARK,
    {"role": "AI", "text": "Spot B12 is yours."},
]
DESCRIPTIONS = {"Login": {"name": "Login", "description": "Log a user in."},
                "Unused": {"name": "Unused", "description": "Never called."}}


def read(path, descriptions):
    """One dialogue file, validated as load_conversations validates it."""
    return conversation_from_obj(ab.read_dialogue(path, descriptions), str(path), path.stem)


def write(path, records):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def test_a_dialogue_becomes_one_conversation_in_the_one_rendered_form(tmp_path):
    conv = read(write(tmp_path / "BookParking-level-2-7.jsonl", DIALOGUE), DESCRIPTIONS)
    assert conv.id == "BookParking-level-2-7" and conv.model == ab.RECORDED_BY
    assert [m["role"] for m in conv.messages] == ["system", "user", "assistant", "user", "assistant", "tool",
                                                  "assistant", "assistant", "tool", "assistant"]
    system = conv.messages[0]["content"]
    assert system.startswith(ab.SYSTEM_PROMPT) and '"Log a user in."' in system and "Unused" not in system
    rendered = render_messages(conv.messages)
    assert rendered[4]["content"] == ('<tool_call>\n{"name": "Login", "arguments": {"user":"kim","pin":"4417"}}'
                                      '\n</tool_call>')
    assert rendered[5] == {"role": "tool", "content": '<tool_response>\n{"api_name":"Login","input":{"user":"kim",'
                                                      '"pin":"4417"},"output":{"key":"q9w8e7"},"exception":null}'
                                                      '\n</tool_response>'}
    assert conv.messages[5]["name"] == "Login"
    assert rendered[6] == {"role": "assistant", "content": "Logged in."}
    # every AI text and every API call is a recorded turn: 3 AI + 2 API
    assert len(conv.assistant_indices) == 5
    turns = encode_conversation(ChatMLBytes(), conv)
    tok = ChatMLBytes()
    assert [tok.decode(t.recording_ids) for t in turns][3] == rendered[7]["content"] + "<|im_end|>"
    assert all(t.extends_previous for t in turns[1:])


def test_without_descriptions_the_system_message_is_the_instruction():
    assert ab.system_message(["Login"], {}) == ab.SYSTEM_PROMPT


BAD = {
    "not json": ('{"role": "User", "text": ', ["not valid JSON"]),
    "not an object": ('["User", "hi"]', ["expected a JSON object"]),
    "unknown role": ({"role": "Robot", "text": "beep"}, ["unknown role 'Robot'"]),
    "no text": ({"role": "AI"}, ["AI record needs a 'text' string"]),
    "no api name": ({"role": "API", "param_dict": {}, "result": {}}, ["'api_name'"]),
    "params not an object": ({"role": "API", "api_name": "X", "param_dict": "a=1", "result": {}},
                             ["X", "'param_dict' must be a JSON object"]),
    "result missing": ({"role": "API", "api_name": "X", "param_dict": {}},
                       ["X", "'result' must be a JSON object"]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_record_is_named_by_file_and_line(tmp_path, case):
    line, expected = BAD[case]
    p = write(tmp_path / "Bad-level-1-1.jsonl", [{"role": "User", "text": "hi"}, line])
    with pytest.raises(ConversationError) as exc:
        ab.read_dialogue(p, {})
    msg = str(exc.value)
    assert isinstance(exc.value, DataError)
    assert msg.startswith(f"{p}:2: "), msg                  # as every InputError names a line
    for part in expected:
        assert part in msg, (part, msg)


def test_a_dialogue_without_a_turn_to_replay_or_without_a_request_is_refused(tmp_path):
    with pytest.raises(ConversationError, match=r"dialogue 'Quiet'.*no AI or API record"):
        ab.read_dialogue(write(tmp_path / "Quiet.jsonl", [{"role": "User", "text": "hello?"}]), {})
    with pytest.raises(ConversationError, match=r"Eager.jsonl:1: dialogue 'Eager'.*no user request"):
        ab.read_dialogue(write(tmp_path / "Eager.jsonl", [{"role": "AI", "text": "Hi!"}]), {})


def test_a_folder_skips_empty_files_and_refuses_a_bad_one(tmp_path, monkeypatch):
    d = tmp_path / "dialogues"
    d.mkdir()
    write(d / "B-level-1-1.jsonl", DIALOGUE)
    write(d / "A-level-1-1.jsonl", [DIALOGUE[0], {"role": "AI", "text": "Which day?"}])   # not B's start: kept
    (d / "C-level-1-1.jsonl").write_text("")
    (d / "notes.txt").write_text("not a dialogue")
    convs, empty = ab.read_dialogues(d, {})
    assert [c["id"] for c, _ in convs] == ["A-level-1-1", "B-level-1-1"] and empty == ["C-level-1-1.jsonl"]
    # a folder path works as --data, and so does the named set under $OILBIRD_DATA
    monkeypatch.setenv("OILBIRD_DATA", str(tmp_path / "root"))
    assert [c.id for c in load_conversations(d)] == ["A-level-1-1", "B-level-1-1"]
    with pytest.raises(DataError, match="API-Bank's recorded dialogues are not there"):
        load_conversations("api-bank-dialogues")
    named = tmp_path / "root" / ab.DIALOGUES_DIR
    named.mkdir(parents=True)
    write(named / "B-level-1-1.jsonl", DIALOGUE)
    write(tmp_path / "root" / ab.DESCRIPTIONS_FILE, [DESCRIPTIONS["Login"]])
    [conv] = load_conversations("api-bank-dialogues", limit=1)
    assert '"Log a user in."' in conv.messages[0]["content"]
    write(d / "D-level-1-1.jsonl", [{"role": "User", "text": "x"}, {"role": "AI"}])
    with pytest.raises(ConversationError, match=r"D-level-1-1.jsonl:2: "):
        load_conversations(d)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConversationError, match="no dialogue files"):
        ab.read_dialogues(tmp_path / "empty", {})
    for f in d.iterdir():
        f.write_text("") if f.suffix == ".jsonl" else None
    with pytest.raises(ConversationError, match="every dialogue file is empty"):
        ab.read_dialogues(d, {})


def test_a_bad_descriptions_file_is_named(tmp_path):
    p = write(tmp_path / "api_descriptions.jsonl", [{"description": "no name"}])
    with pytest.raises(ConversationError, match=r"api_descriptions.jsonl:1: .*'name'"):
        ab.read_descriptions(p)
    assert ab.read_descriptions(tmp_path / "missing.jsonl") == {}


@pytest.mark.skipif(not ab.available(), reason="API-Bank's dialogues are not in ../shared/data")
def test_the_shared_dialogues_load():
    convs = load_conversations("api-bank-dialogues")
    assert len(convs) == 213                   # 214 files, one of them empty upstream
    assert len({c.id for c in convs}) == 213 and all(c.model == ab.RECORDED_BY for c in convs)
    assert sum(len(c.assistant_indices) for c in convs) == 1001 + 389    # AI turns + API calls


def test_a_bad_dialogue_file_can_be_left_out_as_a_bad_line_is(tmp_path):
    """A dialogue folder with a bad file: refused by the first one's file and line, counting the
    others and saying the rest would load (``skippable``); with a ``skipped`` list (``replay
    --skip-bad``) the bad files are listed and the good dialogues load; a folder none of whose
    dialogues loads is refused either way."""
    d = tmp_path / "dialogues"
    d.mkdir()
    write(d / "A-level-1-1.jsonl", DIALOGUE)
    write(d / "B-level-1-1.jsonl", [{"role": "User", "text": "x"}, {"role": "AI"}])
    write(d / "C-level-1-1.jsonl", [{"role": "Robot", "text": "beep"}])
    with pytest.raises(ConversationError) as exc:
        load_conversations(d)
    assert str(exc.value).startswith(f"{d / 'B-level-1-1.jsonl'}:2: ")
    assert str(exc.value).endswith("(and 1 more bad dialogue file in the folder)") and exc.value.skippable
    skipped: list[dict] = []
    assert [c.id for c in load_conversations(d, skipped=skipped)] == ["A-level-1-1"]
    assert [(b["file"], b["line"]) for b in skipped] == [(str(d / "B-level-1-1.jsonl"), 2),
                                                         (str(d / "C-level-1-1.jsonl"), 1)]
    assert "unknown role 'Robot'" in skipped[1]["error"]
    from oilbird.__main__ import _left_out          # what replay --skip-bad says it left out
    assert _left_out(skipped) == "2 bad dialogue files of the folder"
    assert _left_out(skipped[:1]) == "1 bad dialogue file of the folder"
    assert _left_out([{"file": "x.jsonl", "line": 3, "error": "e"}]) == "1 bad line of the recording"
    (d / "A-level-1-1.jsonl").unlink()
    for kept in (None, []):
        with pytest.raises(ConversationError, match="no conversation in the folder .* loads: 2 bad dialogue files") as exc:
            load_conversations(d, skipped=kept)
        assert not exc.value.skippable
