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
  most templates expect; they re-serialise them in their own spacing), or the recorded text for
  a template that joins them as a string (DeepSeek's), and the recorded text too where the agent
  wrote broken JSON (a template that re-serialises it then quotes it: no model would write that,
  and the turn's tau says so);
* a tool result: ``{"role": "tool", "content": text, "name", "tool_call_id"}``;
* the conversation's ``tools``, in OpenAI's ``{"type": "function", "function": {"name",
  "description", "parameters"}}`` shape whatever the log's (Anthropic's ``input_schema``, the
  Responses API's flat form), given to ``apply_chat_template(tools=...)`` as a server hands them
  to its template, and taken out of the system message where the text form put them (a system
  message that held only them goes).

Call ids differ between a log's spellings, and some templates accept only their own shape
(Mistral's: nine letters and digits), so each call gets ``call00001``, ``call00002``, ... in
conversation order, and each tool result the id of the call its recorded id answers (where the
log gave none, the earliest unanswered call of the assistant message before it).

:func:`check_template` probes each template once, before anything is encoded: one
that writes no tool calls (SmolLM2's writes ``content`` only) or drops tool results would lose
them from every turn, and is refused by name; one that writes calls but not definitions keeps the
text form's tools block in the system message. Templates that render earlier turns differently
once a reply follows (Mistral's, which moves the system prompt into the last user message) fail
the replay's prefix check: the run stops at the first such turn, naming it, as in the text form.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from ..jsonio import loads
from .openai_messages import render_tools
from .requests import ConversationError

FORMS = ("text", "template")
_PROBE_TOOL = "oilbird_probe_tool"
_PROBE_DEFINITION = "oilbird_probe_definition"
_PROBE_VALUE = "oilbird-probe-value"
_PROBE_RESULT = "oilbird-probe-result"
_checked: dict[str, "TemplateStyle"] = {}       # by the template's text: the probe reads nothing else


@dataclass(frozen=True)
class TemplateStyle:
    """How :func:`check_template` found the template to write tool calls: with ``tools=`` given
    (``pass_tools``: Hermes-style templates kept as a ``{"default", "tool_use"}`` pair, and ones
    that write calls only ``{% if tools %}``, need it; it is then always given, ``[]`` for a
    conversation without tools), whether it writes the definitions given to it (``writes_tools``),
    and whether it takes a call's arguments as text rather than parsed (``args_text``)."""
    pass_tools: bool
    writes_tools: bool
    args_text: bool


@dataclass(frozen=True)
class TemplateForm:
    """A conversation ready for the template: ``messages`` in the structured form, ``tools`` for
    ``apply_chat_template`` (None: not given), and ``pos[i]``: where the conversation's message i
    stands in ``messages`` (messages before it: ``messages[:pos[i]]``)."""
    messages: list[dict]
    tools: list[dict] | None
    pos: list[int]

    def kwargs(self) -> dict:
        return {"tools": self.tools} if self.tools is not None else {}


def openai_tool(tool: dict) -> dict:
    """A tool definition in OpenAI's chat shape, the one serving templates are written for:
    Anthropic's (``input_schema``) and the Responses API's flat one (``type``, ``name``,
    ``parameters`` side by side) are rewrapped; another shape is left as it is."""
    if isinstance(tool.get("function"), dict):
        return tool
    if not isinstance(tool.get("name"), str):
        return tool
    params = tool.get("parameters", tool.get("input_schema"))
    fn = {"name": tool["name"]} | ({"description": tool["description"]} if "description" in tool else {})
    return {"type": "function", "function": fn | ({"parameters": params} if params is not None else {})}


def _probe(tokenizer, tools: bool, args_text: bool) -> str:
    args = {"value": _PROBE_VALUE}
    call = {"id": "call00001", "type": "function",
            "function": {"name": _PROBE_TOOL, "arguments": json.dumps(args) if args_text else args}}
    messages = [{"role": "user", "content": "probe"},
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "content": _PROBE_RESULT, "name": _PROBE_TOOL, "tool_call_id": "call00001"},
                {"role": "assistant", "content": "done"}]
    defs = [openai_tool({"name": _PROBE_DEFINITION, "description": "probe",
                         "parameters": {"type": "object", "properties": {}}})]
    text = tokenizer.apply_chat_template(messages, tokenize=False, **({"tools": defs} if tools else {}))
    return text if isinstance(text, str) else ""


def check_template(tokenizer) -> TemplateStyle:
    """Refuse a tokenizer whose chat template would not write tool calls or tool results (or has
    none), in one :class:`ConversationError` that names the way out; else what it writes
    (:class:`TemplateStyle`). Probed once per template."""
    template = getattr(tokenizer, "chat_template", None)
    if not template:
        raise ConversationError("--tool-calls template: this tokenizer has no chat template to spell the tool "
                                "calls; use --tool-calls text (the project's Hermes-style text form)")
    key = str(template)
    if key in _checked:
        return _checked[key]
    text, errors, style = "", [], None
    for tools, args_text in ((True, False), (False, False), (True, True), (False, True)):
        try:
            text = _probe(tokenizer, tools, args_text)
        except Exception as exc:                   # the template's own error type varies
            errors.append(exc)
            continue
        if _PROBE_TOOL in text and _PROBE_VALUE in text:
            style = TemplateStyle(pass_tools=tools, writes_tools=tools and _PROBE_DEFINITION in text,
                                  args_text=args_text)
            break
    if style is None and errors and not text:
        raise ConversationError(f"--tool-calls template: the chat template refuses a tool call ({errors[0]}); "
                                "use --tool-calls text") from None
    if style is None:
        raise ConversationError("--tool-calls template: the model's chat template does not write tool calls "
                                "(a recording's calls would vanish from its tokens); use --tool-calls text, the "
                                "project's Hermes-style text form")
    if _PROBE_RESULT not in text:
        raise ConversationError("--tool-calls template: the model's chat template writes tool calls but drops "
                                "tool results (every result would vanish from the prompts); use --tool-calls text")
    _checked[key] = style
    return style


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


def _arguments(call, args_text: bool):
    """A call's arguments as the template takes them: the recorded text for a template that joins
    text (or when it is not JSON), else the parsed value."""
    if args_text:
        return call.arguments_json
    try:
        return loads(call.arguments_json)
    except ValueError:
        return call.arguments_json


def template_form(conv, style: TemplateStyle) -> TemplateForm:
    """``conv`` (a normalised :class:`~oilbird.data.conversations.Conversation`) in the structured
    form, as :func:`check_template` found the template to want it (``style``)."""
    messages = _without_tools(list(conv.messages), conv.tools) if style.writes_tools else list(conv.messages)
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
                structured.append({"id": f"call{calls:05d}", "type": "function",
                                   "function": {"name": call.name, "arguments": _arguments(call, style.args_text)}})
            waiting = [c["id"] for c in structured]
            out.append({"role": "assistant", "content": m["content"]} | ({"tool_calls": structured} if structured else {}))
        elif m["role"] == "tool":
            tool = {"role": "tool", "content": m["content"]}
            if m.get("name"):
                tool["name"] = m["name"]
            answers = f"call{m['answers'] + 1:05d}" if m.get("answers") is not None else None
            if answers is None and waiting:
                answers = waiting[0]
            if answers is not None:
                tool["tool_call_id"] = answers
                waiting = [w for w in waiting if w != answers]
            out.append(tool)
        else:
            out.append({"role": m["role"], "content": m["content"]})
    tools = [openai_tool(t) for t in conv.tools] if style.pass_tools else None
    return TemplateForm(out, tools, pos)


def check_rendered(tokenizer, form: TemplateForm, where: str) -> None:
    """Refuse a conversation whose rendering (the whole ``form`` through the template) lacks one
    of its calls' names: the probe passed, yet this template drops calls here (one that writes
    them only ``{% if tools %}``, for a conversation without tools). Results are not checked by
    their text, which templates may escape (Llama's writes a string result as JSON); the probe
    checked that results are written. A template that raises here is left to the per-turn
    encoding, which names the turn."""
    try:
        text = tokenizer.apply_chat_template(form.messages, tokenize=False, **form.kwargs())
    except Exception:                       # the template's own error type: the turn that raises is named later
        return
    if not isinstance(text, str):
        return
    for m in form.messages:
        for call in m.get("tool_calls", ()):
            if call["function"]["name"] not in text:
                raise ConversationError(f"{where}: the chat template leaves the call to {call['function']['name']!r} "
                                        "out of this conversation's tokens (--tool-calls template); use --tool-calls text")
