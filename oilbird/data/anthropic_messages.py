"""Anthropic's Messages spelling of a recorded conversation, read as the OpenAI spelling that
:mod:`oilbird.data.conversations` validates (its docstring lists every spelling it reads).

Anthropic's logs keep a conversation's system prompt beside its messages (a top-level
``"system"``, a string or text blocks) and put tool use inside a message's ``content`` blocks:

* an assistant message's ``{"type": "tool_use", "id": ..., "name": N, "input": {...}}`` is one
  tool call (its ``input`` re-serialised compactly: the API hands the arguments over parsed);
* a user message's ``{"type": "tool_result", "tool_use_id": ..., "content": ...}`` is one tool
  result, a ``tool`` message of its own (the user's text blocks, if any, follow them as a user
  message);
* ``thinking`` and ``redacted_thinking`` blocks are left out: chat templates do not render them,
  so later turns' prompts never hold them, and the turn is replayed as what it showed (an
  assistant message of thinking alone is no turn at all);
* an assistant message's text blocks are joined and its calls follow them, as the one rendered
  form has them (:mod:`oilbird.data.conversations`): text written after a call moves before it.

A message without such blocks passes through untouched, so one file may mix both spellings.
"""
from __future__ import annotations

from .openai_messages import message_text

BLOCKS = ("tool_use", "tool_result", "thinking", "redacted_thinking")
HIDDEN = ("thinking", "redacted_thinking")


def uses_blocks(m: dict) -> bool:
    """Does message ``m`` spell tool use (or thinking) as Anthropic content blocks?"""
    content = m.get("content")
    return isinstance(content, list) and any(isinstance(b, dict) and b.get("type") in BLOCKS for b in content)


def from_blocks(m: dict, err) -> list[dict]:
    """Message ``m`` with content blocks as OpenAI-style messages (one, or a user message's tool
    results then its text); ``err`` makes the error that names the message."""
    role, blocks = m.get("role"), m["content"]
    if m.get("tool_calls") or m.get("function_call"):
        raise err("tool calls both as 'tool_use' blocks and as 'tool_calls': give the calls once")
    kinds = {b["type"] for b in blocks if isinstance(b, dict) and isinstance(b.get("type"), str)}
    text = message_text(blocks, err, skip=BLOCKS)        # the text blocks, a refused one by its own index
    if role == "assistant":
        if "tool_result" in kinds:
            raise err("an assistant message carries a 'tool_result' block (tool results come in user messages)")
        if all(isinstance(b, dict) and b.get("type") in HIDDEN for b in blocks):
            return []                         # thinking alone: nothing the turn showed, no turn to replay
        calls = [{"id": b.get("id"), "name": b.get("name"), "arguments": b.get("input", {})}
                 for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
        out = {"role": "assistant", "content": text}
        return [out | {"tool_calls": calls}] if calls else [out]
    if role != "user":
        raise err(f"a {role} message carries {'/'.join(sorted(kinds & set(BLOCKS)))} blocks "
                  "(tool use is spelled in assistant and user messages)")
    if "tool_use" in kinds:
        raise err("a user message carries a 'tool_use' block (tool calls come in assistant messages)")
    results = [{"role": "tool", "tool_call_id": b.get("tool_use_id"), "content": b.get("content")}
               for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
    return results + ([{"role": "user", "content": text}] if text else [])
