"""A recorded conversation in the model's own tool-call format (``replay --tool-calls template``).

The default text form (:func:`oilbird.data.conversations.render_messages`) writes every tool
call Hermes/Qwen style as plain text, so the same conversation is the same text for every model
and every drafter. A serving engineer replaying their own traffic on their own model wants the
tokens *that* model would have produced instead: its chat template's own spelling of a tool call
(Llama 3.1's JSON, Mistral's ``[TOOL_CALLS]``, Qwen's ``<tool_call>``...) and of the tool
definitions. This module hands the template the conversation in Hugging Face's structured form
and lets the template spell it:

* an assistant message: ``{"role": "assistant", "content": text, "tool_calls": [{"id",
  "type": "function", "function": {"name", "arguments"}}]}``, the arguments parsed (the form
  templates expect; a template re-serialises them in its own spacing) or, when the agent wrote
  broken JSON, the recorded text as a string;
* a tool result: ``{"role": "tool", "content": text, "name", "tool_call_id"}``;
* the conversation's ``tools``: given to ``apply_chat_template(tools=...)``, and taken out of
  the system message where the text form put them (a system message that held only them goes).

Recordings keep no call ids, so each call gets ``call00001``, ``call00002``, ... in conversation
order (nine characters, the length Mistral's templates require), and each tool result the id of
the earliest unanswered call of the assistant message before it.

A template that does not spell tool calls (SmolLM2's writes ``content`` only) would silently drop
every call from the recording: :func:`check_template` refuses it first, by name. A template that
spells calls but not definitions keeps the text form's tools block in the system message.
"""
from __future__ import annotations

from dataclasses import dataclass

from .openai_messages import render_tools
from .requests import ConversationError

FORMS = ("text", "template")
_PROBE_TOOL = "oilbird_probe_tool"
_PROBE_VALUE = "oilbird-probe-value"


@dataclass(frozen=True)
class TemplateForm:
    """A conversation ready for the template: ``messages`` in the structured form, ``tools`` for
    ``apply_chat_template`` (None when the template does not spell them), and ``pos[i]``: where
    the conversation's message i stands in ``messages`` (messages before it: ``messages[:pos[i]]``)."""
    messages: list[dict]
    tools: list[dict] | None
    pos: list[int]

    def kwargs(self) -> dict:
        return {"tools": self.tools} if self.tools else {}


def _probe(tokenizer, tools: bool) -> str:
    call = {"id": "call00001", "type": "function",
            "function": {"name": _PROBE_TOOL, "arguments": {"value": _PROBE_VALUE}}}
    messages = [{"role": "user", "content": "probe"},
                {"role": "assistant", "content": "", "tool_calls": [call]}]
    defs = [{"type": "function", "function": {"name": _PROBE_TOOL + "_def", "description": "probe",
                                              "parameters": {"type": "object", "properties": {}}}}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, **({"tools": defs} if tools else {}))
    return text if isinstance(text, str) else ""


def check_template(tokenizer) -> bool:
    """Refuse a tokenizer whose chat template would not write tool calls (or has none), in one
    :class:`ConversationError` that names the way out; else whether it also writes the tool
    definitions given to it."""
    if not getattr(tokenizer, "chat_template", None):
        raise ConversationError("--tool-calls template: this tokenizer has no chat template to spell the tool "
                                "calls; use --tool-calls text (the project's Hermes-style text form)")
    try:
        text = _probe(tokenizer, tools=True)
    except Exception:                              # the template's own error type varies
        try:
            text = _probe(tokenizer, tools=False)
        except Exception as exc:
            raise ConversationError(f"--tool-calls template: the chat template refuses a tool call ({exc}); "
                                    "use --tool-calls text") from None
    if _PROBE_TOOL not in text or _PROBE_VALUE not in text:
        raise ConversationError("--tool-calls template: the model's chat template does not write tool calls "
                                "(a recording's calls would vanish from its tokens); use --tool-calls text, the "
                                "project's Hermes-style text form")
    return _PROBE_TOOL + "_def" in text


def _without_tools(messages: list[dict], tools: tuple) -> list[dict | None]:
    """The messages with the text form's tools block taken out of the system message it was put
    in (None where a system message held only the block)."""
    out: list[dict | None] = list(messages)
    if not tools:
        return out
    block = render_tools(list(tools))
    for i, m in enumerate(messages):
        if m["role"] == "system":
            text = m["content"]
            if text == block:
                out[i] = None
            elif text.endswith("\n\n" + block):
                out[i] = {**m, "content": text[:-len(block) - 2]}
            break
    return out


def template_form(conv, tools_spelled: bool) -> TemplateForm:
    """``conv`` (a normalised :class:`~oilbird.data.conversations.Conversation`) in the structured
    form; ``tools_spelled``: :func:`check_template`'s answer (else the tools block stays)."""
    messages = _without_tools(list(conv.messages), conv.tools) if tools_spelled else list(conv.messages)
    out: list[dict] = []
    pos: list[int] = []
    calls = 0
    waiting: list[str] = []                      # ids of the last assistant message's unanswered calls
    for m in messages:
        pos.append(len(out))
        if m is None:
            continue
        if m["role"] == "assistant":
            structured = []
            for call in m.get("tool_calls") or ():
                calls += 1
                args = call.arguments
                structured.append({"id": f"call{calls:05d}", "type": "function",
                                   "function": {"name": call.name,
                                                "arguments": args if args is not None else call.arguments_json}})
            waiting = [c["id"] for c in structured]
            out.append({"role": "assistant", "content": m["content"]} | ({"tool_calls": structured} if structured else {}))
        elif m["role"] == "tool":
            tool = {"role": "tool", "content": m["content"]}
            if m.get("name"):
                tool["name"] = m["name"]
            if waiting:
                tool["tool_call_id"] = waiting.pop(0)
            out.append(tool)
        else:
            out.append({"role": m["role"], "content": m["content"]})
    if not out:
        raise ConversationError(f"conversation '{conv.id}': nothing left to render")
    return TemplateForm(out, list(conv.tools) if tools_spelled and conv.tools else None, pos)
