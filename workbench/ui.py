"""The workbench's Gradio Blocks: every panel, event and named API endpoint.

:func:`build_app` builds the app over a :class:`~workbench.session.Catalogue` of traces, the
:class:`~workbench.session.Data` a live run can decode and the shared
:class:`~workbench.session.ModelHolder`; ``python -m workbench.app`` (:mod:`workbench.app`)
launches it. Every event has a named API endpoint (``/select``, ``/prev``, ``/next``,
``/goto``, ``/gap_moment``, ``/play``, ``/tick``, ``/play_pace``, ``/load_traces``, ``/run_live``, ``/export_figures``,
``/export_trace``, ``/funnel``) so ``gradio_client`` can drive the app the way the browser does. Bad input
(an unknown request, a corrupt trace file, a model that fails to load) shows in the error banner
(and a ``gr.Warning``) and leaves the session as it was. The panels are the pure figure
functions of :mod:`workbench.figures`, the ones the notebooks use.
"""
from __future__ import annotations

import atexit
import html
import os
import shutil
import tempfile
import time
from collections import namedtuple
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import gradio as gr  # noqa: E402
from gradio.components.plot import PlotData  # noqa: E402

from oilbird.errors import ContextError, PromptError  # noqa: E402
from oilbird.errors import shown  # noqa: E402
from oilbird.trace import RequestTrace, load_traces  # noqa: E402

from . import figures as F  # noqa: E402
from .export import FORMATS, ExportError, cycle_export, export_figures, export_traces, safe_name  # noqa: E402
from . import live_controls as live  # noqa: E402
from .live_controls import live_button, stop_button  # noqa: E402
from .moments_menu import GapMomentsMenu, menu_update, shown_moment  # noqa: E402
from .reading import HOW_TO_READ  # noqa: E402
from .session import (LIVE_BUDGET, LIVE_MAX_NEW_TOKENS, LIVE_ORIGIN, PLAY_PACES, PRESET_NAMES, TITLE,  # noqa: E402
                      Catalogue, Data, ModelHolder, Session, cannot_run_live, decode_live, find, left_out_note,
                      live_sampling, loaded_note, method_choices, method_menu, new_session, opening, opening_cycle,
                      origin, origin_name, public, read_error, request_choices, request_menu, same_place, take_view,
                      upload_split)

# the most an uploaded trace file may hold: 512 MiB of text (a .gz decompressed; refused unread past that), about
# 3 GB of memory and minutes of drawing: one upload at a time (`report` reads 2 GiB; app.py gives gradio this bound)
UPLOAD_MAX_BYTES = 512 << 20

ASSETS = Path(__file__).resolve().parents[1] / "assets"
CSS = (ASSETS / "workbench.css").read_text(encoding="utf-8")
JS = (ASSETS / "workbench.js").read_text(encoding="utf-8")     # names each figure for a screen reader

# --------------------------------------------------------------------------- the outputs, named
# Each event returns one of these; the components it updates are listed from the same field
# names (build_app's ``outputs``), so a value cannot land in the wrong panel.
STEP = ("state", "counter", "slider", "tree", "text", "neighbours", "gap", "error", "moments", "mini")


class Step(namedtuple("Step", STEP)):
    """What a step redraws: the session, the cycle counter, the slider (a value, or a
    ``gr.Slider`` with a new range), the tree (plotly), the text, neighbours and gap strip
    (HTML), the error banner, the gap-moments menu (:func:`~workbench.moments_menu.menu_update`)
    and the small gap strip that stays in view with the buttons."""
    __slots__ = ()


class Full(namedtuple("Full", STEP + ("metrics", "compare", "prompt"))):
    """A new selection: a :class:`Step` and the request-level panels (metrics and comparison
    plots, the prompt's text)."""
    __slots__ = ()


class Selected(namedtuple("Selected", Full._fields + ("request_menu", "method_menu", "compare_menu", "live_button",
                                                     "stop_button"))):
    """A :class:`Full` redraw, the three menus (their choices' labels follow the selection), the
    Run live button (greyed out where the selection cannot be decoded, or while a run of the
    session waits or decodes: :func:`live_button`) and the Stop button (clickable only while there
    is a run to stop: :func:`stop_button`)."""
    __slots__ = ()


class Played(namedtuple("Played", STEP + ("timer", "play_button"))):
    """A :class:`Step` and the Play timer and button (Play / Pause)."""
    __slots__ = ()


def _plot(spec: dict) -> PlotData:
    return PlotData(type="plotly", plot=F.spec_json(spec))


def render(st: Session, cat: Catalogue, error: str = "", full: bool = False, data: Data | None = None) -> Step | Full:
    """What a step redraws (:class:`Step`); with ``full``, also the request-level panels
    (:class:`Full`: metrics, comparison), which a step leaves alone so the browser redraws less.
    A trace that loads but cannot be drawn shows as a message and in the error banner, never as
    a crash. ``data`` (the ``--data`` requests) says whether a missing trace can be run live."""
    try:
        return _render(st, cat, error, full, data)
    except Exception as exc:   # noqa: BLE001 - any failure while drawing goes to the banner
        msg = f"Request '{st.request}' with method '{st.method}' cannot be drawn: {type(exc).__name__}: {exc}"
        return _no_trace(st, msg, " ".join(x for x in (error, _warn(msg)) if x), full, "cannot be drawn")


def _no_trace(st: Session, msg: str, error: str, full: bool, what: str = "no trace",
              tr: RequestTrace | None = None) -> Step | Full:
    """The outputs of :func:`render` when there is nothing to draw: ``msg`` once, in the text
    panel; the counter and the tree say ``what`` ("no trace", "no cycle records", "cannot be
    drawn") and the other panels stay empty (a message repeated in every panel was clipped in
    the half-width ones). ``tr``: the trace, when there is one (its counter and prompt)."""
    head = (F.counter_html(tr, 0) if tr is not None and not tr.cycles else
            f"<b>{html.escape(st.request)} · {html.escape(st.method)}</b>: {html.escape(what)}")
    empty = _plot(F.message_spec(f"{st.request} · {st.method}", what))
    menu = menu_update(st, tr, full, None if tr is not None else f"this request and method: {what}")
    step = Step(st, head, gr.Slider(minimum=0, maximum=1, value=0, interactive=False) if full else 0, empty,
                f"<p>{html.escape(msg)}</p>", "", "", error, menu, "")
    return Full(*step, empty, empty, tr.prompt_text if tr is not None else "") if full else step


def _render(st: Session, cat: Catalogue, error: str, full: bool, data: Data | None = None) -> Step | Full:
    tr = find(st, cat, st.request, st.method)
    if tr is None or not tr.cycles:
        why_not = cannot_run_live(st.request, st.method, data)
        if tr is None:
            return _no_trace(st, f"No trace of request '{st.request}' with method '{st.method}': " + (
                f"{why_not}, so it cannot be run live here; pick another method." if why_not else
                "press 'Run live' to decode it, or pick another method."), error, full)
        return _no_trace(st, f"Request '{st.request}' with method '{st.method}': {F.NO_CYCLES}; " + (
            f"{why_not}, so it cannot be run live here." if why_not else "press 'Run live' to decode it with them."),
            error, full, "no cycle records", tr)
    k = max(0, min(st.cycle, len(tr.cycles) - 1))
    st.cycle = k
    moment = F.moment_span(tr, shown_moment(st, tr))      # the gap moment shown: both strips mark its tokens
    counter, tree, text, neighbours, gap, mini = _cycle_panels(tr, k, moment=moment)
    # a step only moves the slider; a new selection sets its range too (one cycle: nothing to slide)
    slider = gr.Slider(minimum=0, maximum=max(1, len(tr.cycles) - 1), value=k, step=1,
                       interactive=len(tr.cycles) > 1) if full else k
    step = Step(st, counter, slider, _plot(tree), text, neighbours, gap, error, menu_update(st, tr, full), mini)
    if not full:
        return step
    other = find(st, cat, st.request, st.compare)
    cmp = (F.compare_spec(tr, other) if other is not None else
           F.message_spec("comparison", f"no trace of '{st.request}' with '{st.compare}'"))
    return Full(*step, _plot(F.metrics_spec(tr)), _plot(cmp), tr.prompt_text)


def _cycle_panels(tr: RequestTrace, k: int, keyed: set[str] | None = None, moment=None) -> tuple:
    """What one step draws, for :func:`_render` and :func:`draw_all` alike: the counter, the
    tree spec, and the text, neighbours and gap-strip HTML of cycle index ``k`` (the strips
    mark the tokens ``moment`` spans). ``keyed``: the request's
    :func:`~workbench.figures.drafted_sources`, if already known."""
    c = tr.cycles[k]
    keyed = F.drafted_sources(tr) if keyed is None else keyed
    return (F.counter_html(tr, k), F.tree_spec(c, keyed=keyed, **F.trace_marks(tr)), F.text_html(tr, k),
            F.neighbours_html(c, request=tr), F.gap_strip_html(tr, k, moment=moment),
            F.gap_strip_mini_html(tr, k, moment))


def render_full(st: Session, cat: Catalogue, error: str = "", data: Data | None = None) -> Full:
    """:func:`render` with the request-level panels. A request without a trace still shows its
    prompt when ``data`` (the ``--data`` requests) holds it, as its messages."""
    out = render(st, cat, error, full=True, data=data)
    req = data.requests.get(st.request) if data is not None else None
    if not out.prompt and req is not None:
        out = out._replace(prompt="\n\n".join(f"{m['role']}: {m['content']}" for m in req.messages))
    return out


def _warn(msg: str) -> str:
    """``msg`` for the error banner (and a pop-up): one line, no path of this machine."""
    msg = public(msg)
    gr.Warning(msg)
    return f"⚠ {msg}"


def draw_all(tr: RequestTrace) -> None:
    """Draw every view of every cycle of ``tr`` the way :func:`render` does, so a trace that
    loads but cannot be drawn is refused at upload instead of breaking a later step."""
    where = "metrics"
    try:
        keyed = F.drafted_sources(tr)
        for k in range(len(tr.cycles)):
            where = f"cycle {k}"
            F.spec_json(_cycle_panels(tr, k, keyed)[1])
        where = "metrics"
        F.spec_json(F.metrics_spec(tr)), F.spec_json(F.compare_spec(tr, tr))
    except Exception as exc:
        raise ValueError(f"request '{tr.request_id}' ({tr.method}), {where}: {type(exc).__name__}: {exc}") from exc


# --------------------------------------------------------------------------- the app
def funnel_traces(st: Session, cat: Catalogue) -> tuple[list, str]:
    """What the funnel counts (:func:`workbench.figures.funnel_scope`): of every trace this
    session shows (the catalogue's, and its own, uploaded or live, in their place), those of
    methods with the hidden-state key over the selected request's traffic; and the words."""
    return F.funnel_scope(list({**cat.traces, **st.extra}.values()), find(st, cat, st.request, st.method),
                          lambda t: origin(st, cat, t), origin_name)


def funnel_plot(st: Session, cat: Catalogue) -> PlotData:
    """The conversion funnel (:func:`workbench.figures.funnel_spec`) of :func:`funnel_traces`;
    from now on it follows the session's selection (:func:`funnel_follow`)."""
    st.funnel_shown = True
    traces, scope = funnel_traces(st, cat)
    if not any(c.tokens for t in traces for c in t.cycles):
        return _plot(F.message_spec(F.FUNNEL_TITLE, "no trace with a draft tree from a method with the hidden-state "
                                                    "key yet: load one or run live"))
    return _plot(F.funnel_spec(traces, scope=scope))


def funnel_follow(st: Session, cat: Catalogue):
    """After a new selection: the funnel of its traffic where one was counted (a few ms), else
    nothing (the panel waits for its button)."""
    return funnel_plot(st, cat) if st.funnel_shown else gr.skip()


def funnel_component(state: gr.State, cat: Catalogue) -> gr.Plot:
    """The funnel panel, a component of its own: counted on demand (``/funnel``), since it
    reads every trace of the session."""
    with gr.Accordion("conversion funnel · where the semantic key's reach is lost", open=False):
        gr.Markdown("Every drafting cycle of the traces over the selected request's traffic (one model's "
                    "recorded turns, or the local model's own decoding) from the same file (or this session's live "
                    "runs), of the methods with the hidden-state key, followed stage by stage from the key's gate to "
                    "an accepted token (`oilbird/evaluation/funnel.py`).")
        button = gr.Button("Count the funnel", elem_id="wb-funnel-count")
        plot = gr.Plot(label="conversion funnel", show_label=False, elem_id="wb-funnel")
        with gr.Accordion("what each stage counts", open=False):
            gr.Markdown(F.funnel_glossary(), elem_id="wb-funnel-glossary")
    button.click(lambda st: funnel_plot(st, cat), state, plot, api_name="funnel", show_progress="minimal", queue=False)
    return plot


def build_app(cat: Catalogue, data: Data, models: ModelHolder, max_new_tokens: int = LIVE_MAX_NEW_TOKENS,
              budget: int = LIVE_BUDGET) -> gr.Blocks:
    """The Blocks app over a catalogue of traces, a request set and a (lazy) model."""
    init = new_session(cat, data)
    first = render_full(replace(init), cat, " ".join(e for e in (cat.error, data.error) if e), data)
    made: list[Path] = []

    def export_dir() -> Path:     # made on the first export, removed at exit (gradio serves copies)
        if not made:
            made.append(Path(tempfile.mkdtemp(prefix="oilbird-workbench-")))
            atexit.register(shutil.rmtree, made[0], True)
        return made[0]

    # (the copies of exports gradio serves are removed an hour on, as its own uploads are)
    with gr.Blocks(title=TITLE, analytics_enabled=False, delete_cache=(3600, 3600)) as demo:
        state = gr.State(init)
        gr.Markdown(f"### {TITLE} · every decoding cycle: draft tree → verify → commit "
                    "<small>([how to read this screen](#wb-reading), below the panels)</small>", elem_id="wb-title")
        error = gr.Markdown(first.error, elem_id="wb-error")
        with gr.Row():
            request_dd = gr.Dropdown(request_menu(init, cat, data), value=init.request, label="request",
                                     allow_custom_value=True, elem_id="wb-request", scale=2)
            method_dd = gr.Dropdown(method_menu(init, cat, data), value=init.method, label="method",
                                    allow_custom_value=True, elem_id="wb-method")
            compare_dd = gr.Dropdown(method_menu(init, cat, data), value=init.compare, label="compare with",
                                     allow_custom_value=True, elem_id="wb-compare")
            moments = GapMomentsMenu(init, cat)     # beside the menus: the tree starts higher on a projector
        with gr.Column(elem_id="wb-controls"):     # sticky: the buttons and a small gap strip in view beside the tree
            with gr.Row(equal_height=True):
                prev_btn = gr.Button("◀ Prev", elem_id="wb-prev", scale=0, min_width=90)
                next_btn = gr.Button("Next ▶", elem_id="wb-next", scale=0, min_width=90, variant="primary")
                play_btn = gr.Button("▶ Play", elem_id="wb-play", scale=0, min_width=90)
                slider = gr.Slider(minimum=0, maximum=first.slider.maximum, value=first.slider.value, step=1,
                                   label="cycle", elem_id="wb-slider", scale=3, interactive=first.slider.interactive)
                live_btn = live_button(init, data, elem_id="wb-live", scale=0, min_width=110)
                stop_btn = stop_button(init, elem_id="wb-stop", scale=0, min_width=110, variant="stop")
                press_no = gr.Number(0, visible=False)        # the run's number, from its press (live_controls)
            mini = gr.HTML(first.mini, elem_id="wb-gap-mini", padding=False)
        counter = gr.HTML(first.counter, elem_id="cycle-counter")
        text = gr.HTML(first.text, label="generated text", elem_id="wb-text")
        tree = gr.Plot(first.tree, label="draft tree", show_label=False, elem_id="wb-tree")
        gap = gr.HTML(first.gap, label="gap strip", elem_id="wb-gap")
        neighbours = gr.HTML(first.neighbours, label="nearest neighbours", elem_id="wb-neighbours")
        with gr.Row():
            # side by side only where both get 640 px (on a projector's 1024 each takes the width)
            metrics = gr.Plot(first.metrics, label="metrics", show_label=False, elem_id="wb-metrics", min_width=640)
            compare = gr.Plot(first.compare, label="comparison", show_label=False, elem_id="wb-compare-plot",
                              min_width=640)
        funnel = funnel_component(state, cat)
        with gr.Accordion("how to read this screen", open=False, elem_id="wb-reading"):   # the title links here
            gr.Markdown(HOW_TO_READ)
        with gr.Accordion("prompt", open=False):
            prompt = gr.Textbox(first.prompt, show_label=False, lines=6, max_lines=20, interactive=False,
                                elem_id="wb-prompt")
        with gr.Accordion("Run live · Play's pace · load traces · export", open=False):
            pace = gr.Radio([(f"{s:g} s", s) for s in PLAY_PACES], value=init.play_every, elem_id="wb-pace",
                            label="Play: one cycle every")
            gr.Markdown(f"**Run live** (beside the cycle slider) decodes the selected request with the "
                        f"selected method on the model (`--model`, default SmolLM2-135M), {max_new_tokens} "
                        f"new tokens, trees of {budget} nodes (`--budget`; the shipped built-in traces' size) (it "
                        "reads *Run live (n/a)*, greyed out, where it cannot: a request whose prompt is not in "
                        "`--data`, such as a replay's recorded turns, or a method that is not a preset; "
                        "*Running…* while a run waits or decodes); the model loads on first "
                        "use; **Stop live run** ends the run after its current cycle and shows what it decoded. "
                        "Each session keeps a cross-request store per method, which that method's live runs fill; a "
                        "live run's gap strip and moments are labelled against what that store held (one more pass "
                        "over the prompt and output). A temperature above 0 samples (with top-p and the seed): "
                        "the tree is then decided by the lossless sampling rule (every method commits "
                        "plain sampling's tokens for that seed; drafts change only how many per forward), "
                        "and the tree's hover shows, per tried node, the probability that decided it and "
                        "the residual's mass.")
            with gr.Row():
                live_t = gr.Number(0, label="temperature (0 = greedy)", elem_id="wb-temperature", step=0.1)
                live_p = gr.Number(1, label="top-p, in (0, 1]", elem_id="wb-top-p", step=0.05)
                live_seed = gr.Textbox("0", label="seed (a whole number)", elem_id="wb-seed", max_lines=1)
            upload = gr.File(label="load a trace file (JSONL from `python -m oilbird trace`, or gzipped)",
                             file_types=[".jsonl", ".json", ".txt", ".gz"], type="filepath", elem_id="wb-upload")
            with gr.Row():
                fmt = gr.Radio(list(FORMATS), value="html", label="figure format", elem_id="wb-format")
                export_btn = gr.Button("Export figures", elem_id="wb-export")
                trace_btn = gr.Button("Export trace (JSONL + CSV)", elem_id="wb-export-trace")
            files = gr.File(label="exported files", file_count="multiple", interactive=False, elem_id="wb-files")
        timer = gr.Timer(init.play_every, active=False)

        parts = {"state": state, "counter": counter, "slider": slider, "tree": tree, "text": text,
                 "neighbours": neighbours, "gap": gap, "error": error, "metrics": metrics, "compare": compare,
                 "prompt": prompt, "request_menu": request_dd, "method_menu": method_dd,
                 "compare_menu": compare_dd, "live_button": live_btn, "timer": timer, "play_button": play_btn,
                 "moments": moments.menu, "stop_button": stop_btn, "mini": mini}

        def outputs(kind) -> list:
            """The components an event of output type ``kind`` updates, in its fields' order."""
            return [parts[f] for f in kind._fields]

        def full_view(st, error=""):
            return render_full(st, cat, error, data)

        def menus_for(st):
            """The three menus with their labels for the selection in ``st``."""
            methods = method_menu(st, cat, data)
            return [gr.Dropdown(choices=request_menu(st, cat, data), value=st.request),
                    gr.Dropdown(choices=methods, value=st.method),
                    gr.Dropdown(choices=methods, value=st.compare), live_button(st, data), stop_button(st)]

        def unchanged(st, error):
            """A :class:`Selected` that redraws ``st`` as it was, with ``error`` in the banner."""
            return Selected(*full_view(st, error), gr.Dropdown(), gr.Dropdown(), gr.Dropdown(), live_button(st, data),
                            stop_button(st))

        # ---- navigation
        def select(st, rid, method, cmp, evt: gr.EventData = None):
            """A new selection: from the API, all three values; from a menu (``evt.target``), that
            menu's value alone, the other two the session's (what the client sent for them may be
            stale), and nothing at all when it is the session's already: gradio's dropdown sends
            its value again on the blur after every pick (the second of the two undid a swap)."""
            rid, method, cmp = (rid or "").strip(), (method or "").strip(), (cmp or "").strip()
            target = getattr(getattr(evt, "target", None), "elem_id", None)     # (a session's copy of the menu)
            by = next((i for i, dd in enumerate((request_dd, method_dd, compare_dd)) if dd.elem_id == target), None)
            if by is not None:
                now = [st.request, st.method, st.compare]
                if (rid, method, cmp)[by] == now[by]:
                    return Selected(*[gr.skip()] * len(Selected._fields))
                now[by] = (rid, method, cmp)[by]
                rid, method, cmp = now
            known = request_choices(st, cat, data)
            if rid not in known:
                out = full_view(st, _warn(f"Unknown request id {shown(rid)}. Known: {', '.join(known[:8])}"
                                          f"{' …' if len(known) > 8 else ''}"))
            elif method not in method_choices(st, cat) or cmp not in method_choices(st, cat):
                bad = method if method not in method_choices(st, cat) else cmp
                out = full_view(st, _warn(f"Unknown method {shown(bad)}."))
            else:
                new = find(st, cat, rid, method)
                if rid != st.request:          # another request opens as the app does, on its clearest moment
                    st.cycle = opening_cycle(new)
                elif method != st.method:      # another method: the same moment, where it has it
                    st.cycle = same_place(find(st, cat, st.request, st.method), st.cycle, new)
                if method != st.method and cmp == method == st.compare:   # picking the compared method:
                    cmp = st.method                                        # the two swap, not "goose vs goose"
                st.request, st.method, st.compare = rid, method, cmp
                out = full_view(st)
            return Selected(*out, *menus_for(st))

        def step(st, delta):
            st.cycle = max(0, int(st.cycle) + int(delta))
            return render(st, cat, data=data)

        def goto(st, k):
            try:                                  # the raw value (see the slider's events below)
                st.cycle = max(0, int(float(k)))
            except (TypeError, ValueError, OverflowError):     # None, text, inf, 1e400: stay
                pass
            return render(st, cat, data=data)

        def slide(st, k):
            """goto from the slider itself, whose value is already on screen: the slider is left as
            the user has it (an answer that lands after the user moved on, e.g. a second arrow key
            while this one was in flight, must not pull it back), unless the value was clamped."""
            out = goto(st, k)
            try:
                as_typed = float(k) == st.cycle
            except (TypeError, ValueError, OverflowError):
                as_typed = False
            return out._replace(slider=gr.skip()) if as_typed else out

        def played(st):
            """The redraw with the timer and the button following ``st.playing``."""
            return Played(*render(st, cat, data=data), gr.Timer(st.play_every, active=st.playing),
                          gr.Button(value="⏸ Pause" if st.playing else "▶ Play"))

        def play(st):
            tr = find(st, cat, st.request, st.method)
            st.playing = not st.playing and tr is not None
            if st.playing and tr is not None and st.cycle >= len(tr.cycles) - 1:
                st.cycle = 0
            return played(st)

        def tick(st):
            tr = find(st, cat, st.request, st.method)
            if not st.playing or tr is None:
                st.playing = False
                return played(st)
            st.cycle += 1
            if st.cycle >= len(tr.cycles) - 1:
                st.playing = False
            return played(st)

        fast = {"show_progress": "hidden", "queue": False}
        selected = [gr.on([dd.input for dd in (request_dd, method_dd, compare_dd)], select,
                          [state, request_dd, method_dd, compare_dd], outputs(Selected), api_name="select", **fast)]
        prev_btn.click(lambda st: step(st, -1), state, outputs(Step), api_name="prev", **fast)
        next_btn.click(lambda st: step(st, +1), state, outputs(Step), api_name="next", **fast)
        # the slider's value unchecked (preprocess=False): a typed 99 goes to the last cycle instead
        # of gradio's out-of-range error; input covers the arrow keys and the number box
        gr.on([slider.release, slider.input], slide, [state, slider], outputs(Step), api_name="goto",
              preprocess=False, trigger_mode="always_last", **fast)
        play_btn.click(play, state, outputs(Played), api_name="play", **fast)
        timer.tick(tick, state, outputs(Played), api_name="tick", **fast)

        def set_pace(st, every):
            """Play's pace (seconds per cycle), one of :data:`PLAY_PACES`; anything else is no pick."""
            st.play_every = float(every) if every in PLAY_PACES else st.play_every
            return gr.Timer(st.play_every, active=st.playing)
        pace.input(set_pace, [state, pace], timer, api_name="play_pace", **fast)

        # ---- traces in and out
        def load_file(st, path):
            """All or nothing: the session takes the file's traces only if every one draws."""
            if not path:
                return unchanged(st, _warn("No file given."))
            name = Path(path).name   # the name the user uploaded, not gradio's cache path
            try:
                traces = load_traces(path, max_bytes=UPLOAD_MAX_BYTES)
            except Exception as exc:   # noqa: BLE001 - TraceError, or whatever a loader lets through: one line
                return unchanged(st, _warn(f"Not a usable trace file: {read_error(exc, path)}"))
            traces, left_out = upload_split(st, traces)    # this session's live runs stay
            if not traces:
                return unchanged(st, _warn(f"Nothing loaded from {name}. {left_out_note(left_out)}"))
            first = opening(traces)      # oilbird's trace that shows the key best, if the file has one
            added = {(t.request_id, t.method): t for t in traces}
            new = replace(st, extra={**st.extra, **added}, request=first.request_id, method=first.method,
                          cycle=opening_cycle(first))
            try:
                for t in traces:
                    draw_all(t)
                note = loaded_note(name, traces, first, left_out, sum(find(st, cat, *k) is not None for k in added))
                out = _render(new, cat, note, full=True, data=data)
            except Exception as exc:   # noqa: BLE001 - whatever breaks drawing: the banner, no change
                return unchanged(st, _warn(f"Not a usable trace file: {name}: {exc}"))
            # every trace draws: the session takes them in place, so a live run that holds this
            # same session object (and returns it when it ends) keeps the upload too
            st.extra.update(added)
            st.extra_from.update(dict.fromkeys(added, str(path)))     # gradio's copy: one per upload
            take_view(st, new)
            return Selected(*out._replace(state=st), *menus_for(st))

        selected.append(upload.upload(load_file, [state, upload], outputs(Selected), api_name="load_traces",
                                      concurrency_limit=1))

        def run_live(st, rid, method, temperature=0, top_p=1, seed="0", press=0, progress=gr.Progress()):
            """One live run (:func:`live_run`), numbered by its press and counted as ended whatever it
            ends in (both buttons follow the count); an error it lets through is one line in the
            banner, no change."""
            ticket = live.start(st, press)
            try:
                out = live_run(st, ticket, rid, method, temperature, top_p, seed, progress)
            except Exception as exc:     # noqa: BLE001 - e.g. a loader's own error: the buttons must come back
                out = unchanged(st, _warn(f"The live run of {shown(rid)} failed: {type(exc).__name__}: {exc}"))
            finally:
                live.end(st, ticket)
            return out._replace(stop_button=stop_button(st), live_button=live_button(st, data))

        def live_run(st, ticket, rid, method, temperature, top_p, seed, progress):
            try:
                sampling = live_sampling(temperature, top_p, seed)     # checked before the model loads
            except ValueError as exc:
                return unchanged(st, _warn(f"Not run: {exc}."))
            why_not = cannot_run_live(rid, method, data)     # the rule that greys the button out
            if why_not:
                return unchanged(st, _warn(data.error or f"Not run: request {shown(rid)} with {shown(method)}: {why_not}."))
            req = data.requests[rid]
            try:                          # (a run stopped while it waited loads no model)
                lm = None if ticket <= st.stop_upto else models.get(progress)
            except RuntimeError as exc:   # LiveRunError, or oilbird.model.ModelError (a RuntimeError)
                return unchanged(st, _warn(f"The model failed to load: {exc}"))
            if ticket <= st.stop_upto:    # stopped while it waited or the model loaded: nothing decoded or stored
                return unchanged(st, _warn(f"Stopped before it began: {shown(rid)} was not decoded."))
            had = method in st.decoders
            try:
                tr = decode_live(st, models, lm, req, method, max_new_tokens, progress, sampling,
                                 stopped=lambda: ticket <= st.stop_upto, budget=budget)
            except PromptError as exc:   # empty, or too long for the model
                return unchanged(st, _warn(f"Request {shown(rid)} cannot be decoded: {exc}" + (
                    f" (--max-new-tokens {max_new_tokens})" if isinstance(exc, ContextError) else "")))
            except Exception:            # out of memory, a tokenizer's own error...: run_live says so
                if not had:
                    st.decoders.pop(method, None)      # a decoder made for this run only
                raise
            # the request on screen stays at its moment (the cycle committing the same token), as
            # a method switch does: a class compares the live tree with the one it was shown
            on_screen = find(st, cat, st.request, st.method) if st.request == rid else None
            old = st.extra.get((rid, method))
            uploaded = old is not None and not F.is_live(old)     # (an earlier live run's is no loss)
            st.extra[(rid, method)] = tr
            st.extra_from[(rid, method)] = LIVE_ORIGIN
            st.request, st.method, st.cycle = rid, method, same_place(on_screen, st.cycle, tr)
            said = [] if tr.stop != "stopped" else [_warn(
                f"Stopped after {len(tr.output_ids)} of {max_new_tokens} tokens: the partial trace is shown, "
                f"and the session's store keeps what was decoded (a request that ended there).")]
            if uploaded or (rid, method) in cat.traces:     # a class would look for that one: say where it went
                said.append(f"This live run stands in for the {'uploaded' if uploaded else 'precomputed'} trace of "
                            f"{html.escape(rid)} with {html.escape(method)} in this session ("
                            f"{'upload the file again' if uploaded else 'reload the page'} to see that one again).")
            return Selected(*full_view(st, " ".join(said)), *menus_for(st))

        def pressed(st):
            """Run pressed (outside the queue): counted, so that a Stop pressed while this run still
            waits (behind another session's run, or for the model) ends it too; Stop is clickable
            now, Run greyed out ("Running…") until the run ends."""
            number = live.press(st)
            return *buttons(st), number

        def buttons(st):
            return stop_button(st), live_button(st, data)
        pressing = live_btn.click(pressed, state, [stop_btn, live_btn, press_no], queue=False, api_name=False)
        selected.append(pressing.then(
            run_live, [state, request_dd, method_dd, live_t, live_p, live_seed, press_no], outputs(Selected),
            api_name="run_live", concurrency_limit=1, show_progress_on=[text],   # not over every panel
            trigger_mode="multiple"))   # a Run pressed while one runs queues (gradio's "once" dropped it, counted)
        # and once more after it, outside the queue: a redraw that read the counts before the run ended
        # (a menu's, answered while it ran) must not leave Run greyed out or Stop clickable
        selected[-1].then(buttons, state, [stop_btn, live_btn], queue=False, api_name=False)

        def stop_live(st):
            """End this session's runs pressed so far after their current cycle (run_live reads the
            session object it shares with this event; outside the queue, so not behind the run)."""
            live.stop(st)
            return buttons(st)      # Stop greyed out until Run is pressed again; Run back (live_controls)
        stop_btn.click(stop_live, state, [stop_btn, live_btn], api_name="stop_live", queue=False)
        moments.wire(state, outputs(Step), goto, fast)
        for dep in selected:           # a counted funnel follows the selection's traffic
            dep.then(lambda st: funnel_follow(st, cat), state, funnel, **fast)

        def export_figs(st, fmt_name, progress=gr.Progress()):
            tr = find(st, cat, st.request, st.method)
            if tr is None:
                return [], _warn("Nothing to export: no trace selected.")
            if not tr.cycles:
                return [], _warn(f"Nothing to export: {F.NO_CYCLES}.")
            progress(0.1, desc=f"exporting {fmt_name}")
            k = min(st.cycle, len(tr.cycles) - 1)
            other = find(st, cat, st.request, st.compare)
            try:      # as on screen (the strip's moment), with the funnel panel's count, for a handout
                figs, left_out = cycle_export(tr, k, other, F.moment_span(tr, st.moment_shown), funnel_traces(st, cat))
            except Exception as exc:   # noqa: BLE001 - a trace that cannot be drawn: say so
                return [], _warn(f"Nothing exported: the figures cannot be drawn: {type(exc).__name__}: {exc}")
            stem = safe_name(tr.request_id, tr.method, f"cycle{tr.cycles[k].cycle}")
            out_dir = export_dir() / safe_name(f"{time.time_ns()}")
            try:
                try:
                    paths = export_figures(figs, out_dir, fmt_name, stem=stem)
                    return [str(p) for p in paths], _warn(left_out) if left_out else ""
                except ExportError as exc:
                    paths = export_figures(figs, out_dir, "html", stem=stem)
                    return [str(p) for p in paths], _warn(f"{exc} Exported HTML instead. {left_out}".strip())
            except OSError as exc:
                return [], _warn(_not_written(exc))

        export_btn.click(export_figs, [state, fmt], [files, error], api_name="export_figures", concurrency_limit=2)

        def export_trace(st):
            tr = find(st, cat, st.request, st.method)
            if tr is None:
                return [], _warn("Nothing to export: no trace selected.")
            path = export_dir() / safe_name(f"{time.time_ns()}") / f"{safe_name(tr.request_id, tr.method)}.jsonl"
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                paths = export_traces([tr], path)      # and its tables, as CSV
            except OSError as exc:
                return [], _warn(_not_written(exc))
            return [str(p) for p in paths], ""

        trace_btn.click(export_trace, state, [files, error], api_name="export_trace")
    return demo


def _not_written(exc: OSError) -> str:
    """An export that the server could not write, said without the server's path."""
    return f"Nothing exported: the file could not be written on the server ({exc.strerror or type(exc).__name__})."
