"""Turn a data set into an ordered list of chat requests.

Knows nothing about models beyond ``tokenizer.apply_chat_template``. Sources:

* ``"builtin"``: the tool-calling workload this project generates itself (see
  :mod:`oilbird.data.workload`); always available, no files needed.
* ``"api-bank"``: ``test-data/level-1-api.json`` then ``level-2-api.json`` from the API-Bank
  folder (default ``../shared/data/api-bank`` or ``$OILBIRD_DATA/api-bank``): 534 requests.
* ``"humaneval"``, ``"gsm8k"``, ``"mt-bench"``: the non-repetitive sets in the same data root.
* any path to a ``.jsonl`` file with ``{"messages": [...]}`` or ``{"prompt": "..."}`` per line
  (optional ``"id"``, unique; a ``.json`` list of such objects works too), or to an API-Bank folder.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError, PromptError, shown
from ..jsonio import json_lines, loads, not_text, read_json, read_text


class DataError(InputError):
    """A data set could not be read. The message names the path (and line) and the problem."""


class ConversationError(DataError):
    """A conversation could not be read or encoded. The message names the file and line (when
    known), the conversation id (when known) and the message index. (Raised by
    :mod:`oilbird.data.conversations` and its readers; defined here so that a reader need not
    import that module.) ``skippable``: a recording's bad lines, where its other lines would
    load (``replay --skip-bad`` would go on)."""
    skippable: bool = False


def none_loads(where: str, errors: list[str], unit: str = "line") -> ConversationError:
    """The refusal of a recording (a file, a folder) none of whose lines (or dialogue files)
    loads, with the first one's error."""
    n = len(errors)
    return ConversationError(f"no conversation in {where} loads: {n} bad {unit}{'s' if n > 1 else ''}, "
                             f"the first: {errors[0]}")


def refusal(errors: list[str], loaded: bool, unit: str, where: str, nothing: str) -> ConversationError:
    """The refusal of a folder with bad entries (lines, or dialogue files), each one's error in
    ``errors``: where the rest loads (``loaded``), the first error counting the others "in
    ``where``", marked ``skippable`` (``replay --skip-bad`` would go on); where nothing does,
    :func:`none_loads` of ``nothing``."""
    if not loaded:
        return none_loads(nothing, errors, unit)
    n = len(errors)
    exc = ConversationError(f"{errors[0]} (and {n - 1} more bad {unit}{'s' if n > 2 else ''} in {where})"
                            if n > 1 else errors[0])
    exc.skippable = True
    return exc


@dataclass
class Request:
    """One chat request. ``reference`` is the data set's gold answer when it has one."""
    id: str
    messages: list[dict]
    dataset: str = ""
    reference: str | None = None
    meta: dict = field(default_factory=dict)


def request_unit(request: Request) -> str | None:
    """The dialogue a request is one turn of, where its set says (the built-in workload's
    conversation, an API-Bank record's file): requests of one dialogue share a history and a
    store's growth, so a pooled ratio's interval draws them together. None: the request alone.

    >>> request_unit(Request("00-1", [], meta={"conversation": 0})), request_unit(Request("q", []))
    ('conversation 0', None)
    """
    meta = request.meta or {}
    if meta.get("conversation") is not None:
        return f"conversation {meta['conversation']}"
    return f"file {meta['file']}" if meta.get("file") else None


NAMED_SETS = ("builtin", "api-bank", "humaneval", "gsm8k", "mt-bench")
# the named sets of recorded conversations (oilbird.data.conversations), which are replayed, not decoded
CONVERSATION_SETS = ("agent-transcripts", "agent-builtin", "agent-builtin-long", "api-bank-dialogues")


# the checkout this module lies in (oilbird/data/requests.py, two folders down; when the package is
# installed into site-packages instead, a folder without pyproject.toml, which data_root ignores)
CHECKOUT = Path(__file__).resolve().parents[2]


def data_root() -> Path:
    """Where the shared data sets live: ``$OILBIRD_DATA``, else ``../shared/data`` next to the
    current directory, else ``shared/data`` beside this checkout (never inside it), so a
    notebook run in notebooks/ finds it too."""
    env = os.environ.get("OILBIRD_DATA")
    if env:
        return Path(env)
    here = Path.cwd().parent / "shared" / "data"
    if here.is_dir() or not (CHECKOUT / "pyproject.toml").is_file():    # installed, not a checkout
        return here
    return CHECKOUT.parent / "shared" / "data"


def default_path(name: str) -> Path:
    return data_root() / name


def api_bank_available(path: str | Path | None = None) -> bool:
    p = Path(path) if path else default_path("api-bank")
    return (p / "test-data" / "level-1-api.json").is_file()


def load_api_bank(path: str | Path | None = None) -> list[Request]:
    """API-Bank level-1 then level-2 API-call records, in file order (534 requests).

    Each record's ``instruction`` becomes the system message and its ``input`` (the rendered
    dialogue ending in ``Generate API Request:``) the user message.
    """
    root = Path(path) if path else default_path("api-bank")
    if not root.is_dir():
        raise DataError("API-Bank folder not found (give --data PATH to the folder that holds "
                        "test-data/, set $OILBIRD_DATA to the folder that holds api-bank/, or use "
                        "--data builtin)", root)
    out: list[Request] = []
    for level in ("level-1-api", "level-2-api"):
        f = root / "test-data" / f"{level}.json"
        records = read_json(f, DataError)
        if not isinstance(records, list):
            raise DataError("expected a JSON list of records", f)
        for i, rec in enumerate(records):
            if not (isinstance(rec, dict) and isinstance(rec.get("instruction"), str)
                    and isinstance(rec.get("input"), str)):
                raise DataError(f"record {i} lacks 'instruction'/'input' (text)", f)
            ref = rec.get("expected_output")
            out.append(Request(
                id=f"{level}/{i}",
                messages=[{"role": "system", "content": rec["instruction"]},
                          {"role": "user", "content": rec["input"]}],
                dataset="api-bank", reference=ref if isinstance(ref, str) else None,
                meta={"file": rec.get("file"), "sample": rec.get("id")}))
    return out


def load_jsonl(path: str | Path, dataset: str | None = None) -> list[Request]:
    """Generic requests: one JSON object per line with ``messages`` or ``prompt`` (a ``.json``
    file holding one list of such objects works too; ``.gz`` is read compressed). Refused with
    the line (:class:`DataError`): bytes that are not JSON lines of requests, a request without
    text, and an id used twice (its traces and labels would be mixed up with the other
    request's)."""
    p = Path(path)
    text = read_text(p, DataError)
    try:
        # (line, item, value): the line in the file; the item in a JSON list, else None
        objects = [(no, None, d) for no, d in json_lines(text, DataError, p)]
    except DataError as line_error:
        objects = _one_json_document(p, text)
        if objects is None:
            raise line_error from None
    if len(objects) == 1 and isinstance(objects[0][2], list):      # a JSON list on one line
        objects = [(objects[0][0], i, d) for i, d in enumerate(objects[0][2])]
    out: list[Request] = []
    seen: dict[str, str] = {}
    for line, item, d in objects:
        here = "" if item is None else f"item {item}: "

        def fail(reason):
            raise DataError(here + reason, p, line)
        r = _request_from_obj(d, dataset or p.stem, len(out), fail)
        if not has_text(r.messages):
            fail("the prompt is empty")
        if r.id in seen:
            fail(f"id '{r.id[:60]}' is already used by {seen[r.id]}; give every request its own \"id\"")
        seen[r.id] = f"line {line}" if item is None else f"item {item}"
        out.append(r)
    if not out:
        raise DataError("no requests in file", p)
    return out


def _one_json_document(p: Path, text: str) -> list[tuple[int | None, int | None, object]] | None:
    """The requests of a file that is one JSON document rather than JSON lines: a list of
    request objects; None if the text is not JSON at all. Any other document (e.g. a bench
    ``results.json`` given as --data) is refused by name."""
    try:
        loads(text, DataError, p)
    except DataError:
        return None
    doc = loads(text, DataError, p, keys_once=True)      # JSON, but a key given twice is ambiguous: said so
    if isinstance(doc, dict) and _REQUEST_KEYS & doc.keys():      # one request, pretty-printed
        return [(None, None, doc)]
    if not isinstance(doc, list):
        raise DataError(f"one JSON {type(doc).__name__}, not requests: give JSON lines, one "
                        "{\"prompt\": ...} or {\"messages\": [...]} object per line, or a JSON list of them", p)
    return [(None, i, d) for i, d in enumerate(doc)]


# what a live request's reader says of a recorded conversation (its assistant turns are the outputs)
REPLAY_HINT = ("a recorded conversation is replayed turn by turn with `python -m oilbird replay --data FILE` "
               "(docs/replay.md)")

# what marks an agent's recorded turns: the Responses API's items, Anthropic's content blocks
RECORDED_ITEMS = ("function_call", "function_call_output", "tool_use", "tool_result")

def _recorded_turn(m: dict) -> bool:
    """Is message ``m`` one of an agent's recorded turns (a call, a result, an item or block of
    one), which a live request cannot hold?"""
    content = m.get("content")
    if m.get("tool_calls") or m.get("function_call") or m.get("type") in RECORDED_ITEMS:
        return True
    if m.get("role") in ("assistant", "tool", "function") and not isinstance(content, str):
        return True
    return isinstance(content, list) and any(isinstance(b, dict) and b.get("type") in RECORDED_ITEMS for b in content)


# the fields a request object is read from (_request_from_obj)
_REQUEST_KEYS = {"messages", "prompt", "question", "turns"}


def _request_from_obj(d, dataset: str, index: int, fail) -> Request:
    """One request object -> :class:`Request`; ``fail(reason)`` raises the located error."""
    if not isinstance(d, dict):
        fail("expected a JSON object")
    rid = d.get("id", d.get("task_id", d.get("question_id", index)))
    if isinstance(rid, bool) or not isinstance(rid, (str, int)):
        fail("'id' must be a string or a whole number")
    if "messages" in d:
        msgs = d["messages"]
        if not (isinstance(msgs, list) and msgs and all(
                isinstance(m, dict) and isinstance(m.get("content"), str) and isinstance(m.get("role"), str)
                and m["role"] for m in msgs)):
            recorded = isinstance(msgs, list) and any(isinstance(m, dict) and _recorded_turn(m) for m in msgs)
            fail("'messages' must be a non-empty list of {role, content} (text)" + (
                f"; these are an agent's recorded turns (tool calls and results): {REPLAY_HINT}" if recorded else ""))
        if msgs[-1]["role"] == "assistant":
            fail(f"the last message is the assistant's: a live request ends with what the model answers; {REPLAY_HINT}")
    elif isinstance(d.get("prompt"), str):
        msgs = [{"role": "user", "content": d["prompt"]}]
    elif isinstance(d.get("question"), str):           # GSM8K
        msgs = [{"role": "user", "content": d["question"]}]
    elif isinstance(d.get("turns"), list) and d["turns"] and isinstance(d["turns"][0], str):   # MT-Bench
        msgs = [{"role": "user", "content": d["turns"][0]}]
    else:
        given = next((k for k in ("prompt", "question", "turns") if k in d), None)
        fail(f"'{given}' must be {'a non-empty list of texts' if given == 'turns' else 'text'}, "
             f"not {shown(d[given], 40)}" if given else "needs 'messages' or 'prompt'")
    ref = d.get("reference", d.get("answer", d.get("canonical_solution")))
    return Request(id=str(rid), messages=msgs, dataset=dataset, reference=ref if isinstance(ref, str) else None)


def builtin_requests(n_conversations: int = 12, seed: int = 0) -> list[Request]:
    """The built-in tool-calling workload (:mod:`oilbird.data.workload`), generated here."""
    from .workload import builtin_request_fields
    return [Request(**f) for f in builtin_request_fields(n_conversations, seed)]


# the non-repetitive sets' files under the data root (data_root)
SHARED_FILES = {"humaneval": "HumanEval.jsonl.gz", "gsm8k": "test.jsonl", "mt-bench": "question.jsonl"}


def load_requests(data: str | Path, limit: int | None = None, seed: int = 0, skip: int = 0) -> list[Request]:
    """Resolve ``data`` (a named set or a path) to an ordered list of requests: the ``limit``
    requests after the first ``skip`` (e.g. to check a setting on requests it was not chosen on)."""
    name = str(data)
    if name == "builtin":
        reqs = builtin_requests(seed=seed)
    elif name == "api-bank":
        reqs = load_api_bank()
    elif name in SHARED_FILES:
        f = default_path(name) / SHARED_FILES[name]
        if not f.is_file():
            raise DataError(f"the {name} set is not there (set $OILBIRD_DATA to the folder that holds {name}/, "
                            f"give --data PATH to a requests file, or use --data builtin)", f)
        reqs = load_jsonl(f, name)
    else:
        p = Path(name).expanduser()
        try:
            kind = "folder" if p.is_dir() else "file" if p.exists() else None
        except OSError as exc:                      # e.g. a name too long for the file system
            raise DataError(f"cannot be opened ({exc.strerror})", name) from None
        if kind == "folder":
            if not api_bank_available(p):
                raise DataError("a folder, but not an API-Bank one (no test-data/level-1-api.json); "
                                "give a .jsonl file of requests", p)
            reqs = load_api_bank(p)
        elif kind == "file":
            reqs = load_jsonl(p)
        else:
            if name in CONVERSATION_SETS:       # recorded conversations: replay's, not a request set
                raise DataError(f"recorded conversations, which are replayed (python -m oilbird replay --data {name}; "
                                f"the app shows a replay's traces with --traces); requests to decode are "
                                f"{', '.join(NAMED_SETS)} or a file", name)
            raise DataError(f"not a known data set ({', '.join(NAMED_SETS)}) and no such file or folder", name)
    if skip:
        if skip < 0 or skip >= len(reqs):
            raise DataError(f"--skip {skip} leaves no requests: '{name}' has {len(reqs)}")
        reqs = reqs[skip:]
    if limit is not None:
        if limit < 1:
            raise DataError(f"the number of requests to read (--limit) must be >= 1, not {limit}")
        reqs = reqs[:limit]
    return reqs


def has_text(messages: list[dict]) -> bool:
    """Does any message hold more than whitespace?"""
    return any(str(m.get("content") or "").strip() for m in messages)


NOT_TEXT = ("the prompt holds bytes that are not UTF-8 text (or a lone UTF-16 surrogate), which no "
            "tokenizer takes: give it as UTF-8")


def encode(tokenizer, request: Request) -> list[int]:
    """Token ids of the request under the model's chat template (generation prompt added).

    A request whose messages hold no text is refused here: the chat template alone would
    still give the model tokens to answer, and it would answer a question nobody asked."""
    if not has_text(request.messages):
        raise PromptError(f"request '{request.id}': the prompt is empty: give a request with some text.")
    if any(not_text(str(m.get("content") or "")) for m in request.messages):
        raise PromptError(f"request '{request.id}': {NOT_TEXT}")
    if getattr(tokenizer, "chat_template", None):
        ids = tokenizer.apply_chat_template(request.messages, add_generation_prompt=True, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return [int(i) for i in ids]
    text = "\n".join(m["content"] for m in request.messages) + "\n"
    return tokenizer(text)["input_ids"]


def encode_requests(lm, requests: list[Request], max_new_tokens: int) -> list[tuple[Request, list[int]]]:
    """Every request with its prompt ids, all checked before any decoding starts: a request
    that is empty or too long stops a run at once and by its id, not hours into it."""
    from ..decoding import check_prompt
    out = []
    for r in requests:
        ids = encode(lm.tokenizer, r)          # names the request when it holds no text
        try:
            check_prompt(lm, ids, max_new_tokens)
        except PromptError as exc:           # (a ContextError stays one)
            raise type(exc)(f"request '{r.id}': {exc}") from None
        out.append((r, ids))
    return out
