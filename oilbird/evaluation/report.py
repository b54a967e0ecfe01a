"""Bench outputs beside ``results.json``: a CSV and plotly figures (HTML and PNG).

``write_report(results, out_dir)`` takes the dict :func:`oilbird.evaluation.bench.run_bench` returns and
writes

* ``results.csv`` — one row per method: tau, tokens_per_s, speedup, decode_speedup, lossless,
  n_requests, overhead_share, then ``share_<source>`` for every draft source (and the verifier's
  ``bonus``): the fraction of the method's committed tokens credited to that source (a drafted
  token proposed by several sources is split evenly, so a row's shares add up to 1). Methods
  without cycle traces (``ar``, ``hf-greedy``, ``hf-pld``) leave overhead and shares empty.
* ``tau.html`` / ``tau.png`` and ``speedup.html`` / ``speedup.png`` — bars per method (the
  speedup ones only when the run has ``ar``). The
  HTML embeds plotly.js (no CDN: it opens offline). PNG export uses kaleido, which needs a
  Chrome/Chromium (Debian: ``apt-get install chromium``); if it fails, a warning says why and
  the HTML is still written.
"""
from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio

from ..errors import InputError
from ..jsonio import read_json
from ..trace import recorder_words
from .intervals import pooled_ratio, ratio_words
from .results import TIMED, MethodStats, num_cell, check_cell, check_header, measured

BASE_COLUMNS = ("method", "tau", "tokens_per_s", "speedup", "decode_speedup", "lossless",
                "n_requests", "overhead_share")


def _sources(methods: dict) -> list[str]:
    names = sorted({s for r in methods.values() for s in r.get("accepted_by_source", {})})
    return sorted(names, key=lambda s: s == "bonus")   # bonus last


def csv_rows(results: dict) -> list[dict]:
    """The rows of ``results.csv`` as dicts (None = not applicable)."""
    methods = results["methods"]
    srcs = _sources(methods)
    rows = []
    for m, r in methods.items():
        row = {"method": m}
        for k in BASE_COLUMNS[1:]:
            row[k] = r.get(k)
        acc = r.get("accepted_by_source")
        tokens = r.get("tokens") or sum((acc or {}).values())
        for s in srcs:
            row[f"share_{s}"] = (acc.get(s, 0.0) / tokens) if acc is not None and tokens else None
        rows.append(row)
    return rows


def write_csv(results: dict, path: str | Path) -> Path:
    path = Path(path)
    rows = csv_rows(results)
    cols = list(BASE_COLUMNS) + [f"share_{s}" for s in _sources(results["methods"])]
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for row in rows:
            w.writerow({k: ("" if v is None else v) for k, v in row.items()})
    return path


def _subtitle(results: dict) -> str:
    bits = [str(results.get(k)) for k in ("model", "data") if results.get(k)]
    if results.get("n_requests") is not None:
        bits.append(f"{results['n_requests']} requests")
    if results.get("max_new_tokens") is not None:
        bits.append(f"max {results['max_new_tokens']} new tokens")
    return " · ".join(bits)


def _bars(results: dict, key: str, title: str, ref: float | None) -> go.Figure:
    methods = results["methods"]
    names = list(methods)
    vals = [methods[m].get(key) for m in names]
    failed = [methods[m].get("lossless", True) is False for m in names]    # null: not audited
    colors = ["#c53030" if f else "#2b6cb0" for f in failed]
    text = [("-" if v is None else f"{v:.2f}") + (" NOT lossless" if f else "") for f, v in zip(failed, vals)]
    fig = go.Figure(go.Bar(x=names, y=[v if v is not None else 0 for v in vals], text=text,
                           textposition="outside", marker_color=colors))
    if ref is not None:
        fig.add_hline(y=ref, line_dash="dot", line_color="#718096")
    fig.update_layout(title={"text": f"{title}<br><sup>{_subtitle(results)}</sup>"}, yaxis_title=title,
                      xaxis_title="method", template="plotly_white", width=900, height=500,
                      margin={"t": 90})
    return fig


def figures(results: dict) -> dict[str, go.Figure]:
    """``{"tau": fig, "speedup": fig}``: bars per method (red = not lossless); no speedup
    figure for a run without ``ar``, which has no speedup to draw."""
    figs = {"tau": _bars(results, "tau", "tau (tokens per target forward)", 1.0)}
    if any(r.get("speedup") is not None for r in results["methods"].values()):
        figs["speedup"] = _bars(results, "speedup", "speedup vs ar (ratio of tokens/s)", 1.0)
    return figs


def write_figures(results: dict, out_dir: str | Path, png: bool = True) -> list[Path]:
    """Write every figure as HTML (plotly.js embedded) and, if possible, PNG."""
    out = Path(out_dir)
    figs = figures(results)
    written = []
    for name, fig in figs.items():
        html = out / f"{name}.html"
        fig.write_html(html, include_plotlyjs=True, full_html=True)
        written.append(html)
    if png:
        pngs = [out / f"{name}.png" for name in figs]
        try:   # one browser for all figures: starting Chrome is most of the cost
            pio.write_images(list(figs.values()), pngs)
            written += pngs
        except Exception as exc:   # kaleido missing, no Chrome, browser crash...
            print(f"warning: could not write the PNG figures ({type(exc).__name__}: {exc}); PNG export "
                  f"needs kaleido and a Chrome/Chromium (Debian: apt-get install chromium). "
                  f"The HTML figures in {out} were written.", file=sys.stderr)
    return written


def write_report(results: dict, out_dir: str | Path, png: bool = True) -> list[Path]:
    """``results.csv`` plus the figures in ``out_dir``; returns the paths written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return [write_csv(results, out / "results.csv")] + write_figures(results, out, png=png)


def markdown_table(results: dict) -> str:
    """results.json as a Markdown table (for docs/results.md): one row per method. A measure no
    method has (a fast replay times nothing: tokens/s, speedups, overhead) is left out, not
    printed as a column of dashes."""
    def sole(r):
        v = r.get("sole_share", {}).get("semantic")
        return num_cell(None if v is None else 100 * v, "{:.1f}")
    methods = results["methods"]
    columns = ([(name, True, cell) for _, name, cell in measured(TIMED, methods)]
               + measured([("semantic sole %", True, sole),
                           ("mean nodes", True, lambda r: num_cell(r.get("mean_nodes"), "{:.1f}"))], methods)
               + [(check_header(results), False, check_cell)])
    rows = ["| method | tau | " + " | ".join(h for h, _, _ in columns) + " |",
            "| --- | ---: | " + " | ".join("---:" if right else "---" for _, right, _ in columns) + " |"]
    for m, r in methods.items():
        rows.append(f"| {m} | {r['tau']:.2f} | " + " | ".join(cell(r) for _, _, cell in columns) + " |")
    return "\n".join(rows)


def paired_tau(results: dict, a: str, b: str) -> dict:
    """Method ``a`` against ``b`` request by request (the ``per_request`` rows of one run):
    on how many requests a's tau was higher, equal, lower, the mean per-request difference,
    and on how many a took less wall time. A pooled tau can hide that one long request
    decides it; this says whether it does."""
    ra = {x["request"]: x for x in results["methods"][a].get("per_request", [])}
    rb = {x["request"]: x for x in results["methods"][b].get("per_request", [])}
    both = [k for k in ra if k in rb]
    # (a request without cycles in a trace file has 0 forwards and 0 tokens: tau 0, as RequestTrace.tau)
    diffs = [ra[k]["tokens"] / max(1, ra[k]["forwards"]) - rb[k]["tokens"] / max(1, rb[k]["forwards"])
             for k in both]
    return {"a": a, "b": b, "n": len(diffs), "wins": sum(d > 1e-9 for d in diffs),
            "ties": sum(abs(d) <= 1e-9 for d in diffs), "losses": sum(d < -1e-9 for d in diffs),
            "mean_diff": sum(diffs) / len(diffs) if diffs else 0.0,
            # None where a side has no wall time (a trace file's requests)
            "faster": (sum(ra[k]["seconds"] < rb[k]["seconds"] for k in both)
                       if all(r.get("seconds") for k in both for r in (ra[k], rb[k])) else None),
            # the forwards each needed in all: one extra forward on a near-verbatim request moves
            # its tau by more (8 -> 6.4) than many saved forwards move the others
            "forwards": (sum(ra[k]["forwards"] for k in both), sum(rb[k]["forwards"] for k in both))}


# the comparisons docs/results.md reports, where both methods are in the run
PAIRS = (("oilbird", "goose"), ("pld+sem", "pld"), ("recycling+sem", "recycling"),
         ("oilbird", "oilbird-no-semantic"), ("oilbird", "suffix-arctic"), ("oilbird", "hf-pld"),
         ("oilbird-ungated", "goose"), ("oilbird-ungated", "oilbird"))


def paired_table(results: dict, pairs=PAIRS) -> str:
    """The :func:`paired_tau` comparisons of ``pairs`` present in ``results``, as Markdown, each
    with its pooled tau ratio and that ratio's bootstrap interval over the run's conversations
    or requests (:mod:`oilbird.evaluation.intervals`); also every tree variant ``X:...`` (e.g.
    ``oilbird:expected``) against plain ``X``. Empty when no pair is in the run."""
    rows = ["| pair | tau a / tau b, pooled (95% interval, the units it draws) | tau higher / equal / lower (requests) "
            "| mean per-request tau difference | faster wall clock on | forwards, a vs b |",
            "| --- | ---: | --- | ---: | ---: | ---: |"]
    sized = [(m, m.split(":", 1)[0]) for m in results["methods"] if ":" in m]
    for a, b in dict.fromkeys(list(pairs) + sized):          # each pair once, in order
        if a in results["methods"] and b in results["methods"]:
            p = paired_tau(results, a, b)
            if not p["n"]:          # no per-request rows (a results.json older than them)
                continue
            faster = "-" if p["faster"] is None else f"{p['faster']} of {p['n']}"
            r = pooled_ratio(results, a, b)
            rows.append(f"| {a} vs {b} | {ratio_words(r) if r else '-'} | {p['wins']} / {p['ties']} / {p['losses']} "
                        f"| {p['mean_diff']:+.3f} | {faster} | {p['forwards'][0]} vs {p['forwards'][1]} |")
    return "\n".join(rows) if len(rows) > 2 else ""


def trace_methods(traces) -> dict:
    """A trace file's requests (:func:`oilbird.trace.load_traces`) folded per method into the
    counters a bench run keeps (:class:`oilbird.evaluation.results.MethodStats`): tau, mean nodes, accepted
    and sole-source tokens by source, per-request rows for :func:`paired_tau`. A trace has no
    wall-clock time of its own, so these summaries carry no tokens/s."""
    stats: dict = {}
    for tr in traces:
        st = stats.setdefault(tr.method, MethodStats())
        rp = tr.meta.get("replay")
        conv = rp.get("conversation") if isinstance(rp, dict) else None        # a replayed turn's conversation
        st.add_request(tr.request_id, len(tr.output_ids), tr.forwards, 0.0, 0.0,
                       conv if isinstance(conv, str) else None)
        st.add_trace(tr)
        if tr.lossless is False:
            st.lossless = False
            st.first_failure = st.first_failure or tr.request_id
        elif tr.lossless is None and st.lossless is not False:
            # nothing compared it with greedy decoding (oilbird.audit.audit sets it), or it was sampled
            # before the sampled audit: source_table prints "not audited"
            st.lossless = None
    return {m: st.summary() for m, st in stats.items()}


def trace_origin(traces) -> dict:
    """What a trace file's requests are, in a results file's words (for :func:`whose` and the
    check column): ``{"model", "replay": {"recorded_by", "mode"}}`` when every trace is a
    replay's (``python -m oilbird replay --traces``), ``{"model", "sampling"}`` when every one
    was sampled, ``{"model"}`` when none is either, ``{}`` for a mix or no traces."""
    if not traces:
        return {}
    replays = [t.meta.get("replay") for t in traces]
    models = sorted({t.model for t in traces if t.model})
    model = {"model": ", ".join(models)} if models else {}
    sampled = [t.meta["sampling"] for t in traces if t.meta.get("sampling")]
    if sampled:                      # sampled decoding: never called greedy
        return {**model, "sampling": sampled[0]} if len(sampled) == len(traces) else {}
    if all(isinstance(r, dict) for r in replays):
        who = sorted({str(r.get("recorded_by") or "a recorded model") for r in replays})
        modes = sorted({str(r["mode"]) for r in replays if r.get("mode")})
        return {**model, "replay": {"recorded_by": ", ".join(who), **({"mode": "/".join(modes)} if modes else {})}}
    return model if not any(isinstance(r, dict) for r in replays) else {}


def source_table(methods: dict, check: str = "lossless") -> str:
    """Per method: tau and where its committed tokens came from (a drafted token proposed by
    several sources split evenly between them; the verifier's own token is ``bonus``), and the
    tokens only one source proposed. Markdown, for a trace file's summary; ``check`` names the
    last column (:func:`~oilbird.evaluation.results.check_header`: a replay's traces follow
    their recording, they are not audited against greedy decoding)."""
    def counts(d: dict) -> str:
        items = sorted(d.items(), key=lambda kv: (kv[0] == "bonus", -kv[1]))
        return ", ".join(f"{k} {v:.1f}".removesuffix(".0") for k, v in items if v) or "-"
    rows = [f"| method | requests | tau | mean nodes | accepted tokens by source | sole-source tokens | {check} |",
            "| --- | ---: | ---: | ---: | --- | --- | --- |"]
    for m, r in methods.items():
        rows.append(f"| {m} | {r['n_requests']} | {r['tau']:.2f} | {r.get('mean_nodes', 0):.1f} | "
                    f"{counts(r.get('accepted_by_source', {}))} | {counts(r.get('sole_by_source', {}))} | "
                    f"{'not audited' if r['lossless'] is None else 'yes' if r['lossless'] else 'NO'} |")
    return "\n".join(rows)


class ResultsError(InputError):
    """A results.json or diagnosis.json that is not one: names the file and the field."""


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# what each kind of field must hold, and how the error says it
_KINDS = {
    "a number": _number,
    "a number or null": lambda v: v is None or _number(v),
    "a number >= 0": lambda v: _number(v) and v >= 0,
    "a number >= 0 or null": lambda v: v is None or (_number(v) and v >= 0),
    "a count": lambda v: type(v) is int and v >= 0,
    "a count of at least 1": lambda v: type(v) is int and v >= 1,
    "true or false": lambda v: type(v) is bool,
    "true, false or null": lambda v: v is None or type(v) is bool,
    "a string": lambda v: isinstance(v, str),
    "an object of numbers": lambda v: isinstance(v, dict) and all(_number(x) for x in v.values()),
    "an object": lambda v: isinstance(v, dict),
    "an object of numbers (or nulls), or null": lambda v: v is None or (
        isinstance(v, dict) and all(x is None or _number(x) for x in v.values())),
}
# the fields of one method in results.json (MethodStats.summary): required, then optional
_METHOD_REQUIRED = {"tau": "a number >= 0", "lossless": "true, false or null"}
_METHOD_OPTIONAL = {
    "tokens_per_s": "a number >= 0 or null",                         # a fast replay times nothing
    "valid": "true or false",                                        # sampled runs
    "reproducible": "true or false",             # sampled runs before the sampled audit (lossless null)
    "speedup": "a number >= 0 or null", "decode_speedup": "a number >= 0 or null",
    "decode_tokens_per_s": "a number >= 0 or null", "overhead_share": "a number", "mean_nodes": "a number >= 0",
    "n_requests": "a count", "tokens": "a count", "forwards": "a count", "seconds": "a number >= 0",
    "first_failure": "a string", "accepted_by_source": "an object of numbers",
    "sole_by_source": "an object of numbers", "sole_share": "an object of numbers",
    "stage_share": "an object of numbers"}
# one per_request row
_ROW_REQUIRED = {"request": "a string", "tokens": "a count", "forwards": "a count of at least 1"}
_ROW_OPTIONAL = {"seconds": "a number >= 0", "prefill_seconds": "a number >= 0", "unit": "a string"}
# diagnosis.json (diagnose.summarise): the counts its table prints; the rates are in diagnose.ROWS
_DIAGNOSIS_REQUIRED = {"n_positions": "a count", "n_requests": "a count", "n_gap": "a count",
                       "n_recovered": "a count"}
# ... and the lines below the table (diagnose.summary_lines)
_DIAGNOSIS_OPTIONAL = {"copy_oracle_tau": "an object of numbers (or nulls), or null",
                       "teacher_forced_agreement": "a number or null"}
# a run's progress (oilbird.evaluation.runs.Run.save_results): absent in a file older than it
_PROGRESS = {"complete": "true or false", "n_requests": "a count", "n_requests_planned": "a count"}


def _fields(obj, required: dict, optional: dict, where: str, path) -> None:
    """Every field of ``required`` present and every field of both of its kind, or one
    :class:`ResultsError` naming the file and the field."""
    if not isinstance(obj, dict):
        raise ResultsError(f"{where} is {_show(obj)}, not an object", path)
    for name, kind in required.items():
        if name not in obj:
            raise ResultsError(f"{where} has no '{name}' ({kind})", path)
    for name, kind in {**required, **optional}.items():
        if name in obj and not _KINDS[kind](obj[name]):
            v = obj[name]
            bad = next((k for k, x in v.items() if not _KINDS[kind]({k: x})), None) if isinstance(v, dict) else None
            said = f"'{name}' of {where} is {_show(v)}" + (f" whose '{bad}' is {_show(v[bad])}" if bad else "")
            raise ResultsError(f"{said}, not {kind}", path)


def _show(v) -> str:
    """A wrong value, short: its repr cut to 40 characters; an object or a list by its kind."""
    if isinstance(v, (dict, list)):
        return "an object" if isinstance(v, dict) else "a list"
    if v is None or isinstance(v, bool):
        return json.dumps(v)                   # as the file spells it: null, true, false
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def check_results(res, path=None) -> dict:
    """``res`` if it is a bench results.json that every table here can print (the fields
    :meth:`oilbird.evaluation.results.MethodStats.summary` writes, of the right types); else
    :class:`ResultsError` naming ``path`` and the field."""
    if not isinstance(res, dict) or "methods" not in res:
        raise ResultsError("not a bench results.json (no 'methods' object in it)", path)
    if not isinstance(res["methods"], dict):
        raise ResultsError(f"its 'methods' is {_show(res['methods'])}, not an object (method -> results)", path)
    if not res["methods"]:
        raise ResultsError("its 'methods' holds no method: nothing to report", path)
    _fields(res, {}, _PROGRESS, "the run", path)
    for m, r in res["methods"].items():
        where = f"method '{m}'"
        _fields(r, _METHOD_REQUIRED, _METHOD_OPTIONAL, where, path)
        rows = r.get("per_request", [])
        if not isinstance(rows, list):
            raise ResultsError(f"'per_request' of {where} is {_show(rows)}, not a list", path)
        for i, row in enumerate(rows):
            _fields(row, _ROW_REQUIRED, _ROW_OPTIONAL, f"per_request row {i} of {where}", path)
    return res


def check_diagnosis(res, path=None) -> dict:
    """``res`` if it is a diagnosis.json the gap table can print; else :class:`ResultsError`."""
    from .diagnose import ROWS
    rates = {key: "a number or null" for key, _, _ in ROWS}
    _fields(res, _DIAGNOSIS_REQUIRED, {**rates, **_PROGRESS, **_DIAGNOSIS_OPTIONAL}, "the diagnosis", path)
    if res.get("pool_full") is not None:
        _fields(res["pool_full"], {}, rates, "'pool_full' of the diagnosis", path)
    if "funnel" in res:
        check_funnel(res["funnel"], path)
    return res


def check_funnel(fun, path=None) -> dict:
    """``fun`` if it is the ``funnel`` of a diagnosis.json (:func:`oilbird.evaluation.funnel.count`
    per method) that :func:`~oilbird.evaluation.funnel.format_funnel` can print; else
    :class:`ResultsError` naming the method and the field."""
    from .funnel import REACHED, SHORT, SIDE, STAGES
    if not isinstance(fun, dict):
        raise ResultsError(f"'funnel' of the diagnosis is {_show(fun)}, not an object", path)
    counts = lambda keys: {k: "a count" for k in keys}      # noqa: E731
    for m, f in fun.items():
        where = f"method '{m}' of the funnel"
        _fields(f, {"stages": "an object", "side": "an object", "lost": "an object", "tokens": "an object"}, {},
                where, path)
        _fields(f["stages"], counts(k for k, _ in STAGES), {}, f"'stages' of {where}", path)
        _fields(f["side"], counts(k for k, _ in SIDE), {}, f"'side' of {where}", path)
        _fields(f["lost"], counts(REACHED[:-1]), {}, f"'lost' of {where}", path)
        _fields(f["tokens"], {"reach": "a count", "accepted": "a count", "cycles": "a count", "short": "an object"},
                {}, f"'tokens' of {where}", path)
        _fields(f["tokens"]["short"], counts(SHORT), {}, f"'short' of {where}", path)
    return fun


def load_results(path) -> tuple[str, dict]:
    """What ``python -m oilbird.evaluation.report`` reads, checked: ``("traces", results)`` for a trace
    file (folded by :func:`trace_methods`), ``("diagnosis", diagnosis.json)`` or
    ``("bench", results.json)``, or ``("serve-bench", {"table": ...})`` for a ``serve-bench``
    results.json; a folder means the results.json or diagnosis.json in it.
    Any bytes that are none of these raise one :class:`~oilbird.errors.InputError` (a
    ``TraceError`` or :class:`ResultsError`) naming the file."""
    path = Path(path)
    if path.is_dir():               # a bench or diagnose --out folder
        path = next((path / f for f in ("results.json", "diagnosis.json") if (path / f).is_file()),
                    path / "results.json")
    if path.name.endswith((".jsonl", ".jsonl.gz")):
        return _traces(path)
    if not path.exists():
        raise ResultsError("no such file (give a bench results.json, a diagnosis.json, a trace .jsonl, "
                           "or the folder bench, replay or diagnose wrote)", path)
    try:
        res = read_json(path, ResultsError)
    except ResultsError:
        from .runs import opens_a_trace
        if opens_a_trace(path):       # a trace file under another name (the app's upload takes .txt)
            return _traces(path)
        raise
    if isinstance(res, dict) and res.get("kind") == "request":       # a one-line trace file under another name
        return _traces(path)
    if isinstance(res, dict) and "present_2" in res and "methods" not in res:   # diagnose's output
        return "diagnosis", check_diagnosis(res, path)
    if isinstance(res, dict) and "batch_sizes" in res and "methods" not in res:  # serve-bench's output
        return "serve-bench", {"table": serve_table(res, path)}
    return "bench", check_results(res, path)


def _traces(path: Path) -> tuple[str, dict]:
    from ..trace import load_traces
    from .funnel import funnel
    traces = load_traces(path)
    return "traces", {"methods": trace_methods(traces), "funnel": funnel(traces), **trace_origin(traces),
                      "traces": traces}


def serve_table(res: dict, path) -> str:
    """The table ``serve-bench`` printed, from its results.json; :class:`ResultsError` naming
    ``path`` where a field it reads is missing or of the wrong type."""
    from ..serving.serve_bench import format_serve_table
    try:
        return format_serve_table(res)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ResultsError(f"a serve-bench results.json whose table cannot be read ({type(exc).__name__}: "
                           f"{str(exc)[:120]})", path) from None


def whose(res: dict) -> str:
    """Whose numbers a results or diagnosis file holds, in words: a replay of recorded outputs
    (``python -m oilbird replay``) or the local model's own decoding; "" when it does not say.

    >>> whose({"model": "m", "replay": {"mode": "fast", "recorded_by": "gpt-4o"}})
    "a replay of gpt-4o's recorded outputs on m (fast mode): tau is what each drafter would have committed per forward on them"
    """
    model = res.get("model") if isinstance(res.get("model"), str) else "the local model"
    rp = res.get("replay")
    if isinstance(rp, dict) or rp is True:
        whose, note = recorder_words(res.get("recorded_by") if rp is True else rp.get("recorded_by"))
        if rp is True:               # a replay diagnosis
            return f"labels on {whose} recorded outputs{f' ({note})' if note else ''}, with {model}'s hidden states"
        mode = rp.get("mode") if isinstance(rp.get("mode"), str) else "?"
        timed = "; tokens/s is the local model's cost of verifying them" if mode == "exact" else ""
        notes = "; ".join(n for n in (note, f"{mode} mode") if n)
        return (f"a replay of {whose} recorded outputs on {model} ({notes}): tau is what each drafter "
                f"would have committed per forward on them{timed}")
    if isinstance(res.get("model"), str):
        return f"{model}'s own {'sampled' if res.get('sampling') else 'greedy'} outputs"
    return ""


def skipped_words(skipped: dict, mode: str | None) -> str:
    """A replay's conversations skipped past the model's context, in words, with the ids (three,
    then how many more): what replay prints and ``report`` repeats. Fast mode windows a long
    conversation and skips one only for a single recorded turn past the context; exact mode
    skips every conversation longer than the context.

    >>> skipped_words({"conversations": 1, "turns": 5, "ids": ["long-1"]}, "fast")
    "1 conversation (5 turns) skipped, a recorded turn in it longer than the model's context: long-1"
    >>> skipped_words({"conversations": 2, "turns": 1, "ids": ["a", "b"]}, "exact")
    "2 conversations (1 turn) skipped, each longer than the model's context (exact mode does not window;
    fast mode does): a, b"
    """
    n, ids = skipped.get("conversations", 0), [str(i) for i in skipped.get("ids") or []]
    turns = skipped.get("turns", "?")
    why = (f"a recorded turn in {'each' if n != 1 else 'it'} longer than the model's context" if mode == "fast"
           else f"{'each ' if n != 1 else ''}longer than the model's context (exact mode does not window; fast "
                "mode does)")
    named = ", ".join(ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")
    return (f"{n} conversation{'s' * (n != 1)} ({turns} turn{'s' * (turns != 1)}) skipped, {why}"
            + (f": {named}" if named else ""))


def replay_caveats(res: dict) -> list[str]:
    """What a replay's results.json says besides its numbers, as the replay printed it: turns
    left out (past the context, bad lines, conversations another holds whole), turns read with
    windowed states, and the note on which sources replay under-states. [] for anything else."""
    rp = res.get("replay")
    if not isinstance(rp, dict):
        return []
    out = []
    over = rp.get("skipped_over_context") if isinstance(rp.get("skipped_over_context"), dict) else {}
    if over.get("conversations"):
        out.append(skipped_words(over, rp.get("mode")))
    for key, what in (("skipped_bad_lines", "bad lines (or files) of the recording left out (--skip-bad)"),
                      ("folded_conversations", "conversations left out: another one holds each whole")):
        if isinstance(res.get(key), list) and res[key]:
            out.append(f"{len(res[key])} {what}; listed under {key}")
    if rp.get("windowed_turns"):
        out.append(f"{rp['windowed_turns']} turns past the model's context read windowed states")
    if res.get("tool_calls") == "template":
        out.append("tool calls as the model's chat template spells them (--tool-calls template), not the one "
                   "text form: other tokens than a text-form replay of the same recording")
    if isinstance(rp.get("note"), str):
        out.append(rp["note"])
    return out


def main(argv: list[str] | None = None, prog: str = "python -m oilbird.evaluation.report") -> int:
    """``report DIR/results.json`` (or DIR): the Markdown tables of docs/results.md (a replay's
    with whose outputs they are). ``report FILE.jsonl[.gz]``: a trace file's tau and tokens by
    source, and its conversion funnel. ``report DIR/diagnosis.json``: the diagnosis table
    ``diagnose`` printed. A file that is none of these is one line on stderr, exit code 2.
    (``python -m oilbird report`` and ``python -m oilbird.evaluation.report`` are the same.)"""
    import argparse
    ap = argparse.ArgumentParser(prog=prog, description=main.__doc__)
    ap.add_argument("results", help="a bench, replay, diagnose or serve-bench results.json or diagnosis.json "
                                    "(or the --out folder that holds it), or a trace file (.jsonl or .jsonl.gz) from "
                                    "bench --traces, replay --traces or python -m oilbird trace")
    ap.add_argument("--pair", action="append", default=[], metavar="A,B",
                    help="also compare method A with method B request by request (repeatable)")
    ap.add_argument("--csv", default=None, metavar="DIR",
                    help="with a trace file: also write DIR/cycles.csv (every cycle), DIR/nodes.csv (every drafted "
                         "node: sources, price, verdict) and DIR/neighbours.csv (every neighbour the key retrieved): "
                         "oilbird.evaluation.tables")
    args = ap.parse_args(argv)
    if args.csv == "":
        ap.error("--csv needs a folder to write the tables in")
    try:
        kind, res = load_results(args.results)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.csv and kind != "traces":
        ap.error(f"--csv writes a trace file's tables; {args.results} is a {kind} results file")
    if kind == "serve-bench":
        print(res["table"])
        return 0
    extra = tuple(tuple(p.split(",")) for p in args.pair) if kind != "diagnosis" else ()
    bad = next((p for p in extra if len(p) != 2 or not all(m in res["methods"] for m in p)), None)
    if bad:                      # before anything is printed: the usage error alone
        ap.error(f"--pair {','.join(bad)}: give two methods of this run, A,B ({', '.join(res['methods'])})")
    if res.get("complete") is False:
        unit = "turns" if res.get("replay") else "requests"
        print(f"note: {args.results} is an incomplete run (interrupted): {res.get('n_requests')} of "
              f"{res.get('n_requests_planned', '?')} {unit} done; the numbers are theirs")
    if whose(res):
        print(f"({whose(res)})")
    for line in replay_caveats(res):
        print(f"note: {line}")
    given = Path(args.results)
    folder = given if given.is_dir() else given.parent
    beside, traces = folder / "diagnosis.json", folder / "traces.jsonl"
    if kind == "bench" and beside.is_file():
        print(f"note: {beside} is beside it (the diagnosis and funnel): python -m oilbird report {beside}")
    elif kind == "bench" and traces.is_file():       # a run with --traces, without --diagnose
        print(f"note: {traces} is beside it (per-cycle traces: tokens by source and the conversion funnel): "
              f"python -m oilbird report {traces}")
    if kind == "diagnosis":
        from .diagnose import summary_lines
        if args.pair:
            print("note: --pair compares the methods of a results.json or trace file; a diagnosis has none")
        print("\n".join(summary_lines(res)))           # what diagnose printed: the table, copy-oracle tau
        if res.get("funnel"):
            from .funnel import funnel_lines
            print()
            print("\n".join(funnel_lines(res["funnel"])))
        return 0
    print(source_table(res["methods"], check_header(res)) if kind == "traces" else markdown_table(res))
    if kind == "traces":
        from .funnel import funnel_lines
        print()
        print("\n".join(funnel_lines(res["funnel"])))
    if args.csv:
        from .tables import write_tables
        try:
            paths = write_tables(res["traces"], args.csv)
        except OSError as exc:
            print(f"error: could not write the tables in {args.csv}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        print(f"\nwrote {', '.join(map(str, paths))}")
    pairs = paired_table(res, PAIRS + extra)
    if not all(r.get("per_request") for r in res["methods"].values()):
        print(f"note: {args.results} has no per-request rows for some methods (a run older than them), so "
              f"those are left out of the paired comparisons")
    if pairs:
        print()
        print(pairs)
    return 0


if __name__ == "__main__":
    from oilbird.errors import run_cli
    raise SystemExit(run_cli(main))
