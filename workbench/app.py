"""The Oilbird workbench: step through every decoding cycle of a request in the browser.

    python -m workbench.app                                  # http://127.0.0.1:7860
    python -m workbench.app --port 7861 --traces runs/builtin.jsonl
    python -m workbench.app --data api-bank --model path/to/model.gguf

It opens on precomputed traces (``assets/traces/builtin.jsonl``, see the README for the
command that regenerates them), so the first figures show before any model exists; while
gradio itself loads, the port already serves a static preview of the opening cycle
(:mod:`workbench.preview`), which turns into the app when it is ready. The model loads only
when someone presses "Run live", once, shared by every session behind a lock.

What lives where:

* :mod:`workbench.session`: what the app knows (the precomputed traces, the requests, the one
  lazily loaded model) and what one browser session holds; no gradio, no torch;
* :mod:`workbench.ui`: the Gradio Blocks, its events and named API endpoints;
* :mod:`workbench.figures`: every panel, as pure functions of trace records (shared with the
  notebooks);
* this module: the command line, which starts the preview, builds the app and launches it.
"""
from __future__ import annotations

import argparse
import errno
import socket
import sys
import time
from pathlib import Path

from .preview import Preview, preview_html
from .session import LIVE_MAX_NEW_TOKENS, TITLE, Catalogue, Data, ModelHolder, find, new_session

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACES = ROOT / "assets" / "traces" / "builtin.jsonl"


def load(traces: str | Path | None, data: str) -> tuple[Catalogue, Data]:
    """The precomputed traces and the live-run requests; a problem with either is said on the
    terminal too (the UI banner that shows it clears on the first step)."""
    cat, requests = Catalogue.load(traces), Data.load(data)
    for error in (cat.error, requests.error):
        if error:
            print(f"workbench: {error}", file=sys.stderr, flush=True)
    return cat, requests


def first_preview(cat: Catalogue, data: Data) -> str | None:
    """The static page of the opening cycle, or None if it cannot be drawn: then the terminal
    says why and the app starts without it (the app itself shows the problem in its banner)."""
    st = new_session(cat, data)
    try:
        return preview_html(find(st, cat, st["request"], st["method"]), st["cycle"], TITLE)
    except Exception as exc:   # noqa: BLE001 - a preview is a convenience, never a reason not to start
        print(f"workbench: no preview of the first cycle ({type(exc).__name__}: {exc}); starting without it",
              file=sys.stderr, flush=True)
        return None


def _port_taken(host: str, port: int) -> str:
    return f"port {port} is in use on {host}: choose another with --port N"


def cannot_serve(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be served, as one line naming the option to change, or None.
    Checked before the slow start, so a taken port costs half a second, not a traceback."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # as gradio binds
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return _port_taken(host, port)
            return f"cannot serve on {host}:{port} ({exc.strerror or exc}): check --host and --port"
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m workbench.app", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1: this machine only)")
    ap.add_argument("--port", type=int, default=7860)
    ap.add_argument("--model", default=None, help="local HF model dir or .gguf for live runs (default SmolLM2-135M)")
    ap.add_argument("--data", default="builtin", help="requests for live runs: builtin | api-bank | PATH")
    ap.add_argument("--traces", default=str(DEFAULT_TRACES), help="precomputed trace file (JSONL)")
    ap.add_argument("--max-new-tokens", type=int, default=LIVE_MAX_NEW_TOKENS, help="for live runs")
    ap.add_argument("--no-preview", action="store_true",
                    help="do not serve the static first-cycle preview while gradio loads")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    why = cannot_serve(args.host, args.port)
    if why is not None:
        print(f"workbench: {why}", file=sys.stderr, flush=True)
        return 1
    cat, data = load(args.traces, args.data)
    preview = None
    page = None if args.no_preview else first_preview(cat, data)
    if page is not None:
        preview = Preview(args.host, args.port, page)
        if preview.start():
            print(f"workbench: preview of the first cycle at http://{args.host}:{args.port}/ "
                  f"({time.perf_counter() - t0:.2f} s); the app replaces it when ready", flush=True)
    try:
        from .ui import CSS, build_app   # imports gradio: the slow part of the start (~7 s on 2 cores)
        demo = build_app(cat, data, ModelHolder(args.model), args.max_new_tokens)
        demo.queue(default_concurrency_limit=4)
    finally:
        if preview is not None:
            preview.close()
    print(f"workbench: {len(cat.traces)} traces from {cat.origin or '-'}; built in {time.perf_counter() - t0:.2f} s",
          flush=True)
    try:
        demo.launch(server_name=args.host, server_port=args.port, css=CSS, show_error=True, quiet=False)
    except OSError:   # taken since the check above; gradio's own advice names an env variable
        print(f"workbench: {_port_taken(args.host, args.port)}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
