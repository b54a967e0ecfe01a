"""The notebooks' stepper: request, method and cycle controls over trace records.

    from workbench.widgets import Stepper
    stepper = Stepper(traces)        # list of oilbird.trace.RequestTrace
    stepper.widget()                 # the controls and the views, in a notebook cell
    stepper.show("builtin/00-1", "oilbird", 3)   # what a callback does, callable directly

Controls: a request dropdown, a method dropdown, a cycle slider linked in the browser to a
Play widget (``widgets.jslink``, so playing needs no round trip through the kernel),
Prev / Next buttons, and the request's gap moments (:meth:`Stepper.moments`; picking one jumps
to its cycle, :meth:`Stepper.jump`). Every callback only calls :meth:`Stepper.show` (through
:meth:`Stepper.select` or :meth:`Stepper.step`) and routes what it draws, or the error it
raised, into the stepper's ``ipywidgets.Output``, so a failure shows there as a message instead
of vanishing into the kernel log. Callbacks do not fire when a notebook runs headless, so the
tests call :meth:`Stepper.show`, :meth:`Stepper.step`, :meth:`Stepper.select` directly.

The views are the workbench's own figure functions (:mod:`workbench.figures`): the draft
tree, the nearest neighbours and the gap strip, the same ones the Gradio app draws. Nothing
here touches the model; a stepper only reads the traces it was given.
"""
from __future__ import annotations

import html
from typing import Iterable

import plotly.graph_objects as go

from oilbird.trace import RequestTrace

from . import figures as F
from .figures import first_cycle, last_cycle
from .offline import figure_bundle
from .palette import WARNING_CSS, Style
from .session import preferred_method, same_place

VIEWS = ("tree", "neighbours", "gap")


class StepperError(ValueError):
    """An unknown request, method or cycle. The message lists what there is."""


def figures_for(request: RequestTrace, cycle: int, views: Iterable[str] = VIEWS,
                style: Style | None = None, moment: tuple[int, int] | None = None) -> dict[str, go.Figure]:
    """The views of cycle index ``cycle`` of ``request``, by name (see :data:`VIEWS`):
    ``tree`` (:func:`~workbench.figures.tree_figure`), ``neighbours``
    (:func:`~workbench.figures.neighbours_figure`), ``gap``
    (:func:`~workbench.figures.gap_strip_figure`, a bar under the tokens ``moment`` spans: the
    gap moment shown), ``text`` and ``metrics``. A trace without
    cycle records has cycle 0 only, drawn as messages (as :func:`~workbench.figures.cycle_figures`)."""
    names = ("tree", "neighbours", "gap", "text", "metrics")
    unknown = [v for v in views if v not in names]
    if unknown:
        raise StepperError(f"unknown view(s) {unknown}; choose from {', '.join(names)}")
    if not request.cycles and cycle == 0:
        specs = F.cycle_specs(request, 0, style)
        return {v: F.figure(specs[v], style) for v in views}
    try:
        c = F.cycle_at(request, cycle)
    except ValueError as exc:
        raise StepperError(str(exc)) from None
    if c is None:                                   # no cycle records: only cycle 0 (above) exists
        raise StepperError(f"cycle {cycle} is outside 0..0 for request {request.request_id!r} ({request.method})")
    make = {"tree": lambda: F.tree_figure(c, style=style, keyed=F.drafted_sources(request), **F.trace_marks(request)),
            "neighbours": lambda: F.neighbours_figure(c, style=style, request=request),
            "gap": lambda: F.gap_strip_figure(request, cycle, style, moment),
            "text": lambda: F.text_figure(request, cycle, style),
            "metrics": lambda: F.metrics_figure(request, cycle, style)}
    return {v: make[v]() for v in views}


class Stepper:
    """Step through the cycles of a set of traces, one (request, method, cycle) at a time.

    The selection lives on the instance (one stepper per notebook cell); the widgets are built
    on the first :meth:`widget` call, so a stepper without widgets (in a test) costs nothing.
    """

    def __init__(self, traces: Iterable[RequestTrace], views: Iterable[str] = VIEWS,
                 style: Style | None = None):
        self.traces: dict[tuple[str, str], RequestTrace] = {}
        for t in traces:
            self.traces[(t.request_id, t.method)] = t
        if not self.traces:
            raise StepperError("no traces to step through")
        self.views = tuple(views)
        self.style = style
        self.request_ids = list(dict.fromkeys(r for r, _ in self.traces))
        self.methods = list(dict.fromkeys(m for _, m in self.traces))
        rid = self.request_ids[0]
        method = preferred_method(self.methods_of(rid))     # as the app and notebook 02 open
        self.request, self.method = rid, method
        self.cycle = first_cycle(self.traces[(rid, method)])
        # the gap moment shown (a value of moments()): the one picked while its cycle is on
        # screen, else the cycle's own (moment_at), else None; the strip underlines its tokens
        self.moment: str | None = F.moment_at(self.traces[(rid, method)], self.cycle)
        self.last_error: str | None = None
        self._w: dict | None = None
        self._syncing = False

    # -- the plain functions the callbacks call --------------------------------------------
    def methods_of(self, request_id: str) -> list[str]:
        return [m for m in self.methods if (request_id, m) in self.traces]

    def trace(self, request_id: str, method: str) -> RequestTrace:
        """The trace of (request, method); StepperError naming the choices if there is none."""
        tr = self.traces.get((request_id, method))
        if tr is None:
            if request_id not in self.request_ids:
                raise StepperError(f"unknown request {request_id!r}; choose from {', '.join(self.request_ids)}")
            raise StepperError(f"no trace of request {request_id!r} with method {method!r}; "
                               f"it has {', '.join(self.methods_of(request_id))}")
        return tr

    def show(self, request_id: str | None = None, method: str | None = None,
             cycle: int | None = None) -> dict[str, go.Figure]:
        """Select (request, method, cycle) (None keeps the current one), draw the views into
        the output widget when there is one, and return them by name. Raises StepperError for
        an unknown request or method or a cycle out of range, leaving the selection as it was."""
        rid = self.request if request_id is None else request_id
        m = self.method if method is None else method
        tr = self.trace(rid, m)
        k = self.cycle if cycle is None else int(cycle)
        moment = F.moment_kept(tr, self.moment, k, (rid, m) == (self.request, self.method))
        figs = figures_for(tr, k, self.views, self.style, F.moment_span(tr, moment))
        self.request, self.method, self.cycle, self.moment = rid, m, k, moment
        if self._w is not None:
            self._sync_controls(tr)
            self._draw([self._w_header(tr), *figs.values()])
        return figs

    def select(self, request_id: str, method: str | None = None) -> dict[str, go.Figure]:
        """A new request (and method): keep the method if the request has it, else take its
        first; open on the first cycle with a draft tree."""
        if request_id not in self.request_ids:
            raise StepperError(f"unknown request {request_id!r}; choose from {', '.join(self.request_ids)}")
        have = self.methods_of(request_id)
        m = method if method is not None else (self.method if self.method in have else have[0])
        return self.show(request_id, m, first_cycle(self.trace(request_id, m)))

    def switch(self, method: str) -> dict[str, go.Figure]:
        """Another method's trace of the request shown, at the cycle that commits the token this
        one's cycle commits first (as the app's method menu does: a class compares the two trees
        there; :func:`~workbench.session.same_place`)."""
        new = self.trace(self.request, method)        # (a method the request lacks: a StepperError)
        return self.show(self.request, method, same_place(self.trace(self.request, self.method), self.cycle, new))

    def step(self, delta: int) -> dict[str, go.Figure]:
        """Move ``delta`` cycles, clamped to the request's cycles (Prev = -1, Next = +1)."""
        top = last_cycle(self.trace(self.request, self.method))
        return self.show(cycle=max(0, min(top, self.cycle + delta)))

    def moments(self) -> list[tuple[str, str]]:
        """The selected request's gap moments as (label, key) pairs
        (:func:`~workbench.figures.moment_choices`): where the lexical key failed and the
        semantic key reaches the token, or misses it too, or the token was absent from the pool."""
        return F.moment_choices(self.trace(self.request, self.method))

    def jump(self, key: str | int) -> dict[str, go.Figure]:
        """Go to the cycle that shows gap moment ``key`` (a value of :meth:`moments`; ``GapMoment.cycle``)."""
        m = F.moment_of(self.trace(self.request, self.method), key)
        if m is None or m.cycle is None:
            have = ", ".join(v for _, v in self.moments()) or "none"
            raise StepperError(f"no gap moment {key!r} in request {self.request!r} ({self.method}); it has {have}")
        self.moment = m.key                 # picked: shown (and underlined) while its cycle is
        return self.show(cycle=m.cycle)

    def describe(self) -> str:
        """One line about the current cycle (what the header shows)."""
        tr = self.trace(self.request, self.method)
        if not tr.cycles:
            return f"{self.request} · {self.method} · {F.NO_CYCLES} · {len(tr.output_ids)} tokens"
        c = tr.cycles[self.cycle]
        upto = F.committed_upto(tr, self.cycle)
        return (f"{self.request} · {self.method} · {F.cycle_count(tr, self.cycle)} · "
                f"{len(c.committed)} committed this cycle · {upto} of {len(tr.output_ids)} tokens · "
                f"τ {tr.tau:.2f}")

    # -- the widgets ---------------------------------------------------------------------------
    def widget(self):
        """The controls above an Output that holds the views (an ``ipywidgets.VBox``)."""
        import ipywidgets as W
        if self._w is None:
            tr = self.trace(self.request, self.method)
            top = last_cycle(tr)
            w = {
                "request": W.Dropdown(options=self.request_ids, value=self.request, description="request"),
                "method": W.Dropdown(options=self.methods_of(self.request), value=self.method,
                                     description="method"),
                "cycle": W.IntSlider(value=self.cycle, min=0, max=top, description="cycle",
                                     continuous_update=False, disabled=top == 0),
                "play": W.Play(value=self.cycle, min=0, max=top, interval=900, description="play",
                               disabled=top == 0),
                "prev": W.Button(description="◀ Prev", layout=W.Layout(width="90px")),
                "next": W.Button(description="Next ▶", layout=W.Layout(width="90px")),
                "moments": W.Dropdown(options=[("-", None)] + self.moments(), value=None,
                                      description="gap moments", layout=W.Layout(width="60%")),
                "out": W.Output(),
            }
            # Play drives the slider in the browser; the slider's change reaches the kernel
            w["link"] = W.jslink((w["play"], "value"), (w["cycle"], "value"))
            w["request"].observe(self._on_request, names="value")
            w["method"].observe(self._on_method, names="value")
            w["cycle"].observe(self._on_cycle, names="value")
            w["moments"].observe(self._on_moment, names="value")
            w["prev"].on_click(lambda _b: self._guard(self.step, -1))
            w["next"].on_click(lambda _b: self._guard(self.step, 1))
            self._w = w
            self._w["box"] = W.VBox([W.HBox([w["request"], w["method"]]),
                                     W.HBox([w["prev"], w["next"], w["play"], w["cycle"]]), w["moments"],
                                     w["out"]])
            self._guard(self.show)
        return self._w["box"]

    def _w_header(self, tr: RequestTrace):
        from IPython.display import HTML
        from .panels.provenance import replay_note
        live = F.live_mark(tr)
        if replay_note(tr):
            live = f" · {html.escape(replay_note(tr))}"
        return HTML(f"<b>{html.escape(self.describe())}</b>{live}")

    def _sync_controls(self, tr: RequestTrace) -> None:
        """Set the controls to the selection without firing their callbacks again."""
        w = self._w
        self._syncing = True
        try:
            w["request"].value = self.request
            w["method"].options = self.methods_of(self.request)
            w["method"].value = self.method
            options = [("-", None)] + self.moments()
            if list(w["moments"].options) != options:       # a new request: its own moments
                w["moments"].options = options
            # the moment shown (show's: the one picked while its cycle is on screen, else the
            # cycle's own), or "-": picking a moment again after a step jumps back to it
            w["moments"].value = self.moment if self.moment in [v for _, v in options[1:]] else None
            top = last_cycle(tr)
            for key in ("cycle", "play"):     # a prefill-only request: nothing to step through
                w[key].max, w[key].disabled = top, top == 0
                w[key].value = self.cycle
        finally:
            self._syncing = False

    def _guard(self, fn, *args):
        """Run a callback; an exception becomes a visible message in the Output (and
        ``last_error``), and the selection stays as it was."""
        self.last_error = None
        try:
            return fn(*args)
        except Exception as exc:   # a UI boundary: show every failure, never lose it
            self.last_error = f"{type(exc).__name__}: {exc}"
            if self._w is not None:
                from IPython.display import HTML
                self._draw([HTML(f"<div style='{WARNING_CSS}'><b>error</b>: {html.escape(self.last_error)}</div>")])
            return None

    def _draw(self, items) -> None:
        """Replace what the Output widget shows. Setting its outputs directly (rather than
        ``with out: display(...)``) needs no message routing, so it works the same from a
        button callback, a headless kernel (nbclient) and a plain Python process."""
        out = self._w["out"]
        out.outputs = ()
        for item in items:
            if isinstance(item, go.Figure):
                out.outputs += ({"output_type": "display_data", "data": figure_bundle(item), "metadata": {}},)
            else:
                out.append_display_data(item)

    def _on_request(self, change) -> None:
        if not self._syncing:
            self._guard(self.select, change["new"])

    def _on_method(self, change) -> None:
        if not self._syncing and change["new"] is not None:
            self._guard(self.switch, change["new"])

    def _on_moment(self, change) -> None:
        if not self._syncing and change["new"] is not None:
            self._guard(self.jump, change["new"])

    def _on_cycle(self, change) -> None:
        if not self._syncing:
            self._guard(self.show, None, None, change["new"])
