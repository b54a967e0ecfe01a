"""What the workbench knows and what one browser session holds, without gradio or torch.

* :class:`Catalogue`: the precomputed traces, read once at start and never changed;
* :class:`Data`: the requests a live run can decode (``--data``);
* :class:`ModelHolder`: the one lazily loaded model (and its lock), shared by all sessions;
* :class:`Session` (:func:`new_session`): what one browser session holds: the selection
  (request, method, compare-with, cycle), whether it plays, the traces it uploaded or decoded
  live, and its live decoders. The app keeps it in ``gr.State``; nothing per-session lives in
  module globals;
* :func:`decode_live`: one live run of a session's decoder for a method (:func:`live_sampling`
  reads its sampling settings from the UI; :func:`cannot_run_live` says when none can be made).

Nothing here imports gradio or torch when it is imported (a live run loads torch), so
``python -m workbench.app`` can show its first figure (:mod:`workbench.preview`) while those load.
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

from oilbird.methods import PRESETS
from oilbird.trace import RequestTrace, TraceError, load_traces

from .panels.cycle import first_cycle
from .panels.provenance import token_cycles
from .panels.gap_moments import clarity, clearest_moment, moment_at

TITLE = "Oilbird workbench"
LIVE_MAX_NEW_TOKENS = 48   # new tokens per live run (the app's --max-new-tokens default)
# nodes per live draft tree (the app's --budget default): the shipped built-in traces' size (the
# README's `trace ... --budget 24`), so a live run draws trees a class can compare with them
LIVE_BUDGET = 24
# Play's pace: seconds per cycle, the first the default (a class may want it slower)
PLAY_PACES = (0.8, 1.5, 3.0)

# the preset names from oilbird.methods (no torch), the method and its host first in menus
PRESET_NAMES = ("oilbird", "goose") + tuple(m for m in PRESETS if m not in ("oilbird", "goose"))


class LiveRunError(RuntimeError):
    """A live run cannot start (bad model path, ...); the message is shown in the UI."""


# an absolute path (POSIX, home-relative or Windows) not inside a word or a URL; group 1 is its last part
_PATH = re.compile(r"""(?<![\w.:/\\~])(?:/|~[/\\]|[A-Za-z]:\\)(?:[^\s/\\'"`]+[/\\])+([^\s/\\'"`]*)""")


def public(message: str, *paths: str | Path) -> str:
    """``message`` as the app may show it to a browser: on one line, each of ``paths`` (and any
    other absolute path of this machine in it) cut to its last part, a file's name.

    >>> public("trace file '/srv/runs/x.jsonl' line 3:\\n  bad")
    "trace file 'x.jsonl' line 3: bad"
    """
    text = " ".join(str(message).split())
    for p in paths:
        if str(p):
            text = text.replace(str(Path(p)), Path(p).name).replace(str(p), Path(p).name)
    return _PATH.sub(lambda m: m.group(1) or "…", text)


def read_error(exc: Exception, path: str | Path) -> str:
    """One line for a file that could not be read, naming it by its name only. A
    :class:`~oilbird.trace.TraceError` names the file and line itself; anything else a loader
    lets through is named with its type, never as a traceback."""
    text = str(exc) if isinstance(exc, TraceError) else f"{Path(path).name}: {type(exc).__name__}: {exc}"
    return public(text, path)


@dataclass
class Catalogue:
    """Precomputed traces by (request id, method), in file order. Read-only after start."""
    traces: dict[tuple[str, str], RequestTrace] = field(default_factory=dict)
    origin: str = ""
    files: dict[tuple[str, str], str] = field(default_factory=dict)   # the file each trace came from (its path)
    error: str = ""                                     # the first file that could not be read, for a browser
    unread: list[str] = field(default_factory=list)     # each such file, with its full path, for the terminal

    @classmethod
    def load(cls, path: str | Path | list | tuple | None) -> "Catalogue":
        """The traces of one file or several (in order; a later file's trace of the same
        request and method wins). A file that cannot be read is said once, in ``error``; the
        others still load."""
        if path is None:
            return cls()
        paths = [path] if isinstance(path, (str, Path)) else list(path)
        cat = cls(origin=", ".join(str(p) for p in paths))
        for p in paths:
            try:
                traces = load_traces(p)
            except Exception as exc:   # noqa: BLE001 - TraceError, or whatever a loader lets through: one line
                cat.error = cat.error or f"Could not read the precomputed traces: {read_error(exc, p)}"
                cat.unread.append(str(exc) if isinstance(exc, TraceError) else f"{p}: {type(exc).__name__}: {exc}")
                continue
            cat.traces.update({(t.request_id, t.method): t for t in traces})
            cat.files.update({(t.request_id, t.method): str(p) for t in traces})
        return cat

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
        """The loaded model. Raises :class:`LiveRunError` for a path that does not exist, and
        ``oilbird.model.ModelError`` when loading fails (the same message on every later call)."""
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
                except (ModelError, OSError, ValueError) as exc:   # said on every later call: no retry per click
                    self._error = f"{exc} (the app loads it once: restart the app to try again)"
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
        from oilbird.data.requests import DataError, load_requests
        try:
            return cls(name, {r.id: r for r in load_requests(name)})
        except (DataError, OSError, ValueError) as exc:
            return cls(name, error=public(f"Could not read --data {Path(name).name}: {exc}", name))


def cannot_run_live(request: str, method: str, data: Data | None) -> str | None:
    """Why a live run of ``request`` with ``method`` cannot be made (its prompt not in ``--data``,
    or the method not a preset), or None if it can (a missing trace's message advises one then)."""
    if method not in PRESET_NAMES:
        return f"'{method}' is not a preset (live runs need one of {', '.join(PRESET_NAMES)})"
    if data is not None and data.error:
        return f"--data {Path(data.name).name} could not be read (see the banner)"
    if data is not None and request not in data.requests:
        return f"--data {Path(data.name).name} holds no prompt for it"
    return None


@dataclass
class Session:
    """What one browser session holds (the app keeps it in ``gr.State``, one copy per session).

    ``extra``: the traces this session uploaded or decoded live, by (request id, method),
    looked up before the catalogue's; ``decoders``: its live decoders by method, made on first
    use so that its store grows over its live runs; ``labellers``: beside each decoder, the gap
    labels of its runs against what its store held (None once a run could not be labelled);
    ``funnel_shown``: the funnel was counted, so it is counted again for each new selection (its
    scope is the selection's traffic)."""
    request: str
    method: str
    compare: str
    cycle: int = 0
    playing: bool = False
    play_every: float = PLAY_PACES[0]    # Play's seconds per cycle (the pace menu)
    extra: dict[tuple[str, str], RequestTrace] = field(default_factory=dict)
    extra_from: dict[tuple[str, str], str] = field(default_factory=dict)   # an upload's file (its path), or LIVE_ORIGIN
    decoders: dict[str, object] = field(default_factory=dict)
    labellers: dict[str, object] = field(default_factory=dict)
    funnel_shown: bool = False       # counted once: the funnel then follows every new selection
    moment_shown: str | None = None  # the gap-moments menu's value as last set (a pick, or the cycle's moment)
    moment_request: str | None = None   # ... the request it is a moment of (a pick is that request's)
    menu_of: tuple | None = None     # the trace whose moments the menu lists (moments_menu.menu_update's key)
    # live runs by number, in the order Run was pressed: a run stops after its current cycle once
    # Stop was pressed at or after its press (stop_upto >= its number); a later run never is
    live_pressed: int = 0
    live_done: int = 0        # the last run ended (Stop live run is clickable while one pressed has not: live_controls)
    stop_upto: int = 0


# Which of a Session's fields are the view (what is shown and where) and which are shared with
# the session's other events (a live run holds the same Session and writes them while it runs).
# An upload draws on a copy and then takes the copy's view only (:func:`take_view`), so a live
# run's counters or traces that changed meanwhile stay. Every field is one or the other: the
# test of this split fails on a new field until it is named here.
VIEW_FIELDS = ("request", "method", "compare", "cycle", "moment_shown", "moment_request", "menu_of")
SHARED_FIELDS = ("playing", "play_every", "extra", "extra_from", "decoders", "labellers", "funnel_shown",
                 "live_pressed", "live_done", "stop_upto")


def take_view(st: Session, drawn: Session) -> None:
    """Give ``st`` the view of ``drawn`` (a copy of it that was drawn): :data:`VIEW_FIELDS`."""
    for name in VIEW_FIELDS:
        setattr(st, name, getattr(drawn, name))


def loaded_note(name: str, traces: list[RequestTrace], first: RequestTrace,
                left_out: list[RequestTrace] = (), replaced: int = 0) -> str:
    """The banner's line after an upload drew (a file of the request on screen looked unchanged):
    what came in and what is shown of it, how many of its traces replace ones shown before under
    the same request and method (``replaced``: a shipped trace, or an earlier upload's; the menus
    name a request, not the file it came from), and what was left out (:func:`upload_split`)."""
    n = len({t.request_id for t in traces})
    took = (f" {replaced} of them replace{'s' * (replaced == 1)} the trace{'s' * (replaced != 1)} shown before for "
            f"the same request and method." if replaced else "")
    return (f"Loaded {name}: {len(traces)} trace{'s' * (len(traces) != 1)} of {n} request{'s' * (n != 1)}; "
            f"showing {first.request_id} with {first.method}.{took}"
            + (f" {left_out_note(left_out)}" if left_out else ""))


def left_out_note(left_out: list[RequestTrace]) -> str:
    """What an upload left out, in words (:func:`upload_split`)."""
    out = [f"{t.request_id} with {t.method}" for t in left_out]
    return (f"Left out {len(out)}: this session's live run{'s' * (len(out) != 1)} of {', '.join(out[:3])}"
            f"{', ...' if len(out) > 3 else ''} stay{'s' * (len(out) == 1)} (a live run cannot be remade: its "
            f"store has moved on).")


def upload_split(st: "Session", traces: list[RequestTrace]) -> tuple[list[RequestTrace], list[RequestTrace]]:
    """An upload's traces the session takes, and those it leaves out: one of a request and
    method this session ran live (its trace stays: a live run cannot be remade, the store it
    read has moved on; an upload can be loaded again)."""
    live = {k for k in st.extra if st.extra_from.get(k) == LIVE_ORIGIN}
    return ([t for t in traces if (t.request_id, t.method) not in live],
            [t for t in traces if (t.request_id, t.method) in live])


LIVE_ORIGIN = "this session's live runs"     # where a live run's trace comes from (Session.extra_from)


def origin(st: Session, cat: Catalogue, tr: RequestTrace) -> str:
    """Where the trace ``tr`` of this session came from: the file it was uploaded in (gradio's
    copy: each upload its own) or the catalogue read it from, or :data:`LIVE_ORIGIN`; "" where
    it is not known. Two files of one name are two origins (``replay --traces`` always writes
    ``traces.jsonl``); :func:`origin_name` is how it is shown."""
    key = (tr.request_id, tr.method)
    return st.extra_from.get(key, "") if key in st.extra else cat.files.get(key, "")


def origin_name(origin: str) -> str:
    """An :func:`origin` as the app shows it: the file's name (no path of this machine)."""
    return origin if origin in ("", LIVE_ORIGIN) else Path(origin).name


def new_session(cat: Catalogue, data: Data) -> Session:
    """The initial per-session state: a traced request, method "oilbird" when there is one."""
    rids = cat.request_ids() or list(data.requests)
    methods = cat.methods() or ["oilbird"]
    method = preferred_method(methods)
    # open where the semantic key shows best (the point of the workbench): a replay of recorded
    # agent traffic (the traffic it was designed for) over a live run of the small model, a real
    # language model's recording over the scripted agent's, then the request with the clearest gap
    # moment (panels.gap_moments), then the most tokens that the semantic key alone proposed, else
    # the first where it retrieved anything (the very first request of a run has an empty store)
    rid = max(rids, key=lambda r: opening_rank(cat.traces.get((r, method))), default="")
    other = [m for m in methods if m != method]
    st = Session(rid, method, other[0] if other else method)
    st.cycle = opening_cycle(find(st, cat, rid, method))
    tr = find(st, cat, rid, method)
    st.moment_shown, st.moment_request, st.menu_of = moment_at(tr, st.cycle), rid, (rid, method, id(tr))
    return st


def opening_rank(tr: RequestTrace | None) -> tuple:
    """How well a trace shows the semantic key at work, for :func:`new_session` (higher first)."""
    if tr is None:
        return (False,)
    from oilbird.data.agent_workload import MODEL as SCRIPTED
    replay = tr.meta.get("replay")
    by_model = isinstance(replay, dict) and replay.get("recorded_by") not in (None, SCRIPTED)
    best = clearest_moment(tr)
    return (replay is not None, by_model,
            clarity(best) if best else (False,),
            sum(s == ["semantic"] for c in tr.cycles for s in c.committed_sources),
            any(c.neighbours for c in tr.cycles))


def preferred_method(methods: list[str]) -> str:
    """The method a view opens on: "oilbird" when it is there (the method the workbench is
    about), else the first whose drafter has the hidden-state key (``oilbird:reserved``,
    ``recycling+sem``), else the first."""
    from oilbird.methods import lookup
    keyed = [m for m in methods if (spec := lookup(m)) is not None and spec.has_semantic]
    return "oilbird" if "oilbird" in methods else keyed[0] if keyed else methods[0]


def opening(traces: list[RequestTrace]) -> RequestTrace:
    """Where a set of traces (an uploaded file) opens: a trace of :func:`preferred_method`'s
    method ("oilbird", else one with the hidden-state key, else the first trace's), the request
    :func:`opening_rank` ranks first; ties keep the file's order."""
    method = preferred_method([t.method for t in traces])
    mine = [t for t in traces if t.method == method]
    return max(mine, key=opening_rank)                 # max keeps the first of equals


def opening_cycle(tr: RequestTrace | None) -> int:
    """The cycle a request opens on: its clearest gap moment's, else its first with a tree."""
    best = clearest_moment(tr) if tr is not None else None
    return best.cycle if best is not None and best.cycle is not None else first_cycle(tr)


def same_place(old: RequestTrace | None, cycle: int, new: RequestTrace | None) -> int:
    """The cycle of ``new`` (another method's trace of the same request) that commits the token
    ``old``'s cycle index ``cycle`` commits first, so switching methods keeps the moment in view
    (a class compares the two trees there); the first cycle with a tree when there is no such
    token (cycle 0, a different output, no trace)."""
    if old is None or new is None or not 0 < cycle < len(old.cycles):
        return first_cycle(new)
    at = old.cycles[cycle].generated_before
    if old.output_ids[: at + 1] != new.output_ids[: at + 1]:
        return first_cycle(new)
    cycles = token_cycles(new)
    return cycles[at] if at < len(cycles) else first_cycle(new)


def find(st: Session, cat: Catalogue, rid: str, method: str) -> RequestTrace | None:
    """This session's trace of (request, method): its own (uploaded / live) first."""
    return st.extra.get((rid, method)) or cat.traces.get((rid, method))


def request_choices(st: Session, cat: Catalogue, data: Data) -> list[str]:
    return list(dict.fromkeys([rid for rid, _ in st.extra] + cat.request_ids() + list(data.requests)))


def method_choices(st: Session, cat: Catalogue) -> list[str]:
    from_traces = [m for _, m in st.extra] + cat.methods()
    return list(dict.fromkeys(from_traces + list(PRESET_NAMES)))


def request_menu(st: Session, cat: Catalogue, data: Data) -> list[tuple[str, str]]:
    """:func:`request_choices` as (label, id) pairs for a menu: a traced request's label names
    the methods it has traces of, so one sees what can be stepped through without a live run."""
    traced: dict[str, list[str]] = {}
    for rid, m in [*st.extra, *cat.traces]:
        traced.setdefault(rid, []).append(m)
    return [(f"{rid} · {', '.join(dict.fromkeys(traced[rid]))}" if rid in traced else rid, rid)
            for rid in request_choices(st, cat, data)]


def method_menu(st: Session, cat: Catalogue, data: Data | None = None) -> list[tuple[str, str]]:
    """:func:`method_choices` as (label, name) pairs for the selected request: a method without a
    trace of it says so (it needs a live run), and one that could not be run live either is left
    out (on a replayed recording, eleven presets led to eleven pages saying so)."""
    menu = []
    for m in method_choices(st, cat):
        if find(st, cat, st.request, m) is not None:
            menu.append((m, m))
        elif cannot_run_live(st.request, m, data) is None or m in (st.method, st.compare):   # (the selected stay)
            menu.append((f"{m} · no trace", m))
    return menu


# ------------------------------------------------------------------------- a live run
def live_sampling(temperature, top_p, seed):
    """The live run's sampling settings from the UI (None: greedy); ValueError, one line, when bad
    (an emptied box too: it had run greedy, said nowhere, the box still empty)."""
    from oilbird.sampling import SamplingParams, parse_seed
    empty = [name for name, v in (("temperature", temperature), ("top-p", top_p)) if v is None or str(v).strip() == ""]
    if empty:
        raise ValueError(f"the {' and '.join(empty)} box is empty (temperature 0 decodes greedily; top-p 1 keeps "
                         f"every token)")
    try:
        t, p = float(temperature), float(top_p)
    except (TypeError, ValueError):
        raise ValueError("temperature and top-p must be numbers") from None
    params = SamplingParams(t, p, parse_seed("0" if seed is None or str(seed).strip() == "" else seed))
    return None if params.greedy else params


def live_decoder(method: str, verifier, budget: int = LIVE_BUDGET):
    """A decoder for live runs (the app's, a notebook's): ``method``'s preset on ``verifier``,
    with trees of ``budget`` nodes (:data:`LIVE_BUDGET`: the shipped traces' size)."""
    from oilbird.methods import TreeConfig
    from oilbird.presets import make_decoder
    return make_decoder(method, verifier, tree=TreeConfig.sized(budget))


def decode_live(st: Session, models: ModelHolder, lm, req, method: str, max_new_tokens: int, progress,
                sampling=None, stopped=lambda: False, budget: int = LIVE_BUDGET) -> RequestTrace:
    """Decode one request with this session's decoder for ``method`` (made on first use, with a
    tree of ``budget`` nodes, so the session's store grows over its live runs), reporting
    progress per cycle; ``sampling`` (a :class:`~oilbird.sampling.SamplingParams`, None =
    greedy) samples instead; ``stopped()`` True ends the request after the cycle just decoded.

    The trace gets gap labels against the session's store for ``method`` (the outputs its
    earlier live runs decoded: :class:`~oilbird.evaluation.labels.RunningLabels`), one
    teacher-forced forward more per run."""
    from oilbird.data.requests import encode
    from oilbird.evaluation.labels import RunningLabels
    from oilbird.verifier import Verifier
    with models.lock:
        dec = st.decoders.get(method)
        if dec is None:
            dec = st.decoders[method] = live_decoder(method, Verifier(lm), budget)
            st.labellers[method] = RunningLabels(lm)      # its pool follows this decoder's store
        ids = encode(lm.tokenizer, req)
        progress(0.1, desc="decoding")
        done = [0]

        def report(c) -> bool:
            done[0] += len(c.committed)
            progress(min(1.0, done[0] / max_new_tokens), desc=f"cycle {c.cycle}: {done[0]} tokens")
            return stopped()                     # Stop pressed: the decoder ends the request here
        judge = None
        if sampling is not None:
            from oilbird.sampled import Sampled          # (the trace says so: Sampled.meta)
            judge = Sampled(sampling, req.id)
        held = _stored(dec)
        try:
            out = dec.run(req.id, ids, max_new_tokens, on_cycle=report, judge=judge)     # None: greedy
        except BaseException:
            if _stored(dec) != held and st.labellers.get(method) is not None:
                st.labellers[method] = None    # the store kept a partial output the labeller never saw
            raise
        out.meta["live"] = True
        progress(1.0, desc="gap labels: one more pass over the prompt and output")
        _label(st, method, out, ids)
    return out


def _stored(dec) -> int:
    """How many requests a decoder's store has taken (0 without a store)."""
    store = getattr(dec, "store", None)
    return store.n_requests if store is not None else 0


def _label(st: Session, method: str, trace: RequestTrace, ids: list[int]) -> None:
    """Give a live run its gap labels from the session's labeller for ``method``; a run that
    cannot be labelled (the forward failed) stops that labeller, whose pool would no longer be
    what the store holds, and its trace and the later ones of ``method`` say why they have none."""
    if method not in st.labellers:         # (a decoder the session was given from outside)
        return
    labeller = st.labellers[method]
    if labeller is not None:
        try:
            labeller.label(trace, ids)
            return
        except Exception as exc:           # noqa: BLE001 - out of memory...: the run itself stands
            st.labellers[method] = None
            trace.meta["no_labels"] = public(f"this run could not be labelled ({type(exc).__name__}: {exc})")
            return
    trace.meta["no_labels"] = ("an earlier live run of this method could not be labelled (or failed after "
                               "its store kept part of it), so what this session's store held is not known")
