"""The first figure while the app starts: a static preview on the app's own port.

Importing gradio takes ~7 s on a 2-core machine, before the app can serve anything. Until it
can, ``python -m workbench.app`` serves, on the same host and port, one static page: the
opening cycle of the precomputed traces (its counter, draft tree and text so far, drawn by the
same figure functions as the app, with the plotly.js that ships inside the ``plotly`` package;
nothing is fetched from the network). The page polls ``config``, which only the Gradio app
answers, and reloads itself into the interactive app as soon as it is up; the preview server
closes just before the app binds the port.

The preview is plain :mod:`http.server` on a daemon thread: one page, one script, 404 for
anything else. If it cannot bind (port taken, an IPv6 host), the app starts without it.
``python -m workbench.measure`` times both: launch -> first figure, and launch -> app ready.
"""
from __future__ import annotations

import html
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources

import plotly.io as pio

from oilbird.trace import RequestTrace

from . import figures as F

PLOTLY_JS = "plotly.min.js"
POLL_MS = 300

# reload into the app once its /config answers (the preview answers 404 there)
POLL_JS = f"""
(function poll() {{
  fetch('config', {{cache: 'no-store'}})
    .then(r => r.ok ? location.reload() : setTimeout(poll, {POLL_MS}))
    .catch(() => setTimeout(poll, {POLL_MS}));
}})();
"""


def preview_html(request: RequestTrace | None, cycle: int, title: str) -> str:
    """The preview page: ``request``'s cycle ``cycle`` (counter, tree, text), or a note alone."""
    if request is not None and request.cycles:
        k = max(0, min(cycle, len(request.cycles) - 1))
        spec = F.tree_spec(request.cycles[k], keyed=F.drafted_sources(request), **F.trace_marks(request))
        tree = pio.to_html(spec, include_plotlyjs=PLOTLY_JS, full_html=False,
                           div_id="splash-tree", validate=False, config={"displayModeBar": False})
        body = (f'<div id="splash-counter">{F.counter_html(request, k)}</div>{tree}'
                f'{F.text_html(request, k)}')
    else:
        body = "<p>No precomputed traces to preview.</p>"
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(title)} (starting)</title>
<style>body {{ font-family: sans-serif; margin: 1.5em; }} .wb-text .tok {{ white-space: pre; }}
#splash-note {{ color: #555; font-style: italic; }}</style></head>
<body><h2>{html.escape(title)} · every decoding cycle: draft tree → verify → commit</h2>
<p id="splash-note">A static preview of the first cycle: the interactive workbench is starting
and replaces this page by itself in a few seconds.</p>
{body}
<script>{POLL_JS}</script>
</body></html>
"""


class Preview:
    """Serve ``page`` at ``/`` (and plotly.js beside it) on ``host:port`` until :meth:`close`::

        with Preview("127.0.0.1", 7860, page) as p:   # p.running: False if the port was busy
            build_the_app()
    """

    def __init__(self, host: str, port: int, page: str):
        self.host, self.port = host, port
        self.page = page.encode()
        self._server: ThreadingHTTPServer | None = None

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> bool:
        """Bind and serve; False (and nothing running) when the address cannot be bound."""
        page = self.page
        script = resources.files("plotly").joinpath("package_data", PLOTLY_JS)

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):   # noqa: N802 - the http.server API
                path = self.path.split("?", 1)[0]
                if path in ("/", "/index.html"):
                    self._send(page, "text/html; charset=utf-8", "no-store")
                elif path == "/" + PLOTLY_JS:
                    self._send(script.read_bytes(), "text/javascript", "max-age=3600")
                else:
                    self.send_error(404)

            def _send(self, data: bytes, ctype: str, cache: str):
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Cache-Control", cache)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):   # quiet: the app's own log follows
                pass

        try:
            server = ThreadingHTTPServer((self.host, self.port), Handler)
        except OSError:
            return False
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self._server = server
        return True

    def close(self) -> None:
        """Stop serving and free the port (idempotent)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "Preview":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()
