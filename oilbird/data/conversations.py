"""Recorded multi-turn agent conversations: load, validate, render and tokenize them for replay.

A replay turns every assistant message of a recorded conversation into one request: the
prompt is every message before it, the *recording* is that message itself. This module gets
the conversations from disk into that shape and knows nothing about models beyond
``tokenizer.apply_chat_template`` (and plain ``tokenizer(text)`` for a tokenizer without a
chat template, exactly as :func:`oilbird.data.requests.encode` does); it drafts nothing.

**Input.** JSON Lines, one conversation per line: ``{"id": ..., "model": ..., "messages":
[...]}`` (``id`` optional, default ``STEM-LINE``; ``model`` optional, the model that wrote the
assistant turns; ``tools`` optional, the tool definitions the agent was given). Roles:
``system`` (or ``developer``), ``user``, ``assistant``, ``tool`` (or ``function``). Five spellings
of a tool call are read alike:

* the agent-transcripts form: ``{"name": N, "arguments": {...}, "arguments_json": "..."}``;
* the OpenAI-log form: ``{"id": ..., "type": "function", "function": {"name": N,
  "arguments": "<JSON text>"}}``, answered by ``{"role": "tool", "tool_call_id": ...}``
  (the tool message then takes the call's name);
* OpenAI's older form: ``"function_call": {"name": N, "arguments": "<JSON text>"}`` on the
  assistant message, answered by ``{"role": "function", "name": N}``;
* Anthropic's Messages form: ``{"type": "tool_use", "id": ..., "name": N, "input": {...}}``
  content blocks on the assistant message, answered by ``{"type": "tool_result", "tool_use_id":
  ...}`` blocks on the next user message (each becomes a tool message), with the system prompt
  as a top-level ``"system"`` (:mod:`oilbird.data.anthropic_messages`);
* the Responses API's items: ``{"type": "function_call", "call_id": ..., "name": N,
  "arguments": "<JSON text>"}`` in the messages list (joining the assistant turn just before
  it), answered by ``{"type": "function_call_output", "call_id": ..., "output": ...}``
  (``reasoning`` items are left out).

Argument text is replayed exactly as written, even when the agent wrote broken JSON (the
recording is text; :attr:`ToolCall.arguments` is then None). Other keys of a message are ignored.

``content`` may be a string, ``null`` or a list of text parts (``{"type": "text", "text": ...}``),
and may be left out only on an assistant message that makes calls.
Everything is validated before :func:`load_conversations` returns, so a bad file stops a run
before any model work: a line that is not a conversation, a conversation without assistant
turns (or an assistant turn with no text before it: it has no prompt), a tool call without a
name, two spellings of one call's arguments that disagree, an unknown or missing role, a missing
content, a duplicate id, an empty file. Each is one :class:`ConversationError` naming the file, the line, the conversation
and the message index.

**The one text form** (:func:`render_messages`), handed to whatever chat template the model
has, so the same conversation is the same text for every drafter:

* system and user messages: their text, unchanged; the conversation's ``tools``, if any, are
  appended to its first system message (a system message of their own when it has none) by
  :func:`oilbird.data.openai_messages.render_tools`, one compact JSON object per line inside
  ``<tools>...</tools>``;
* an assistant message: its text, then each tool call on its own lines, Hermes/Qwen style
  (text and calls joined by one newline)::

      <tool_call>
      {"name": "get_booking", "arguments": {"booking_id":"HX7K2P"}}
      </tool_call>

  where the arguments are the argument JSON exactly as the recording wrote it (re-serialised
  compactly only when the source gave a parsed object alone);
* a tool result: role ``tool``, its text wrapped as ``<tool_response>\\n...\\n</tool_response>``.
  A chat template that raises on role ``tool`` gets the same wrapped text as role ``user``
  instead (:func:`encode_conversation` retries once per conversation).

**The model's own form** (``tool_calls="template"``, ``replay --tool-calls template``): the same
conversation handed to the template as structured tool calls and ``tools=``, so a model whose
template spells calls its own way is replayed on the tokens it would write
(:mod:`oilbird.data.template_form`; a template that writes no tool calls is refused).

**Tokens** (:func:`encode_conversation`): turn k's ``prompt_ids`` are the template over the
rendered messages before it with the generation prompt; its ``recording_ids`` are the tokens the
template over the messages up to and including it adds after that prompt, cut after the last
end-of-turn token (ChatML: ``<|im_end|>``, which is also SmolLM2's EOS; the ``"\\n"`` the
template writes after it belongs to the next prompt). The prompt must be a true token prefix of
the longer rendering, else the turn is refused by name. Whatever the template adds on its own
(SmolLM2's adds a default system message when a conversation has none) is part of every prompt. Without a chat template the messages'
texts are joined by newlines (as for live requests) and the recording is the message's tokens
followed by the tokenizer's EOS; its next prompt then has a newline where the recording has
EOS, so such turns never extend the previous one.
"""
from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..jsonio import loads, read_text, undecodable
from .anthropic_messages import from_blocks, uses_blocks
from .openai_messages import (ALIASES, ITEMS, ROLES, ToolCall, is_item, message_text, read_item, read_message,
                              with_tools)
from .overlaps import fold_overlaps
from .piece_tokenizer import PieceTokenizer, ids_of
from .template_form import FORMS, check_rendered, check_template, template_form
from .requests import (CONVERSATION_SETS, ConversationError, DataError, Request, data_root, encode, has_text,
                       none_loads, refusal)

NAMED = CONVERSATION_SETS
TRANSCRIPTS_FILE = Path("agent-transcripts") / "tau-airline.jsonl"
BUILTIN_DEFAULT_N = 24
# end-of-turn tokens of common chat templates, looked up besides the tokenizer's EOS
_END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>", "<|eot|>")


@dataclass(frozen=True)
class Conversation:
    """One recorded conversation. ``messages`` are normalised: ``{"role", "content": str}``,
    plus ``"tool_calls": tuple[ToolCall, ...]`` on every assistant message and an optional
    ``"name"`` on tool messages. ``source`` says where it was read (file and line), for errors;
    ``line`` is that line's number in a JSONL file (None elsewhere)."""
    id: str
    model: str | None
    messages: tuple[dict, ...]
    source: str = field(default="", compare=False)
    line: int | None = field(default=None, compare=False)
    tools: tuple = field(default=(), compare=False)   # the tool definitions, as given (also in the system text)

    @property
    def assistant_indices(self) -> list[int]:
        return [i for i, m in enumerate(self.messages) if m["role"] == "assistant"]


@dataclass(frozen=True)
class ReplayTurn:
    """One assistant turn as a replay request (token ids of the model's tokenizer)."""
    conversation: str
    index: int               # k-th assistant turn of the conversation, 0-based
    message_index: int       # its position in Conversation.messages
    prompt_ids: list[int]
    recording_ids: list[int]
    extends_previous: bool   # prompt_ids starts with the previous turn's prompt_ids + recording_ids

    @property
    def id(self) -> str:
        return f"{self.conversation}#{self.index}"

    @property
    def length(self) -> int:
        """Tokens the model must hold to replay this turn: prompt plus recording."""
        return len(self.prompt_ids) + len(self.recording_ids)


# ---------------------------------------------------------------- loading and validation

def _where(source: str, conv_id: str | None = None, message: int | None = None) -> str:
    """Where a conversation's problem lies, the prefix of its error: ``file.jsonl:3: conversation
    'c1' message 5`` (a file's line spelled as :class:`~oilbird.errors.InputError` spells it)."""
    out = source
    if conv_id is not None:
        out += f": conversation '{conv_id}'"
    if message is not None:
        out += f" message {message}"
    return out


def conversation_from_obj(d, source: str, default_id: str) -> Conversation:
    """Validate and normalise one conversation object; ``source`` names where it came from
    (e.g. ``"file.jsonl:3"``, as :class:`~oilbird.errors.InputError` names a line) in every error."""
    if not isinstance(d, dict):
        raise ConversationError(f"{source}: expected a JSON object (a conversation), got {type(d).__name__}")
    if d.get("kind") in ("request", "cycle"):
        raise ConversationError(f"{source}: a trace record, not a conversation (open traces in the app, or report)")
    raw_id = d.get("id", default_id)
    if not isinstance(raw_id, (str, int)) or isinstance(raw_id, bool) or str(raw_id) == "":
        raise ConversationError(f"{source}: 'id' must be a non-empty string")
    cid = str(raw_id)
    model = d.get("model")
    if model is not None and not isinstance(model, str):
        raise ConversationError(f"{_where(source, cid)}: 'model' must be a string")
    msgs = d.get("messages")
    if not isinstance(msgs, list) or not msgs:
        what = (" (this is a request, a 'prompt' to answer: bench and trace --data; replay reads recorded turns)"
                if "prompt" in d and msgs is None else "")
        raise ConversationError(f"{_where(source, cid)}: needs 'messages', a non-empty list{what}")
    out: list[dict] = []
    for key in ("system", "instructions"):   # Anthropic's and the Responses API's system prompt, beside the messages
        if d.get(key) is not None:
            text = message_text(d[key], lambda problem: ConversationError(f"{_where(source, cid)}: {problem}"), f"'{key}'")
            if text:
                out.append({"role": "system", "content": text})
    calls_by_id: dict[str, tuple[str, int]] = {}
    shown = None                              # the last item before this one that is not reasoning
    for i, raw in enumerate(msgs):
        def err(problem, _i=i):
            return ConversationError(f"{_where(source, cid, _i)}: {problem}")
        if not isinstance(raw, dict):
            raise err("not a JSON object")
        if is_item(raw):                       # the Responses API's call, call output or reasoning
            read_item(raw, err, out, calls_by_id, shown)
            shown = shown if raw["type"] == "reasoning" else raw
            continue
        shown = raw
        if "role" not in raw and "type" in raw:
            raise err(f"an item of type {raw['type']!r} without a role: replay reads messages (with a role) "
                      f"and the Responses API's {', '.join(ITEMS)} items")
        if "role" not in raw:
            raise err(f"a message without 'role' (one of {', '.join(ROLES + tuple(ALIASES))})")
        role = raw["role"]
        if not isinstance(role, str) or ALIASES.get(role, role) not in ROLES:
            raise err(f"unknown role {raw.get('role')!r} (expected one of {', '.join(ROLES + tuple(ALIASES))})")
        for m in from_blocks(raw, err) if uses_blocks(raw) else (raw,):   # Anthropic's blocks: one or more
            out.append(read_message(m, err, out, calls_by_id))
    # an assistant message that showed nothing (no text, no call: "" or null content, an empty block
    # list) is no turn to replay, as a message of thinking alone is none
    out = [m for m in out if not (m["role"] == "assistant" and not m["content"].strip() and not m.get("tool_calls"))]
    if not any(m["role"] == "assistant" for m in out):
        raise ConversationError(f"{_where(source, cid)}: no assistant turn with text or a tool call, nothing to replay")
    tools = d.get("tools")
    if tools is not None:
        if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
            raise ConversationError(f"{_where(source, cid)}: 'tools' must be a list of JSON objects "
                                    "(the tool definitions the agent was given)")
        if tools:
            out = with_tools(out, tools)
    return Conversation(id=cid, model=model, messages=tuple(out), source=source, tools=tuple(tools or ()))


def read_jsonl(path: str | Path, empty_ok: bool = False, skipped: list[dict] | None = None) -> list[Conversation]:
    """Every conversation of a ``.jsonl`` (or ``.jsonl.gz``) file, validated, in file order;
    any bytes at all either load or raise :class:`ConversationError` naming the file and line
    (read through :mod:`oilbird.jsonio`). With a ``skipped`` list, a bad line (or a repeated
    id) is appended to it instead, as ``{"file", "line", "error"}`` (the one-line message), and
    the other lines load; a file that holds no good line still raises."""
    p = Path(path)
    try:
        text, cut = read_text(p, ConversationError, per_line=True), None
    except ConversationError as exc:          # a damaged .gz: its whole lines before the damage load
        if getattr(exc, "partial", None) is None:
            raise
        text, cut = exc.partial, exc
    out: list[Conversation] = []
    seen = _SeenIds()
    bad: list[tuple[int, ConversationError]] = []   # every bad line is checked, the first one told
    stem = re.sub(r"\.jsonl(\.gz)?$", "", p.name)   # default ids: log.2024-01-01-3, not log-3
    for no, line in enumerate(text.split("\n"), start=1):
        if not line.strip(" \t\r"):
            continue
        source = f"{p}:{no}"                          # as every InputError names a file's line
        try:
            if undecodable(line):
                raise ConversationError("not UTF-8 text", p, no)
            conv = conversation_from_obj(loads(line, ConversationError, p, no), source, default_id=f"{stem}-{no}")
            seen.check(conv)
        except ConversationError as exc:
            bad.append((no, exc))
            continue
        seen.add(conv, f"on line {no}")
        out.append(replace(conv, line=no))
    if cut is not None:
        bad.append((cut.line, cut))
    if bad and skipped is not None and (out or empty_ok):      # empty_ok: a folder's file, judged with the rest
        skipped += [{"file": str(p), "line": no, "error": str(exc)} for no, exc in bad]
        bad = []
    if bad and skipped is not None:           # and nothing good in the file: say so, as a folder does
        raise none_loads("the file", [str(exc) for _, exc in bad])
    if bad:
        first, more = bad[0][1], [no for no, _ in bad[1:]]
        if more:
            listed = ", ".join(map(str, more[:10])) + (", ..." if len(more) > 10 else "")
            first = ConversationError(f"{first.reason} (and {len(more)} more bad line{'s' if len(more) > 1 else ''}: "
                                      f"{listed})", first.path, first.line)
        first.skippable = bool(out)               # the other lines would load without the bad ones
        raise first
    if not out and not empty_ok:
        raise ConversationError(f"'{p}': no conversations in file (expected JSON lines, one "
                                "{\"messages\": [...]} object per line)")
    return out


class _SeenIds:
    """The conversation ids read so far (of a file, or of a folder's files), each with where and
    what each line holding it said. A line may share its id with earlier ones only as one session
    logged a line per call: each line's messages a proper start of the other's, or the other way
    round (the fold then replays the longest once, :func:`oilbird.data.overlaps.fold_overlaps`); a
    line repeated whole, or another conversation under the same id, is refused."""

    def __init__(self) -> None:
        self._lines: dict[str, list[tuple[str, tuple]]] = {}     # id -> (where, messages) per line

    def check(self, conv: Conversation) -> None:
        def prefix(a, b):
            return len(a) < len(b) and b[:len(a)] == a
        earlier = self._lines.get(conv.id, [])
        if not all(prefix(m, conv.messages) or prefix(conv.messages, m) for _, m in earlier):
            raise ConversationError(f"{_where(conv.source, conv.id)}: id already used {earlier[0][0]}; give "
                                    "every conversation its own id (lines of one id are one session only where "
                                    "each line's messages start the next's)")

    def add(self, conv: Conversation, where: str) -> None:
        self._lines.setdefault(conv.id, []).append((where, conv.messages))


def _conversation_files(folder: Path) -> list[Path]:
    """The ``*.jsonl`` / ``*.jsonl.gz`` files of ``folder`` in name order when it holds
    conversations, else [] (an API-Bank dialogue folder). Decided by the first non-blank line
    of the files: an API-Bank utterance (``{"role": "User" | "AI" | "API", ...}``) makes it a
    dialogue folder; anything else (a conversation, or a line no reader takes, which the
    conversation reader then refuses by file and line) a folder of conversations."""
    files = sorted(f for f in folder.iterdir() if f.is_file() and f.name.endswith((".jsonl", ".jsonl.gz")))
    for f in files:
        opener = gzip.open if f.name.endswith(".gz") else open
        try:
            with opener(f, "rt", encoding="utf-8", errors="replace") as fh:
                line = next((x for x in fh if x.strip()), None)
        except OSError:
            return files             # unreadable: the conversation reader says so, by name
        if line is None:
            continue                 # an empty file says nothing: look at the next one
        try:
            first = json.loads(line)
        except ValueError:
            return files
        utterance = isinstance(first, dict) and "messages" not in first and first.get("role") in ("User", "AI", "API")
        return [] if utterance else files
    return []


def _read_folder(files: list[Path], skipped: list[dict] | None = None) -> list[Conversation]:
    """Every conversation of every file, in file then line order; ids unique across files. Every
    file is read before a bad line stops the load, so the refusal knows whether the others
    would load (``skippable``); with ``skipped``, as :func:`read_jsonl`'s, for repeated ids too."""
    out: list[Conversation] = []
    seen = _SeenIds()
    bad: list[dict] = []
    for f in files:
        for conv in read_jsonl(f, empty_ok=True, skipped=bad):     # an empty file in a folder is skipped
            try:
                seen.check(conv)
            except ConversationError as exc:
                bad.append({"file": str(f), "line": conv.line, "error": str(exc)})
                continue
            seen.add(conv, f"in {conv.source}")
            out.append(conv)
    if bad and (skipped is None or not out):
        raise refusal([b["error"] for b in bad], bool(out), "line", "the folder",
                      f"{len(files)} file{'s' if len(files) > 1 else ''}")
    if skipped is not None:
        skipped += bad
    return out


def load_conversations(data: str | Path, limit: int | None = None, skipped: list[dict] | None = None,
                       folded: list[dict] | None = None) -> list[Conversation]:
    """Resolve ``data`` to validated conversations, in order; ``limit`` counts conversations.

    ``"agent-transcripts"``: the recorded gpt-4o airline conversations in the shared data
    (``data_root()/agent-transcripts/tau-airline.jsonl``; never copied into this repository).
    ``"api-bank-dialogues"``: API-Bank's 214 recorded level-1 dialogues, one conversation each
    (:mod:`oilbird.data.api_bank_dialogues`; a folder path reads that folder's dialogues alike).
    ``"agent-builtin"``: the scripted agent of :mod:`oilbird.data.agent_workload` (``limit``
    conversations, default 24; the first n are the same whatever the limit);
    ``"agent-builtin-long"`` the same agent with a ~6,000-token policy prompt and several
    customers per conversation (7,100-12,700 tokens each). Anything else: a
    path to a ``.jsonl`` / ``.jsonl.gz`` file, or to a folder of them (read in name order; a
    folder whose lines are not conversations is read as API-Bank dialogues). A file is
    validated whole, whatever the limit; with a ``skipped`` list a file's bad lines are listed
    there and left out (:func:`read_jsonl`) instead of stopping the load. A conversation another
    one holds whole (a log with a line per call) is left out before the limit counts, and listed
    in ``folded`` (:func:`oilbird.data.overlaps.fold_overlaps`)."""
    if limit is not None and limit < 1:
        raise DataError(f"the number of conversations to read (--limit) must be >= 1, not {limit}")
    name = str(data)
    if name in ("agent-builtin", "agent-builtin-long"):
        from .agent_workload import generate_conversations
        objs = generate_conversations(n=limit or BUILTIN_DEFAULT_N, long=name == "agent-builtin-long")
        convs = [conversation_from_obj(d, f"{name} conversation {k}", f"{name}-{k}")
                 for k, d in enumerate(objs)]
    elif name == "agent-transcripts":
        p = data_root() / TRANSCRIPTS_FILE
        if not p.is_file():
            raise DataError(f"'{p}': the recorded agent transcripts are not there (set $OILBIRD_DATA "
                            "to the folder that holds agent-transcripts/, or use --data agent-builtin)")
        convs = read_jsonl(p, skipped=skipped)
    elif Path(name).expanduser().is_dir() and (files := _conversation_files(Path(name).expanduser())):
        convs = _read_folder(files, skipped)
    elif name == "api-bank-dialogues" or Path(name).expanduser().is_dir():
        from .api_bank_dialogues import load_dialogues
        convs = [conversation_from_obj(obj, source, obj["id"]) for obj, source in
                 load_dialogues(None if name == "api-bank-dialogues" else Path(name).expanduser(), skipped)]
    else:
        p = Path(name).expanduser()
        if not p.is_file():
            raise DataError(f"'{name}': not a known conversation set ({', '.join(NAMED)}) and no such file")
        convs = read_jsonl(p, skipped=skipped)
    convs, gone = fold_overlaps(convs)
    convs = convs[:limit] if limit is not None else convs
    if folded is not None:                    # those a conversation within the limit replays
        ids = {c.id for c in convs}
        folded += [f for f in gone if f["into"] in ids]
    return convs


# ---------------------------------------------------------------- the one text form

def render_tool_call(call: ToolCall) -> str:
    return (f"<tool_call>\n{{\"name\": {json.dumps(call.name, ensure_ascii=False)}, "
            f"\"arguments\": {call.arguments_json}}}\n</tool_call>")


def render_messages(messages, tool_role: str = "tool") -> list[dict]:
    """Normalised messages -> ``[{"role", "content"}]`` in the documented text form (module
    docstring). ``tool_role="user"`` is the fallback for templates that refuse role ``tool``."""
    out = []
    for m in messages:
        role, text = m["role"], m["content"]
        if role == "assistant" and m.get("tool_calls"):
            text = "\n".join(([text] if text else []) + [render_tool_call(c) for c in m["tool_calls"]])
        elif role == "tool":
            role, text = tool_role, f"<tool_response>\n{text}\n</tool_response>"
        out.append({"role": role, "content": text})
    return out


# ---------------------------------------------------------------- tokens

def end_of_turn_ids(tokenizer) -> set[int]:
    """The tokenizer's EOS id(s) plus the common end-of-turn tokens it knows as single tokens."""
    ids = set()
    eos = getattr(tokenizer, "eos_token_id", None)
    if eos is not None:
        ids |= set(eos) if isinstance(eos, (list, tuple)) else {int(eos)}
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and callable(getattr(backend, "token_to_id", None)):     # no whole-vocab copy
        found = (backend.token_to_id(t) for t in _END_OF_TURN)
        return ids | {int(i) for i in found if i is not None}
    vocab = tokenizer.get_vocab() if hasattr(tokenizer, "get_vocab") else {}
    ids |= {vocab[t] for t in _END_OF_TURN if t in vocab}
    return ids


def _template_ids(tokenizer, rendered: list[dict], generation: bool, kw: dict | None = None) -> list[int]:
    return ids_of(tokenizer.apply_chat_template(rendered, add_generation_prompt=generation, tokenize=True, **(kw or {})))


def _form(tokenizer, conv: Conversation, tool_calls: str) -> tuple[list[dict], list[int], dict]:
    """The conversation as the template gets it: (messages, ``pos`` with messages[:pos[i]] the
    ones before the conversation's message i, keyword arguments for the template). ``tool_calls``:
    ``"text"``, the documented text form; ``"template"``, the model's own spelling of tool calls
    (:mod:`oilbird.data.template_form`)."""
    if tool_calls == "template":
        form = template_form(conv, check_template(tokenizer))
        check_rendered(tokenizer, form, _where(conv.source or "conversation", conv.id))
        return form.messages, form.pos, form.kwargs()
    if tool_calls != "text":
        raise ValueError(f"tool_calls must be one of {', '.join(FORMS)}, not {tool_calls!r}")
    rendered = _render_for(tokenizer, conv)
    return rendered, list(range(len(rendered))), {}


def _render_for(tokenizer, conv: Conversation) -> list[dict]:
    """The rendered conversation, with role ``user`` for tool results if the template refuses
    role ``tool`` (tried on the whole conversation, once)."""
    rendered = render_messages(conv.messages)
    if not getattr(tokenizer, "chat_template", None) or not any(m["role"] == "tool" for m in conv.messages):
        return rendered
    try:
        _template_ids(tokenizer, rendered, False)
        return rendered
    except Exception as first:                      # the template's own error type varies
        fallback = render_messages(conv.messages, tool_role="user")
        try:
            _template_ids(tokenizer, fallback, False)
        except Exception as exc:
            raise ConversationError(f"{_where(conv.source or 'conversation', conv.id)}: the chat template "
                                    f"refuses it with role 'tool' ({first}) and with role 'user' ({exc})") from None
        return fallback


def encode_conversation(tokenizer, conv: Conversation, end_ids: set[int] | None = None,
                        tool_calls: str = "text") -> list[ReplayTurn]:
    """One :class:`ReplayTurn` per assistant message, in order (see the module docstring).

    ``end_ids``: the end-of-turn token ids (default :func:`end_of_turn_ids`). ``tool_calls``:
    ``"text"`` (the documented text form, default) or ``"template"`` (the chat template's own
    spelling of tool calls and tool definitions; :mod:`oilbird.data.template_form`).

    Linear in the conversation's tokens for a fast Hugging Face tokenizer with a chat template:
    each turn's template is rendered as text, and texts are tokenized piece by piece between
    added tokens, each distinct piece once (:class:`PieceTokenizer`), instead of re-tokenizing
    the whole prefix for every message. The text up to the last turn is also tokenized
    directly (once) and must give the same ids as its pieces; if not (and for any other
    tokenizer), every turn is tokenized whole as before (:func:`encode_conversation_per_turn`,
    the reference this function is tested against). Either way each prompt is checked to be a
    token prefix of the rendering with its turn added."""
    if not PieceTokenizer.usable(tokenizer):
        return encode_conversation_per_turn(tokenizer, conv, end_ids, tool_calls)
    rendered, pos, kw = _form(tokenizer, conv, tool_calls)
    texts = []
    try:
        for i in conv.assistant_indices:
            if not has_text(rendered[:pos[i]]):
                raise ValueError("a prompt without text")
            texts.append((tokenizer.apply_chat_template(rendered[:pos[i]], add_generation_prompt=True,
                                                        tokenize=False, **kw),
                          tokenizer.apply_chat_template(rendered[:pos[i] + 1], tokenize=False, **kw)))
    except Exception:                       # the template's own error type varies
        return encode_conversation_per_turn(tokenizer, conv, end_ids, tool_calls)   # it names the turn and the error
    if not all(isinstance(x, str) for pair in texts for x in pair):
        return encode_conversation_per_turn(tokenizer, conv, end_ids, tool_calls)
    pieces = PieceTokenizer(tokenizer)
    whole = texts[-1][1]                   # the last turn's rendering holds every earlier text but prompts' ends
    if pieces.learn([x for pair in texts for x in pair], whole=[whole]) != [pieces(whole)]:
        return encode_conversation_per_turn(tokenizer, conv, end_ids, tool_calls)
    ends = set(end_ids) if end_ids is not None else end_of_turn_ids(tokenizer)
    turns: list[ReplayTurn] = []
    for k, (i, (prompt, full)) in enumerate(zip(conv.assistant_indices, texts)):
        turns.append(_turn(conv, k, i, pieces(prompt), pieces(full), ends, True, turns, tokenizer))
    return turns


def encode_conversation_per_turn(tokenizer, conv: Conversation, end_ids: set[int] | None = None,
                                 tool_calls: str = "text") -> list[ReplayTurn]:
    """:func:`encode_conversation` by tokenizing every turn's whole prefix (quadratic in the
    conversation's length): any tokenizer, with or without a chat template."""
    rendered, pos, kw = _form(tokenizer, conv, tool_calls)
    templated = bool(getattr(tokenizer, "chat_template", None))
    ends = set(end_ids) if end_ids is not None else end_of_turn_ids(tokenizer)
    turns: list[ReplayTurn] = []
    way_out = "; --tool-calls text renders it in the project's text form" if tool_calls == "template" else ""
    for k, i in enumerate(conv.assistant_indices):
        before = rendered[:pos[i]]
        try:
            if kw and not has_text(before):
                raise ValueError("the prompt is empty")
            prompt = (_template_ids(tokenizer, before, True, kw) if kw else
                      encode(tokenizer, Request(id=f"{conv.id}#{k}", messages=before)))
        except Exception as exc:                     # the template's own error type varies
            raise ConversationError(f"{_turn_where(conv, k, i)}: cannot encode the prompt ({exc}){way_out}") from None
        try:
            if templated:
                full = _template_ids(tokenizer, rendered[:pos[i] + 1], False, kw)
            else:                                     # as oilbird.data.requests.encode, without the last "\n"
                full = ids_of(tokenizer("\n".join(m["content"] for m in rendered[:pos[i] + 1])))
        except Exception as exc:
            raise ConversationError(f"{_turn_where(conv, k, i)}: cannot encode the turn ({exc}){way_out}") from None
        turns.append(_turn(conv, k, i, prompt, full, ends, templated, turns, tokenizer))
    return turns


def _turn_where(conv: Conversation, k: int, i: int) -> str:
    return f"{_where(conv.source or 'conversation', conv.id, i)} (assistant turn {k})"


def _turn(conv: Conversation, k: int, i: int, prompt: list[int], full: list[int], ends: set[int],
          templated: bool, turns: list[ReplayTurn], tokenizer) -> ReplayTurn:
    """Turn k (message i) from its prompt ids and the ids with the turn added: the prefix
    property checked, the recording cut after its end-of-turn token."""
    where = _turn_where(conv, k, i)
    if full[:len(prompt)] != prompt:
        at = next((j for j, (a, b) in enumerate(zip(prompt, full)) if a != b), min(len(prompt), len(full)))
        text = conv.messages[i].get("content", "") if 0 <= i < len(conv.messages) else ""
        why = ("the turn's text starts with whitespace, which the tokenizer joins with the template's own "
               "before it" if text[:1].isspace() else
               "this chat template or tokenizer renders earlier messages differently once a reply follows")
        raise ConversationError(
            f"{where}: the prompt's tokens are not a prefix of the tokens with the turn added "
            f"(they differ at token {at} of {len(prompt)}): {why}, so the turn cannot be replayed")
    added = full[len(prompt):]
    if templated:
        last = max((j for j, t in enumerate(added) if t in ends), default=None)
        if last is None:
            raise ConversationError(f"{where}: the chat template adds no end-of-turn token after the "
                                    f"turn (looked for ids {sorted(ends)}); give end_ids")
        recording = added[:last + 1]
    else:
        eos = getattr(tokenizer, "eos_token_id", None)
        if eos is None:
            raise ConversationError(f"{where}: the tokenizer has no EOS token to end the recording")
        recording = added + [int(eos[0] if isinstance(eos, (list, tuple)) else eos)]
    prev = turns[-1] if turns else None
    extends = prev is not None and prompt[:prev.length] == prev.prompt_ids + prev.recording_ids
    return ReplayTurn(conv.id, k, i, prompt, recording, extends)


# ---------------------------------------------------------------- how much the agent copies

def _leaves(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, list):
        for v in value:
            yield from _leaves(v)
    elif isinstance(value, str):
        yield value
    elif value is not None and not isinstance(value, bool):
        yield json.dumps(value)


def copied_arguments(conv: Conversation) -> tuple[int, int]:
    """(argument values found verbatim earlier in the conversation, argument values): over every
    string and number inside every tool call's arguments, whether its text occurs in some earlier
    message as rendered (tool results, the user's words, earlier calls, the system prompt)."""
    rendered = render_messages(conv.messages)
    copied = total = 0
    for i in conv.assistant_indices:
        before = "\n".join(m["content"] for m in rendered[:i])
        for call in conv.messages[i]["tool_calls"]:
            for leaf in _leaves(call.arguments):
                total += 1
                copied += bool(leaf) and leaf in before
    return copied, total
