"""Export figures (HTML / PNG / SVG) and traces (JSONL) to files. No model, no app state.

HTML needs nothing beyond plotly: one self-contained page holding every figure, with
plotly.js embedded once (``include_plotlyjs=True``), so it opens offline and fetches nothing.
PNG (at twice the figure's pixels, :data:`PNG_SCALE`) and SVG go through kaleido, which drives a
Chrome/Chromium (Debian's ``chromium`` is found on the PATH, or set ``BROWSER_PATH``); when that
fails, :class:`ExportError` says so and that HTML still works.

From a notebook, the same files as the app's export (1200 px wide, not plotly's 700)::

    from workbench.export import cycle_export, export_figures
    figs, _ = cycle_export(trace, 3)                # add other=, funnel= as the app does
    export_figures(figs, "slides", "png", stem="cycle3")
"""
from __future__ import annotations

import hashlib
import html
import re
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio

from oilbird.trace import RequestTrace, save_traces

from .palette import Style

FORMATS = ("html", "png", "svg")
# static images of figures that fill their container in the app (no layout width): kaleido's
# default, 700 px, crowds a tree's token labels and cuts table columns
STATIC_WIDTH = 1200
# the exported figures are drawn for that width: their tables' columns, labels and notes fit it
# (drawn for the app's container, the neighbour table's cells wrapped at 700 px inside 1200), in
# type two points larger than the screen's: the smallest, a label's, is 13 px (11 px was 5 pt on
# an A4 page's width)
EXPORT_STYLE = Style(width=STATIC_WIDTH, font_size=14)
# a PNG's pixels per figure pixel: sharp on a projector and in print (an SVG scales by itself)
PNG_SCALE = 2


class ExportError(RuntimeError):
    """An export could not be written; the message says why and what still works."""


# a stem this long leaves room for a panel's name and a suffix within any file system's limit
# on a name (255 bytes on most; the names are ASCII)
NAME_CHARS = 64
RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"{d}{k}" for d in ("COM", "LPT") for k in range(1, 10))}   # Windows


def safe_name(*parts: object) -> str:
    """A file-name stem from free text that fits any file system: ASCII letters, digits and
    ``_.+-`` only, no leading or trailing dot, at most :data:`NAME_CHARS` characters. A stem
    that had to be shortened (or that Windows reserves, or that kept nothing of the text) ends
    in a hash of the whole text, so two long request ids that share a beginning never share a
    name.

    >>> safe_name("r1", "oilbird", 3)
    'r1-oilbird-3'
    >>> len(safe_name("x" * 300, "oilbird")) <= NAME_CHARS
    True
    """
    text = "-".join(str(p) for p in parts)
    stem = re.sub(r"[^A-Za-z0-9_.+-]+", "_", text).strip("_.") or "export"
    lost = stem == "export" and text not in ("", "export")    # nothing of the text was a safe character
    if len(stem) <= NAME_CHARS and stem.split(".")[0].upper() not in RESERVED and not lost:
        return stem
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{stem[:NAME_CHARS - len(digest) - 1].rstrip('_.-')}-{digest}"


def cycle_export(tr: RequestTrace, k: int, other: RequestTrace | None = None, moment=None,
                 funnel: tuple[list[RequestTrace], str] | None = None) -> tuple[dict[str, go.Figure], str]:
    """The figures the app exports for cycle index ``k`` of ``tr``, as its screen shows them: the
    cycle's tree, text, neighbours and gap strip (the bar under the tokens ``moment`` spans), the
    request's metrics and its comparison with ``other`` (whole requests, no cycle line: the screen
    draws none), named for what they hold (``compare-with-goose``, ``funnel-of-4-requests``);
    ``funnel``: the traces the funnel panel counts and the words for them. Returns the figures by
    name and a line that says what was left out ("" when nothing was). A figure of the cycle that
    cannot be drawn raises."""
    from . import figures as F
    s = EXPORT_STYLE
    specs = F.cycle_specs(tr, k, s, moment=moment, fit=True)
    specs["metrics"] = F.metrics_spec(tr, style=s)             # (each spec validated once, below)
    figs = {name: F.figure(spec, s) for name, spec in specs.items()}
    if other is not None:
        figs[f"compare-with-{other.method}"] = F.compare_figure(tr, other, style=s)
    counted, scope = funnel or ([], "")
    try:
        if any(c.tokens for t in counted for c in t.cycles):
            n = len({t.request_id for t in counted})
            figs[f"funnel-of-{n}-request{'s' * (n != 1)}"] = F.funnel_figure(counted, style=s, scope=scope)
    except Exception as exc:   # noqa: BLE001 - the cycle's figures go out without it, said
        return figs, f"The funnel was left out: {type(exc).__name__}: {exc}"
    return figs, ""


def write_html(figs: dict[str, go.Figure], path: str | Path, title: str = "Oilbird workbench") -> Path:
    """One offline HTML page with every figure (plotly.js embedded once)."""
    path = Path(path)
    parts = []
    for k, (name, fig) in enumerate(figs.items()):
        parts.append(f"<h2>{html.escape(name)}</h2>")
        parts.append(fig.to_html(full_html=False, include_plotlyjs=(k == 0)))
    path.write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
                    f"</head><body>{''.join(parts)}</body></html>", encoding="utf-8")
    return path


def write_static(figs: dict[str, go.Figure], folder: str | Path, fmt: str, stem: str = "") -> list[Path]:
    """One PNG or SVG per figure (one kaleido browser session for all of them)."""
    if fmt not in ("png", "svg"):
        raise ExportError(f"unknown static format {fmt!r}; choose png or svg")
    folder = Path(folder)
    # the panel's name whole after the stem (a long stem is shortened, with its hash, not the name)
    paths = [folder / f"{safe_name(stem) + '-' if stem else ''}{safe_name(name)}.{fmt}" for name in figs]
    try:
        pio.write_images(list(figs.values()), paths, format=fmt,
                         width=[f.layout.width or STATIC_WIDTH for f in figs.values()],
                         height=[f.layout.height for f in figs.values()], scale=PNG_SCALE if fmt == "png" else 1)
    except Exception as exc:  # noqa: BLE001 - kaleido/choreographer raise many types; all mean the same
        # kaleido's own advice when it finds none is to download Chrome: not what an offline machine
        # can do; anything else (a browser that crashed, kaleido missing) as it says, its first line
        text = str(exc)
        found_none = type(exc).__name__ == "ChromeNotFoundError" or "requires Google Chrome" in text
        why = "no Chrome/Chromium found" if found_none else next(
            (line.strip() for line in text.splitlines() if line.strip()), "no reason given")[:160]
        raise ExportError(
            f"{fmt.upper()} export failed ({type(exc).__name__}: {why}). Static images need kaleido and a "
            "Chrome/Chromium (Debian's `chromium`, or set BROWSER_PATH to one). HTML export works without them.") \
            from None
    return paths


def export_figures(figs: dict[str, go.Figure], folder: str | Path, fmt: str, stem: str = "figures") -> list[Path]:
    """Write ``figs`` in ``fmt`` ("html": one page; "png"/"svg": one file per figure)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if fmt == "html":
        return [write_html(figs, folder / f"{safe_name(stem)}.html", title=stem)]
    return write_static(figs, folder, fmt, stem)


def export_traces(traces: list[RequestTrace], path: str | Path) -> list[Path]:
    """The traces as JSONL (the format :func:`oilbird.trace.load_traces` reads back), then beside
    it their three tables for a spreadsheet (:mod:`oilbird.evaluation.tables`: every cycle, every
    drafted node, every neighbour), named after the JSONL file's stem; returns the four paths."""
    from oilbird.evaluation.tables import write_tables
    path = save_traces(traces, path)
    return [path, *write_tables(traces, path.parent, tuple(f"{safe_name(path.stem, part)}.csv"
                                                         for part in ("cycles", "nodes", "neighbours")))]
