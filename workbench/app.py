"""The Oilbird workbench: step through every decoding cycle of a request in the browser.

    python -m workbench.app                                  # http://127.0.0.1:7860
    python -m workbench.app --port 7861 --traces runs/builtin.jsonl
    python -m workbench.app --data api-bank --model path/to/model.gguf
    OILBIRD_AUTH=user:password python -m workbench.app --host 0.0.0.0   # on a network: ask for a login

It opens on precomputed traces (``assets/traces/``: a replay of gpt-4o's recorded airline turns,
at its clearest gap moment; a replay of the scripted agent; SmolLM2 on the built-in workload;
the README has the commands that regenerate them), so the first figures show before any model
exists; while
gradio itself loads, the port already serves a static preview of the opening cycle
(:mod:`workbench.preview`), which turns into the app when it is ready. The model loads only
when someone presses "Run live", once, shared by every session behind a lock.

What lives where:

* :mod:`workbench.session`: what the app knows (the precomputed traces, the requests, the one
  lazily loaded model) and what one browser session holds; no gradio, no torch;
* :mod:`workbench.ui`: the Gradio Blocks, its events and named API endpoints (the gap-moments
  menu in :mod:`workbench.moments_menu`);
* :mod:`workbench.figures`: every panel, as pure functions of trace records (shared with the
  notebooks; one module per panel in :mod:`workbench.panels`);
* this module: the command line, which checks ``--port`` and ``--auth``, says when ``--host``
  serves beyond this machine (and whether behind a login), starts the preview, builds the app
  and launches it.
"""
from __future__ import annotations

import argparse
import errno
import ipaddress
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from oilbird.cli_options import at_least, data_arg

from .preview import Preview, preview_html
from .session import LIVE_BUDGET, LIVE_MAX_NEW_TOKENS, TITLE, Catalogue, Data, ModelHolder, find, new_session

AUTH_ENV = "OILBIRD_AUTH"      # USER:PASSWORD, read where --auth is not given (kept out of `ps`)

ROOT = Path(__file__).resolve().parents[1]
# the shipped traces: a replay of gpt-4o's recorded tau-bench airline turns (real traffic, where the
# app opens), a replay of the built-in scripted agent, and SmolLM2 decoding the built-in workload live
TRACES_DIR = ROOT / "assets" / "traces"
DEFAULT_TRACES = (TRACES_DIR / "real-traffic.jsonl.gz", TRACES_DIR / "agent-replay.jsonl.gz",
                  TRACES_DIR / "builtin.jsonl")


def load(traces: str | Path | list | None, data: str) -> tuple[Catalogue, Data]:
    """The precomputed traces and the live-run requests; a problem with either is said on the
    terminal too (the UI banner that shows it clears on the first step)."""
    cat, requests = Catalogue.load(traces), Data.load(data)
    for error in [f"could not read the precomputed traces: {why}" for why in cat.unread] + [requests.error]:
        if error:
            print(f"workbench: {error}", file=sys.stderr, flush=True)
    return cat, requests


def first_preview(cat: Catalogue, data: Data) -> str | None:
    """The static page of the opening cycle, or None if it cannot be drawn: then the terminal
    says why and the app starts without it (the app itself shows the problem in its banner)."""
    st = new_session(cat, data)
    try:
        return preview_html(find(st, cat, st.request, st.method), st.cycle, TITLE)
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


class UsageError(ValueError):
    """A command-line value that cannot be used; its message is the one line printed."""


def parse_port(text: str) -> int:
    """``--port`` as a number from 1 to 65535, else :class:`UsageError`.

    >>> parse_port("7861")
    7861
    """
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 1 <= port <= 65535:
        raise UsageError(f"--port {text} is not a port: give a number from 1 to 65535")
    return port


def parse_auth(given: str | None, env: dict | None = None) -> tuple[str, str] | None:
    """The login gradio asks for: ``--auth USER:PASSWORD``, else ``$OILBIRD_AUTH`` in the same
    form, else None (no login). A value without a user or a password is :class:`UsageError`.

    >>> parse_auth("ann:s3:cret")
    ('ann', 's3:cret')
    """
    env = os.environ if env is None else env
    where, value = ("--auth", given) if given is not None else (f"${AUTH_ENV}", env.get(AUTH_ENV))
    if value is None:
        return None
    user, _, password = value.partition(":")
    if not user or not password:
        raise UsageError(f"{where} needs USER:PASSWORD (a user name, a colon, a password)")
    return user, password


def is_loopback(host: str) -> bool:
    """Is ``host`` reachable from this machine only (127.0.0.0/8, ::1, localhost)?"""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:       # a host name or "": it may resolve to a network address
        return False


def exposure_note(host: str, auth: tuple[str, str] | None) -> str | None:
    """What the terminal says before the app serves beyond this machine, or None on loopback."""
    if is_loopback(host):
        return None
    if auth is None:
        return (f"--host {host} serves the app to the network with no authentication: anyone who can reach "
                f"this machine can use it, upload files and run the model; give --auth USER:PASSWORD "
                f"(or set {AUTH_ENV}) to require a login")
    return (f"--host {host} serves the app to the network behind a login (user {auth[0]!r}); it is plain "
            "HTTP, so the password crosses the network unencrypted")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m workbench.app", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1",
                    help="interface to bind (default 127.0.0.1: this machine only; any other serves the "
                         "network: see --auth)")
    ap.add_argument("--port", default="7860", help="1-65535 (default 7860)")
    ap.add_argument("--auth", default=None, metavar="USER:PASSWORD",
                    help=f"require this login (gradio's); default ${AUTH_ENV} if set, else no login")
    ap.add_argument("--model", default=None, help="local HF model dir or .gguf for live runs (default SmolLM2-135M)")
    ap.add_argument("--data", type=data_arg, default="builtin",
                    help="requests for live runs: builtin | api-bank | PATH")
    ap.add_argument("--traces", nargs="+", default=None,
                    help="precomputed trace files (.jsonl or .jsonl.gz), from python -m oilbird trace or replay "
                         "--traces (default: the shipped ones in assets/traces); a file that cannot be read "
                         "stops the start")
    ap.add_argument("--max-new-tokens", type=at_least(1), default=LIVE_MAX_NEW_TOKENS, help="for live runs")
    ap.add_argument("--budget", type=at_least(1), default=LIVE_BUDGET,
                    help=f"draft-tree nodes for live runs (default {LIVE_BUDGET}: the shipped built-in traces' size, "
                         "so a live run compares with them)")
    ap.add_argument("--no-preview", action="store_true",
                    help="do not serve the static first-cycle preview while gradio loads")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    try:
        args.port, auth = parse_port(args.port), parse_auth(args.auth)
    except UsageError as exc:
        print(f"workbench: {exc}", file=sys.stderr, flush=True)
        return 2
    if args.model is not None:             # the weights load at the first live run; a wrong path is said now
        from oilbird.model import ModelError, check_model_path     # (imports torch: only when asked)
        try:
            check_model_path(args.model)
        except ModelError as exc:
            print(f"workbench: {exc}", file=sys.stderr, flush=True)
            return 2
    note = exposure_note(args.host, auth)
    if note is not None:
        print(f"workbench: {note}", file=sys.stderr, flush=True)
    why = cannot_serve(args.host, args.port)
    if why is not None:
        print(f"workbench: {why}", file=sys.stderr, flush=True)
        return 1
    cat, data = load(args.traces or [str(p) for p in DEFAULT_TRACES], args.data)
    if args.traces and cat.unread:        # files the user named (said above): refused, as every command refuses bad input
        print("workbench: not starting: give --traces files that can be read (or none, for the shipped ones)",
              file=sys.stderr, flush=True)
        return 2
    if data.error:                        # the same for --data (said above; the default, builtin, always reads)
        print("workbench: not starting: give a --data the live runs can read (builtin, api-bank or a requests file)",
              file=sys.stderr, flush=True)
        return 2
    preview = None
    # the preview has no login: behind --auth it would show the first cycle to anyone
    page = None if args.no_preview or auth is not None else first_preview(cat, data)
    if page is not None:
        preview = Preview(args.host, args.port, page)
        if preview.start():
            print(f"workbench: preview of the first cycle at http://{args.host}:{args.port}/ "
                  f"({time.perf_counter() - t0:.2f} s); the app replaces it when ready", flush=True)
    try:
        # (imports gradio: the slow part of the start, ~7 s on 2 cores)
        from .ui import CSS, JS, UPLOAD_MAX_BYTES, build_app
        demo = build_app(cat, data, ModelHolder(args.model), args.max_new_tokens, args.budget)
        demo.queue(default_concurrency_limit=4)
    finally:
        if preview is not None:
            preview.close()
    print(f"workbench: {len(cat.traces)} traces from {cat.origin or '-'}; built in {time.perf_counter() - t0:.2f} s",
          flush=True)
    # stopped by a service manager or a test (SIGTERM) as by Ctrl-C: gradio closes its server and
    # the exit handlers run, which remove the export folder (a killed app left one in /tmp each time)
    # (only where signals can be set: the main thread; the handler before is put back after)
    before = (signal.signal(signal.SIGTERM, _stop_as_interrupt)
              if threading.current_thread() is threading.main_thread() else None)
    try:
        demo.launch(server_name=args.host, server_port=args.port, css=CSS, js=JS, show_error=True, quiet=False,
                    max_file_size=UPLOAD_MAX_BYTES,
                    auth=auth, auth_message=None if auth is None else f"{TITLE}: log in")
    except OSError:   # taken since the check above; gradio's own advice names an env variable
        print(f"workbench: {_port_taken(args.host, args.port)}", file=sys.stderr, flush=True)
        return 1
    finally:
        if before is not None:
            signal.signal(signal.SIGTERM, before)
    return 0


def _stop_as_interrupt(signum, frame):
    raise KeyboardInterrupt


if __name__ == "__main__":
    raise SystemExit(main())
