"""The Oilbird workbench: step through every decoding cycle of a request in the browser.

    python -m workbench.app                                  # http://127.0.0.1:7860
    python -m workbench.app --port 7861 --traces runs/builtin.jsonl
    python -m workbench.app --data api-bank --model path/to/model.gguf

It opens on precomputed traces (``assets/traces/builtin.jsonl``, see the README for the
command that regenerates them), so the first figures show before any model exists. The model
loads only when someone presses "Run live", once, shared by every session behind a lock.

What lives where:

* :class:`Catalogue`: the precomputed traces, read once at start and never changed;
* :class:`ModelHolder`: the one lazily loaded model (and its lock), shared by all sessions;
* a per-session dict in ``gr.State``: the selection (request, method, cycle), traces this
  session uploaded or decoded live, and its live decoders (so a session's store grows over its
  own live runs). Nothing per-session lives in module globals.

Every event has a named API endpoint (``/select``, ``/prev``, ``/next``, ``/goto``, ``/play``,
``/tick``, ``/load_traces``, ``/run_live``, ``/export_figures``, ``/export_trace``) so
``gradio_client`` can drive the app the way the browser does. Bad input (an unknown request,
a corrupt trace file, a model that fails to load) shows in the error banner (and a
``gr.Warning``) and leaves the session as it was.
"""
from __future__ import annotations

import argparse
import html
import os
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import gradio as gr  # noqa: E402
from gradio.components.plot import PlotData  # noqa: E402

from oilbird.trace import RequestTrace, TraceError, load_traces  # noqa: E402

from . import figures as F  # noqa: E402
from .export import FORMATS, ExportError, export_figures, export_traces, safe_name  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACES = ROOT / "assets" / "traces" / "builtin.jsonl"
PLAY_INTERVAL_S = 0.8
LIVE_MAX_NEW_TOKENS = 48
FIGURES = ("tree", "text", "neighbours", "gap", "metrics", "compare")

CSS = """
#cycle-counter { font-size: 1.05em; }
#wb-error:not(:empty) { border-left: 4px solid #D55E00; padding-left: 8px; }
.wb-text .tok { white-space: pre; }
.wb-neighbours td, .wb-neighbours th { padding: 2px 6px; text-align: left; }
.wb-neighbours .mono { font-family: monospace; }
"""


# --------------------------------------------------------------------------- shared, read-only

class LiveRunError(RuntimeError):
    """A live run cannot start (bad model path, ...); the message is shown in the UI."""


@dataclass
class Catalogue:
    """Precomputed traces by (request id, method), in file order. Read-only after start."""
    traces: dict[tuple[str, str], RequestTrace] = field(default_factory=dict)
    origin: str = ""
    error: str = ""

    @classmethod
    def load(cls, path: str | Path | None) -> "Catalogue":
        if path is None:
            return cls()
        try:
            traces = load_traces(path)
        except TraceError as exc:
            return cls(origin=str(path), error=f"Could not read the precomputed traces: {exc}")
        return cls({(t.request_id, t.method): t for t in traces}, origin=str(path))

    def request_ids(self) -> list[str]:
        return list(dict.fromkeys(rid for rid, _ in self.traces))

    def methods(self) -> list[str]:
        return list(dict.fromkeys(m for _, m in self.traces))


class ModelHolder:
    """The one model instance of the app, loaded on first use; ``lock`` guards every use."""

    def __init__(self, path: str | None):
        self.path = path
        self.lock = threading.Lock()
        self._lm = None
        self._error: str | None = None

    def get(self, progress=None):
        """The loaded model; raises ``ModelError`` (the same message on every later call)."""
        if self.path and not Path(self.path).expanduser().exists():
            # answer a mistyped path at once, before importing torch
            raise LiveRunError(f"Model path '{self.path}' does not exist. Give a local HF model "
                               "directory or a .gguf file (nothing is downloaded).")
        from oilbird.model import ModelError, load_model
        with self.lock:
            if self._lm is None and self._error is None:
                if progress is not None:
                    progress(0.05, desc="loading the model (the first load dequantizes the GGUF: ~30 s)")
                try:
                    self._lm = load_model(self.path)
                except (ModelError, OSError, ValueError) as exc:
                    self._error = str(exc)
            if self._error is not None:
                raise ModelError(self._error)
            return self._lm


@dataclass
class Data:
    """The requests a live run can decode (``--data``), by id. Read-only after start."""
    name: str
    requests: dict = field(default_factory=dict)
    error: str = ""

    @classmethod
    def load(cls, name: str) -> "Data":
        from oilbird.requests import DataError, load_requests
        try:
            return cls(name, {r.id: r for r in load_requests(name)})
        except (DataError, OSError, ValueError) as exc:
            return cls(name, error=f"Could not read --data {name}: {exc}")


# --------------------------------------------------------------------------- the session's view

def new_session(cat: Catalogue, data: Data) -> dict:
    """The initial per-session state: a traced request, method "oilbird" when there is one."""
    rids = cat.request_ids() or list(data.requests)
    methods = cat.methods() or ["oilbird"]
    method = "oilbird" if "oilbird" in methods else methods[0]
    # open on the first request where the semantic key retrieved something (the point of the
    # workbench); the very first request of a run has an empty store
    shown = [r for r in rids if any(c.neighbours for c in getattr(cat.traces.get((r, method)), "cycles", []))]
    rid = (shown or rids or [""])[0]
    other = [m for m in methods if m != method]
    st = {"request": rid, "method": method, "compare": other[0] if other else method, "cycle": 0,
          "playing": False, "extra": {}, "decoders": {}}
    st["cycle"] = first_cycle(find(st, cat, rid, method))
    return st


def find(st: dict, cat: Catalogue, rid: str, method: str) -> RequestTrace | None:
    """This session's trace of (request, method): its own (uploaded / live) first."""
    return st["extra"].get((rid, method)) or cat.traces.get((rid, method))


def first_cycle(tr: RequestTrace | None) -> int:
    """Open a request on its first cycle with a draft tree (cycle 0 is the prefill)."""
    return 1 if tr is not None and len(tr.cycles) > 1 else 0


def request_choices(st: dict, cat: Catalogue, data: Data) -> list[str]:
    return list(dict.fromkeys([rid for rid, _ in st["extra"]] + cat.request_ids() + list(data.requests)))


def method_choices(st: dict, cat: Catalogue) -> list[str]:
    from_traces = [m for _, m in st["extra"]] + cat.methods()
    return list(dict.fromkeys(from_traces + list(_presets())))


def _presets() -> tuple[str, ...]:
    # the preset names without importing torch (oilbird.presets imports the runtime)
    return ("oilbird", "goose", "pld", "suffix", "recycling", "oilbird-no-semantic", "oilbird-no-suffix",
            "oilbird-no-recycling", "oilbird-no-rejected", "pld+sem", "recycling+sem")


def _plot(spec: dict) -> PlotData:
    return PlotData(type="plotly", plot=F.spec_json(spec))


def render(st: dict, cat: Catalogue, error: str = "", full: bool = False) -> list:
    """What a step redraws (``STEP`` outputs); with ``full``, also the request-level panels
    (metrics, comparison), which a step leaves alone so the browser redraws less."""
    tr = find(st, cat, st["request"], st["method"])
    if tr is None or not tr.cycles:
        msg = (f"No trace of request '{st['request']}' with method '{st['method']}': "
               "press 'Run live' to decode it, or pick another method.")
        empty = _plot(F.message_spec(st["request"], msg))
        note = f"<p>{html.escape(msg)}</p>"
        head = f"<b>{html.escape(st['request'])} · {html.escape(st['method'])}</b>: no trace"
        out = [st, head, gr.Slider(minimum=0, maximum=1, value=0) if full else 0,
               empty, note, note, note, error]
        return out + [empty, empty, ""] if full else out
    k = max(0, min(st["cycle"], len(tr.cycles) - 1))
    st["cycle"] = k
    c = tr.cycles[k]
    upto = F.committed_upto(tr, k)
    live = " · live run" if tr.meta.get("live") else ""
    counter = (f"<b>cycle {k} / {len(tr.cycles) - 1}</b> · {html.escape(st['request'])} · "
               f"{html.escape(st['method'])}{live} · {upto} of {len(tr.output_ids)} tokens · "
               f"{len(c.committed)} committed this cycle")
    # a step only moves the slider; a new selection also sets its range
    slider = gr.Slider(minimum=0, maximum=max(1, len(tr.cycles) - 1), value=k, step=1) if full else k
    out = [st, counter, slider,
           _plot(F.tree_spec(c)), F.text_html(tr, k), F.neighbours_html(c), F.gap_strip_html(tr, k), error]
    if full:
        other = find(st, cat, st["request"], st["compare"])
        cmp = (F.compare_spec(tr, other) if other is not None else
               F.message_spec("comparison", f"no trace of '{st['request']}' with '{st['compare']}'"))
        out += [_plot(F.metrics_spec(tr)), _plot(cmp), tr.prompt_text]
    return out


def render_full(st: dict, cat: Catalogue, error: str = "") -> list:
    return render(st, cat, error, full=True)


def _warn(msg: str) -> str:
    gr.Warning(msg)
    return f"⚠ {msg}"


# --------------------------------------------------------------------------- the app

def build_app(cat: Catalogue, data: Data, models: ModelHolder, max_new_tokens: int = LIVE_MAX_NEW_TOKENS) -> gr.Blocks:
    """The Blocks app over a catalogue of traces, a request set and a (lazy) model."""
    init = new_session(cat, data)
    first = render(dict(init), cat, error=" ".join(e for e in (cat.error, data.error) if e), full=True)
    export_dir = Path(tempfile.mkdtemp(prefix="oilbird-workbench-"))

    with gr.Blocks(title="Oilbird workbench", analytics_enabled=False) as demo:
        state = gr.State(init)
        gr.Markdown("## Oilbird workbench · every decoding cycle: draft tree → verify → commit")
        error = gr.Markdown(first[7], elem_id="wb-error")
        with gr.Row():
            request_dd = gr.Dropdown(request_choices(init, cat, data), value=init["request"], label="request",
                                     allow_custom_value=True, elem_id="wb-request")
            method_dd = gr.Dropdown(method_choices(init, cat), value=init["method"], label="method",
                                    allow_custom_value=True, elem_id="wb-method")
            compare_dd = gr.Dropdown(method_choices(init, cat), value=init["compare"], label="compare with",
                                     allow_custom_value=True, elem_id="wb-compare")
        with gr.Row(equal_height=True):
            prev_btn = gr.Button("◀ Prev", elem_id="wb-prev", scale=0, min_width=90)
            next_btn = gr.Button("Next ▶", elem_id="wb-next", scale=0, min_width=90, variant="primary")
            play_btn = gr.Button("▶ Play", elem_id="wb-play", scale=0, min_width=90)
            slider = gr.Slider(minimum=0, maximum=first[2].maximum, value=first[2].value, step=1, label="cycle",
                               elem_id="wb-slider", scale=3)
        counter = gr.HTML(first[1], elem_id="cycle-counter")
        text = gr.HTML(first[4], label="generated text", elem_id="wb-text")
        tree = gr.Plot(first[3], label="draft tree", show_label=False, elem_id="wb-tree")
        gap = gr.HTML(first[6], label="gap strip", elem_id="wb-gap")
        neighbours = gr.HTML(first[5], label="nearest neighbours", elem_id="wb-neighbours")
        with gr.Row():
            metrics = gr.Plot(first[8], label="metrics", show_label=False, elem_id="wb-metrics")
            compare = gr.Plot(first[9], label="comparison", show_label=False, elem_id="wb-compare-plot")
        with gr.Accordion("prompt", open=False):
            prompt = gr.Textbox(first[10], show_label=False, lines=6, max_lines=20, interactive=False,
                                elem_id="wb-prompt")
        with gr.Accordion("Live run · load traces · export", open=False):
            with gr.Row():
                live_btn = gr.Button("Run live", elem_id="wb-live")
                gr.Markdown(f"Decodes the selected request with the selected method on the model "
                            f"(`--model`, default SmolLM2-135M), {max_new_tokens} new tokens; the model "
                            "loads on first use. Each session keeps its own cross-request store.")
            upload = gr.File(label="load a trace file (JSONL from `python -m oilbird trace`)",
                             file_types=[".jsonl", ".json", ".txt"], type="filepath", elem_id="wb-upload")
            with gr.Row():
                fmt = gr.Radio(list(FORMATS), value="html", label="figure format", elem_id="wb-format")
                export_btn = gr.Button("Export figures", elem_id="wb-export")
                trace_btn = gr.Button("Export trace (JSONL)", elem_id="wb-export-trace")
            files = gr.File(label="exported files", file_count="multiple", interactive=False, elem_id="wb-files")
        timer = gr.Timer(PLAY_INTERVAL_S, active=False)

        view = [state, counter, slider, tree, text, neighbours, gap, error]   # what a step redraws
        full = view + [metrics, compare, prompt]                              # ... and a new selection
        menus = [request_dd, method_dd, compare_dd]

        # ---- navigation
        def select(st, rid, method, cmp):
            rid, method, cmp = (rid or "").strip(), (method or "").strip(), (cmp or "").strip()
            known = request_choices(st, cat, data)
            if rid not in known:
                out = render_full(st, cat, _warn(f"Unknown request id '{rid}'. Known: {', '.join(known[:8])}"
                                            f"{' …' if len(known) > 8 else ''}"))
            elif method not in method_choices(st, cat) or cmp not in method_choices(st, cat):
                bad = method if method not in method_choices(st, cat) else cmp
                out = render_full(st, cat, _warn(f"Unknown method '{bad}'."))
            else:
                changed = (rid, method) != (st["request"], st["method"])
                st.update(request=rid, method=method, compare=cmp)
                if changed:
                    st["cycle"] = first_cycle(find(st, cat, rid, method))
                out = render_full(st, cat)
            return out + [gr.Dropdown(choices=request_choices(st, cat, data), value=st["request"]),
                          gr.Dropdown(value=st["method"]), gr.Dropdown(value=st["compare"])]

        def step(st, delta):
            st["cycle"] = max(0, int(st["cycle"]) + int(delta))
            return render(st, cat)

        def goto(st, k):
            st["cycle"] = max(0, int(k or 0))
            return render(st, cat)

        def play(st):
            tr = find(st, cat, st["request"], st["method"])
            st["playing"] = not st["playing"] and tr is not None
            if st["playing"] and tr is not None and st["cycle"] >= len(tr.cycles) - 1:
                st["cycle"] = 0
            return render(st, cat) + [gr.Timer(active=st["playing"]),
                                      gr.Button(value="⏸ Pause" if st["playing"] else "▶ Play")]

        def tick(st):
            tr = find(st, cat, st["request"], st["method"])
            if not st["playing"] or tr is None:
                st["playing"] = False
                return render(st, cat) + [gr.Timer(active=False), gr.Button(value="▶ Play")]
            st["cycle"] += 1
            if st["cycle"] >= len(tr.cycles) - 1:
                st["playing"] = False
            return render(st, cat) + [gr.Timer(active=st["playing"]),
                                      gr.Button(value="⏸ Pause" if st["playing"] else "▶ Play")]

        fast = {"show_progress": "hidden", "queue": False}
        gr.on([dd.input for dd in menus], select, [state, request_dd, method_dd, compare_dd], full + menus,
              api_name="select", **fast)
        prev_btn.click(lambda st: step(st, -1), state, view, api_name="prev", **fast)
        next_btn.click(lambda st: step(st, +1), state, view, api_name="next", **fast)
        slider.release(goto, [state, slider], view, api_name="goto", **fast)
        play_btn.click(play, state, view + [timer, play_btn], api_name="play", **fast)
        timer.tick(tick, state, view + [timer, play_btn], api_name="tick", **fast)

        # ---- traces in and out
        def load_file(st, path):
            if not path:
                return render_full(st, cat, _warn("No file given.")) + [gr.Dropdown(), gr.Dropdown(), gr.Dropdown()]
            try:
                traces = load_traces(path)
            except TraceError as exc:
                return render_full(st, cat, _warn(f"Not a usable trace file: {exc}")) + \
                    [gr.Dropdown(), gr.Dropdown(), gr.Dropdown()]
            for t in traces:
                st["extra"][(t.request_id, t.method)] = t
            st.update(request=traces[0].request_id, method=traces[0].method)
            st["cycle"] = first_cycle(traces[0])
            return render_full(st, cat) + [gr.Dropdown(choices=request_choices(st, cat, data), value=st["request"]),
                                      gr.Dropdown(choices=method_choices(st, cat), value=st["method"]),
                                      gr.Dropdown(choices=method_choices(st, cat), value=st["compare"])]

        upload.upload(load_file, [state, upload], full + menus, api_name="load_traces")

        def run_live(st, rid, method, progress=gr.Progress()):
            nothing = [gr.Dropdown(), gr.Dropdown(), gr.Dropdown()]
            req = data.requests.get(rid)
            if req is None:
                return render_full(st, cat, _warn(f"Request '{rid}' has no prompt in --data {data.name}; "
                                             "a live run needs one.")) + nothing
            if method not in _presets():
                return render_full(st, cat, _warn(f"Method '{method}' is not a preset; live runs need one of "
                                             f"{', '.join(_presets())}.")) + nothing
            try:
                lm = models.get(progress)
            except RuntimeError as exc:   # LiveRunError, or oilbird.model.ModelError (a RuntimeError)
                return render_full(st, cat, _warn(f"The model failed to load: {exc}")) + nothing
            tr = _decode_live(st, models, lm, req, method, max_new_tokens, progress)
            st["extra"][(rid, method)] = tr
            st.update(request=rid, method=method, cycle=first_cycle(tr))
            return render_full(st, cat) + [gr.Dropdown(choices=request_choices(st, cat, data), value=rid),
                                      gr.Dropdown(choices=method_choices(st, cat), value=method), gr.Dropdown()]

        live_btn.click(run_live, [state, request_dd, method_dd], full + menus, api_name="run_live",
                       concurrency_limit=1)

        def export_figs(st, fmt_name, progress=gr.Progress()):
            tr = find(st, cat, st["request"], st["method"])
            if tr is None or not tr.cycles:
                return [], _warn("Nothing to export: no trace selected.")
            progress(0.1, desc=f"exporting {fmt_name}")
            k = min(st["cycle"], len(tr.cycles) - 1)
            figs = F.cycle_figures(tr, k)
            other = find(st, cat, st["request"], st["compare"])
            if other is not None:
                figs["compare"] = F.compare_figure(tr, other, k)
            stem = safe_name(tr.request_id, tr.method, f"cycle{tr.cycles[k].cycle}")
            out_dir = export_dir / safe_name(f"{time.time_ns()}")
            try:
                paths = export_figures(figs, out_dir, fmt_name, stem=stem)
            except ExportError as exc:
                html_paths = export_figures(figs, out_dir, "html", stem=stem)
                return [str(p) for p in html_paths], _warn(f"{exc} Exported HTML instead.")
            return [str(p) for p in paths], ""

        export_btn.click(export_figs, [state, fmt], [files, error], api_name="export_figures", concurrency_limit=2)

        def export_trace(st):
            tr = find(st, cat, st["request"], st["method"])
            if tr is None:
                return [], _warn("Nothing to export: no trace selected.")
            path = export_dir / safe_name(f"{time.time_ns()}") / f"{safe_name(tr.request_id, tr.method)}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            export_traces([tr], path)
            return [str(path)], ""

        trace_btn.click(export_trace, state, [files, error], api_name="export_trace")
    return demo


def _decode_live(st: dict, models: ModelHolder, lm, req, method: str, max_new_tokens: int, progress) -> RequestTrace:
    """Decode one request with this session's decoder for ``method`` (made on first use, so
    the session's store grows over its live runs), reporting progress per cycle."""
    from oilbird.presets import make_decoder
    from oilbird.requests import encode
    from oilbird.verifier import Verifier
    with models.lock:
        dec = st["decoders"].get(method)
        if dec is None:
            dec = st["decoders"][method] = make_decoder(method, Verifier(lm))
        ids = encode(lm.tokenizer, req)
        progress(0.1, desc="decoding")
        done = [0]

        def report(c):
            done[0] += len(c.committed)
            progress(min(1.0, done[0] / max_new_tokens), desc=f"cycle {c.cycle}: {done[0]} tokens")
        out = dec.run(req.id, ids, max_new_tokens, on_cycle=report)
        out.meta["live"] = True
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m workbench.app", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1: this machine only)")
    ap.add_argument("--port", type=int, default=7860)
    ap.add_argument("--model", default=None, help="local HF model dir or .gguf for live runs (default SmolLM2-135M)")
    ap.add_argument("--data", default="builtin", help="requests for live runs: builtin | api-bank | PATH")
    ap.add_argument("--traces", default=str(DEFAULT_TRACES), help="precomputed trace file (JSONL)")
    ap.add_argument("--max-new-tokens", type=int, default=LIVE_MAX_NEW_TOKENS, help="for live runs")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    cat = Catalogue.load(args.traces)
    data = Data.load(args.data)
    demo = build_app(cat, data, ModelHolder(args.model), args.max_new_tokens)
    demo.queue(default_concurrency_limit=4)
    print(f"workbench: {len(cat.traces)} traces from {cat.origin or '-'}; built in {time.perf_counter() - t0:.2f} s",
          flush=True)
    demo.launch(server_name=args.host, server_port=args.port, css=CSS, show_error=True, quiet=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
