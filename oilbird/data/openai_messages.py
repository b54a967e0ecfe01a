"""The spellings of one OpenAI-style chat message that a recording may use, read into the one
normalised form :mod:`oilbird.data.conversations` validates and renders (its docstring lists
them): a message's text (a string, null, or text parts), one tool call in any of its spellings,
the Responses API's items that stand without a role (a call, its output), and the
conversation's tool definitions put into its system prompt.

``err`` is the caller's error factory (a message -> a ConversationError that already names the
file, line, conversation and message), so every refusal here says where it happened.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from ..errors import shown
from ..jsonio import loads


ROLES = ("system", "user", "assistant", "tool")
# other spellings read as one of ROLES: OpenAI's newer name for the system message, and the
# result of a legacy ``function_call`` (its ``name`` says which function answered)
ALIASES = {"developer": "system", "function": "tool"}


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments_json: str      # the argument JSON text as recorded (compact re-serialisation if none)

    @property
    def arguments(self) -> dict | None:
        """The arguments parsed, or None when the recorded text is not a JSON object (an agent
        that wrote broken JSON: the text is replayed as written all the same)."""
        try:
            parsed = loads(self.arguments_json)     # (a lone surrogate in it, no text, is broken JSON too)
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None


# the content-part types of the chat APIs: a list of these is a message's parts (only the text
# ones replay); a tool result's list of anything else is data logged parsed (its JSON is the text)
TEXT_PARTS = ("text", "input_text", "output_text")
PARTS = TEXT_PARTS + ("image", "image_url", "input_image", "input_audio", "audio", "file", "input_file",
                      "document", "refusal")


def message_text(content, err, what: str = "'content'", skip: tuple = ()) -> str:
    """A message's text: a string, null (-> ""), or a list of text parts joined. ``what``
    names the field in the error (Anthropic's top-level ``'system'`` is read the same way);
    parts whose type is in ``skip`` are passed over (Anthropic's tool and thinking blocks, read
    apart), so a refused part is named by its own index."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for j, part in enumerate(content):
            if isinstance(part, dict) and part.get("type") in skip:
                continue
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str) and \
                    part.get("type", "text") in TEXT_PARTS:
                parts.append(part["text"])
            else:
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise err(f"content part {j} is not text (type {kind!r}); only text can be replayed")
        return "".join(parts)
    raise err(f"{what} must be a string, null or a list of text parts, not {type(content).__name__}")


def read_tool_call(tc, j: int, err) -> tuple[ToolCall, str | None]:
    """One tool call in either spelling -> (ToolCall, its call id or None)."""
    if not isinstance(tc, dict):
        raise err(f"tool call {j} is not a JSON object")
    fn = tc.get("function") if isinstance(tc.get("function"), dict) else tc
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        raise err(f"tool call {j} has no function name")
    args = fn.get("arguments", {})
    text = fn.get("arguments_json", tc.get("arguments_json"))
    if isinstance(text, str):
        parsed = ToolCall(name, text).arguments
        if isinstance(args, dict) and "arguments" in fn and parsed is None:
            raise err(f"tool call {j} ({name}): 'arguments_json' is not a JSON object's text, "
                      "beside a parsed 'arguments': which one was recorded?")
        if isinstance(args, dict) and "arguments" in fn and args != parsed:
            raise err(f"tool call {j} ({name}): 'arguments' and 'arguments_json' disagree")
    elif isinstance(args, str):
        text = args          # as the agent wrote it, parsed or not: the recording is text
    elif isinstance(args, dict):
        text = json.dumps(args, separators=(",", ":"), ensure_ascii=False)
    else:
        raise err(f"tool call {j} ({name}): arguments must be a JSON object or its text, "
                  f"not {type(args).__name__}")
    call_id = tc.get("id")
    return ToolCall(name, text), (str(call_id) if call_id is not None else None)


def _calls_before(messages: list[dict]) -> int:
    return sum(len(x.get("tool_calls", ())) for x in messages)


def read_message(m: dict, err, before: list[dict], calls_by_id: dict[str, tuple[str, int]]) -> dict:
    """One message in any OpenAI spelling (its role one of :data:`ROLES` or :data:`ALIASES`) as
    the normalised ``{"role", "content": str}``, plus ``"tool_calls"`` (a tuple of
    :class:`ToolCall`) on an assistant message, and on a tool result ``"name"`` where known and
    ``"answers"``, the 0-based index among the conversation's calls of the call it answers, where
    its call id says (ids differ between spellings of one log; the index does not). ``before``: the
    normalised messages before it; ``calls_by_id``: every earlier call's (name, index) by its
    call id (this message's calls are added)."""
    role = ALIASES.get(m.get("role"), m.get("role"))
    if "content" not in m and not m.get("tool_calls") and m.get("function_call") is None:
        # OpenAI's spelling leaves it out only beside calls; "" or null says "no text" on purpose
        raise err(f"a message of role {shown(m.get('role'))} without 'content' "
                  "(give \"\" or null for one with no text)")
    content = m.get("content")
    if role == "tool" and content is not None and not isinstance(content, str) and not (
            isinstance(content, list) and content and all(isinstance(p, dict) and p.get("type") in PARTS
                                                          for p in content)):
        content = json.dumps(content, separators=(",", ":"), ensure_ascii=False)   # a result logged parsed
    msg = {"role": role, "content": message_text(content, err)}
    calls = m.get("tool_calls") or []
    if m.get("function_call") is not None:         # OpenAI's older spelling of one call
        if role != "assistant":
            raise err(f"a {m.get('role')} message carries 'function_call' (only assistant messages may)")
        if calls:
            raise err("both 'tool_calls' and 'function_call': give the calls once")
        if not isinstance(m["function_call"], dict):
            raise err("'function_call' must be a JSON object ({\"name\": ..., \"arguments\": ...})")
        calls = [m["function_call"]]
    if role == "assistant":
        if not isinstance(calls, list):
            raise err("'tool_calls' must be a list")
        parsed = [read_tool_call(tc, j, err) for j, tc in enumerate(calls)]
        first = _calls_before(before)
        for j, (call, call_id) in enumerate(parsed):
            if call_id is not None:
                calls_by_id[call_id] = (call.name, first + j)
        msg["tool_calls"] = tuple(call for call, _ in parsed)
        if not any(x["content"].strip() or x.get("tool_calls") or x["role"] == "tool" for x in before):
            raise err("nothing with text comes before this assistant turn: it has no prompt to replay "
                      "(put a system or user message before it)")
    elif calls:
        raise err(f"a {role} message carries 'tool_calls' (only assistant messages may)")
    if role == "tool":
        name = m.get("name")
        ref = m.get("tool_call_id")
        if ref is not None:
            if str(ref) not in calls_by_id:
                raise err(f"tool result answers tool_call_id {ref!r}, which no earlier "
                          "assistant turn made")
            name = name or calls_by_id[str(ref)][0]
            msg["answers"] = calls_by_id[str(ref)][1]
        if name is not None:
            if not isinstance(name, str):
                raise err("'name' must be a string")
            msg["name"] = name
    return msg


# items of OpenAI's Responses API that stand in a conversation without a role
ITEMS = ("function_call", "function_call_output", "reasoning")


def is_item(m: dict) -> bool:
    """Is ``m`` a Responses API item without a role (a call, a call's output, reasoning)?"""
    return "role" not in m and m.get("type") in ITEMS


def read_item(m: dict, err, out: list[dict], calls_by_id: dict[str, tuple[str, int]], previous) -> None:
    """Add Responses API item ``m`` to the normalised messages ``out``: a ``function_call``
    joins the assistant turn just before it (an assistant message or another call, ``previous``
    being the raw item before it) or opens one of its own; a ``function_call_output`` is a tool
    result; ``reasoning`` is left out (no chat template renders it, as Anthropic's thinking)."""
    kind = m["type"]
    if kind == "function_call":
        call = {"id": m.get("call_id"), "name": m.get("name"), "arguments": m.get("arguments", {})}
        joins = out and out[-1]["role"] == "assistant" and isinstance(previous, dict) and (
            previous.get("role") == "assistant" or previous.get("type") == "function_call")
        if joins:
            tc, call_id = read_tool_call(call, len(out[-1]["tool_calls"]), err)
            out[-1] = out[-1] | {"tool_calls": out[-1]["tool_calls"] + (tc,)}
            if call_id is not None:
                calls_by_id[call_id] = (tc.name, _calls_before(out) - 1)
        else:
            out.append(read_message({"role": "assistant", "content": None, "tool_calls": [call]}, err, out,
                                    calls_by_id))
    elif kind == "function_call_output":
        out.append(read_message({"role": "tool", "tool_call_id": m.get("call_id"), "content": m.get("output")},
                                err, out, calls_by_id))


def render_tools(tools: list[dict]) -> str:
    """A conversation's top-level ``tools`` (the definitions the agent was given) as the text a
    serving template would put in the system prompt: one compact JSON object per line."""
    lines = "\n".join(json.dumps(t, separators=(",", ":"), ensure_ascii=False) for t in tools)
    return f"# Tools\nThe functions you can call, one JSON object per line:\n<tools>\n{lines}\n</tools>"


def with_tools(messages: list[dict], tools: list[dict]) -> list[dict]:
    """The tool definitions appended to the first system message (after a blank line), or a
    system message of their own first when there is none."""
    block = render_tools(tools)
    for i, m in enumerate(messages):
        if m["role"] == "system":
            text = f"{m['content']}\n\n{block}" if m["content"] else block
            return messages[:i] + [{**m, "content": text}] + messages[i + 1:]
    return [{"role": "system", "content": block}] + messages
