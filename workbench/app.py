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
import time
from pathlib import Path

from .preview import Preview, preview_html
from .session import LIVE_MAX_NEW_TOKENS, TITLE, Catalogue, Data, ModelHolder, find, new_session

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACES = ROOT / "assets" / "traces" / "builtin.jsonl"


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
    cat = Catalogue.load(args.traces)
    data = Data.load(args.data)
    preview = None
    if not args.no_preview:
        st = new_session(cat, data)
        preview = Preview(args.host, args.port, preview_html(find(st, cat, st["request"], st["method"]),
                                                             st["cycle"], TITLE))
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
    demo.launch(server_name=args.host, server_port=args.port, css=CSS, show_error=True, quiet=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
