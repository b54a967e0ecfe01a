"""API-Bank's recorded dialogues as replayable conversations (``--data api-bank-dialogues``).

API-Bank (Li et al., 2023) ships, besides its ready-made prompts (:func:`oilbird.data.requests.load_api_bank`),
the dialogues they were cut from: ``lv1-lv2-samples/level-1-given-desc/*.jsonl`` under the
API-Bank folder of the shared data (``data_root()/api-bank``; never copied into this
repository), one dialogue per file, one record per line::

    {"role": "User", "text": "..."}
    {"role": "AI", "text": "..."}
    {"role": "API", "api_name": "SomeApi", "param_dict": {"username": "foo", ...},
     "result": {"api_name": "SomeApi", "input": {...}, "output": {"token": "..."}, "exception": null}}

This module turns each file into one conversation object in the input form of
:mod:`oilbird.data.conversations` (id: the file's name without ``.jsonl``; ``model``:
:data:`RECORDED_BY`), which :func:`~oilbird.data.conversations.load_conversations` validates
into a :class:`~oilbird.data.conversations.Conversation`, so a replay renders and tokenizes it
exactly as any other recorded conversation (the one text form of that module):

* ``User`` -> a ``user`` message with its text;
* ``AI`` -> an ``assistant`` message with its text (a recorded turn to replay);
* ``API`` -> an ``assistant`` message with no text and one tool call (``api_name``, the
  ``param_dict`` as compact JSON; a recorded turn to replay), then a ``tool`` message named
  ``api_name`` whose text is the record's ``result`` as compact JSON (``api_name``, ``input``,
  ``output``, ``exception``, as recorded);
* first, a ``system`` message: :data:`SYSTEM_PROMPT` and, one JSON object a line, the
  descriptions of the APIs the dialogue calls, from ``api-bank/api_descriptions.jsonl`` when
  that file is there (the "given description" setting of level 1; an API it lacks is left out).
  Without that file the system message is the instruction alone.

An ``AI`` record and the ``API`` record after it stay two assistant turns, in file order, as
recorded. What it does not know: who wrote the AI turns (API-Bank's annotators; no model is
named), and the level-2 ("tool searcher") dialogues unless given their folder as a path.

**Bad files.** Every line is checked before anything is returned, so a bad file stops a run
before any model work, with one :class:`~oilbird.data.conversations.ConversationError` naming
the file, the line (or the dialogue) and what is wrong: a line that is not a JSON object, an
unknown role, a ``User`` / ``AI`` record without a text string, an ``API`` record without an
``api_name``, with a ``param_dict`` or ``result`` that is not a JSON object, a dialogue without
AI or API record (nothing to replay) or whose first turn has nothing before it. An *empty* file
is refused when read alone; inside a folder it is skipped and counted (upstream ships one,
``SearchEngine-level-1-1.jsonl``): :func:`read_dialogues` returns the names it skipped.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..jsonio import json_lines, read_text
from .requests import ConversationError, DataError, data_root, refusal

NAME = "api-bank-dialogues"
DIALOGUES_DIR = Path("api-bank") / "lv1-lv2-samples" / "level-1-given-desc"
DESCRIPTIONS_FILE = Path("api-bank") / "api_descriptions.jsonl"
RECORDED_BY = "API-Bank"
ROLES = ("User", "AI", "API")
SYSTEM_PROMPT = ("You are a helpful assistant that can call APIs. To call one, answer with a tool call; "
                 "its result comes back as a tool message. The current year is 2023.")


def _compact(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def read_descriptions(path: str | Path | None = None) -> dict[str, dict]:
    """The API descriptions by name (``api_descriptions.jsonl``, one JSON object a line, each
    with a ``name``); ``{}`` when the file is not there. A bad line is refused by name."""
    p = Path(path) if path is not None else data_root() / DESCRIPTIONS_FILE
    if not p.is_file():
        return {}
    out: dict[str, dict] = {}
    for no, d in json_lines(read_text(p, ConversationError), ConversationError, p):
        if not isinstance(d, dict) or not isinstance(d.get("name"), str):
            raise ConversationError("an API description needs a 'name' string", p, no)
        out.setdefault(d["name"], d)
    return out


def dialogue_messages(records: list[tuple[int, object]], path) -> list[dict]:
    """``(line, record)`` pairs of one dialogue -> messages in the conversation input form (without
    the system message). Every error names ``path`` and the record's line."""
    msgs: list[dict] = []
    for no, r in records:
        def err(problem, _no=no):
            return ConversationError(problem, path, _no)
        if not isinstance(r, dict):
            raise err(f"expected a JSON object (a dialogue record), got {type(r).__name__}")
        role = r.get("role")
        if role not in ROLES:
            raise err(f"unknown role {role!r} (expected one of {', '.join(ROLES)})")
        if role in ("User", "AI"):
            if not isinstance(r.get("text"), str):
                raise err(f"{'an' if role == 'AI' else 'a'} {role} record needs a 'text' string")
            msgs.append({"role": "user" if role == "User" else "assistant", "content": r["text"]})
            continue
        name, params, result = r.get("api_name"), r.get("param_dict"), r.get("result")
        if not isinstance(name, str) or not name:
            raise err("an API record needs an 'api_name' string")
        if not isinstance(params, dict):
            raise err(f"API record {name}: 'param_dict' must be a JSON object, not {type(params).__name__}")
        if not isinstance(result, dict):
            raise err(f"API record {name}: 'result' must be a JSON object, not {type(result).__name__}")
        msgs.append({"role": "assistant", "content": "",
                     "tool_calls": [{"name": name, "arguments_json": _compact(params)}]})
        msgs.append({"role": "tool", "name": name, "content": _compact(result)})
    return msgs


def system_message(api_names: list[str], descriptions: dict[str, dict]) -> str:
    """:data:`SYSTEM_PROMPT`, then the descriptions of ``api_names`` known to ``descriptions``."""
    known = [descriptions[n] for n in dict.fromkeys(api_names) if n in descriptions]
    if not known:
        return SYSTEM_PROMPT
    return SYSTEM_PROMPT + "\nAPI descriptions:\n" + "\n".join(json.dumps(d, ensure_ascii=False) for d in known)


def read_dialogue(path: str | Path, descriptions: dict[str, dict] | None = None) -> dict | None:
    """One dialogue file as a conversation object (``{"id", "model", "messages"}``); None for an
    empty file (no records). ``descriptions``: from :func:`read_descriptions` (default: the
    shared data's, if there)."""
    p = Path(path)
    records = list(json_lines(read_text(p, ConversationError), ConversationError, p))
    if not records:
        return None
    msgs = dialogue_messages(records, p)
    if not any(m["role"] == "assistant" for m in msgs):
        raise ConversationError(f"dialogue '{p.stem}': no AI or API record, nothing to replay", p)
    if msgs[0]["role"] != "user":
        raise ConversationError(f"dialogue '{p.stem}': the dialogue starts with an AI or API record; "
                                "its first turn has no user request before it", p, records[0][0])
    descriptions = read_descriptions() if descriptions is None else descriptions
    calls = [c["name"] for m in msgs for c in m.get("tool_calls", ())]
    return {"id": p.stem, "model": RECORDED_BY,
            "messages": [{"role": "system", "content": system_message(calls, descriptions)}] + msgs}


def read_dialogues(folder: str | Path, descriptions: dict[str, dict] | None = None,
                   skipped: list[dict] | None = None) -> tuple[list[tuple[dict, str]], list[str]]:
    """Every ``*.jsonl`` dialogue of ``folder`` in name order as ``(conversation object, where it
    was read)``, and the names of the empty files skipped. A folder without dialogues is refused.
    Every file is read before a bad one stops the load, so the refusal says how many there are
    and whether the others would load (``skippable``); with a ``skipped`` list a bad file is
    listed there instead, as ``{"file", "line", "error", "what": "dialogue file"}`` (as a
    recording's bad line is, less ``what``), and
    the others load. A folder none of whose dialogues loads is refused either way."""
    d = Path(folder)
    if not d.is_dir():
        raise DataError(f"'{d}': no such folder of API-Bank dialogues")
    files = sorted(f for f in d.iterdir() if f.name.endswith((".jsonl", ".jsonl.gz")))
    if not files:
        raise ConversationError(f"'{d}': no dialogue files (*.jsonl) in the folder")
    descriptions = read_descriptions() if descriptions is None else descriptions
    out, empty, bad = [], [], []
    for f in files:
        try:
            obj = read_dialogue(f, descriptions)
        except ConversationError as exc:
            bad.append((f, exc))
            continue
        if obj is None:
            empty.append(f.name)
        else:
            out.append((obj, str(f)))
    if bad and (skipped is None or not out):
        raise refusal([str(exc) for _, exc in bad], bool(out), "dialogue file", "the folder", f"the folder '{d}'")
    if not out:
        raise ConversationError(f"'{d}': every dialogue file is empty")
    if skipped is not None:
        skipped += [{"file": str(f), "line": exc.line, "error": str(exc), "what": "dialogue file"} for f, exc in bad]
    return out, empty


def load_dialogues(folder: str | Path | None = None, skipped: list[dict] | None = None) -> list[tuple[dict, str]]:
    """The named set (``--data api-bank-dialogues``): the level-1 dialogues of the shared data,
    or those of ``folder``, as :func:`read_dialogues` gives them (``skipped`` as there); refused
    with one line when the data is not there."""
    d = Path(folder) if folder is not None else data_root() / DIALOGUES_DIR
    if folder is None and not d.is_dir():
        raise DataError(f"'{d}': API-Bank's recorded dialogues are not there (set $OILBIRD_DATA to the folder "
                        "that holds api-bank/, or use --data agent-builtin)")
    return read_dialogues(d, skipped=skipped)[0]


def available() -> bool:
    """Are the shared data's API-Bank dialogues there?"""
    return (data_root() / DIALOGUES_DIR).is_dir()
