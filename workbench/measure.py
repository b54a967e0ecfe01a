"""Measure the workbench in a real browser: launch -> first figure, and the time per step.

    python -m workbench.measure                        # the shipped assets, 10 steps
    python -m workbench.measure --traces runs/builtin.jsonl --steps 20
    python -m workbench.measure --layout 1024x768      # where the draft tree sits on a projector

What is timed (wall clock; the numbers depend on how busy the machine is, so the load average
is printed with them):

* **launch -> first figure**: from spawning ``python -m workbench.app`` to a draft-tree plot
  being drawn in headless Chromium (its ``.scatterlayer`` exists; the browser is already
  running, as a user's is), split into "port answers" and "page -> figure". The first figure
  is the static preview of the opening cycle (:mod:`workbench.preview`) when the app serves one.
* **launch -> app ready**: until the page has turned into the interactive app (its Next button
  and its own drawn tree), split into "gradio answers" and the rest.
* **step**: measured inside the page, so no test-driver latency is included: from the click on
  Next/Prev (``performance.now()`` just before ``button.click()``) to the first animation frame
  in which both the cycle counter and the draft tree's title show the new cycle. Also the CPU
  time the browser processes and the app process used during the step (from /proc): on a
  shared machine wall time mostly measures the other jobs, CPU time what the step costs.

The browser is Debian's Chromium (``/usr/bin/chromium`` or ``$CHROMIUM``), never a download.
The same helpers start the app and the browser for ``tests/test_app.py``.
"""
from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

# In-page step timer: click, then resolve on the first frame that shows cycle `want` in both the
# counter and the tree title. Returns milliseconds.
STEP_JS = """
async ([sel, want, limitMs]) => {
  const shows = () => {
    const c = document.querySelector('#cycle-counter')?.textContent || '';  // textContent: no forced layout
    const t = document.querySelector('#wb-tree .gtitle')?.textContent || '';
    return c.includes(`cycle ${want} /`) && t.includes(`cycle ${want}`);
  };
  const t0 = performance.now();
  document.querySelector(sel).click();
  while (!shows()) {
    if (performance.now() - t0 > limitMs) return -1;
    await new Promise(r => requestAnimationFrame(r));
  }
  return performance.now() - t0;
}
"""


def chromium_path() -> str | None:
    """Debian's Chromium, or ``$CHROMIUM``; None when neither exists."""
    for p in (os.environ.get("CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium")):
        if p and Path(p).is_file():
            return p
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_up(url: str, proc: subprocess.Popen | None = None, timeout: float = 180) -> float:
    """Poll ``url`` until it answers; return the seconds waited. Raises if the app died."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the app exited with code {proc.returncode} before serving {url}")
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    return time.perf_counter() - t0
        except OSError:
            time.sleep(0.25)
    raise TimeoutError(f"{url} did not answer within {timeout:.0f} s")


def wait_for_app(url: str, proc: subprocess.Popen | None = None, timeout: float = 180) -> float:
    """Like :func:`wait_until_up`, until the Gradio app itself answers (not the preview)."""
    return wait_until_up(url.rstrip("/") + "/config", proc, timeout)


def start_app(args: list[str], log_path: Path, port: int | None = None) -> tuple[subprocess.Popen, str]:
    """Spawn ``python -m workbench.app --port PORT *args`` (output to ``log_path``)."""
    port = port or free_port()
    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "PYTHONPATH": str(ROOT)}
    log = open(log_path, "w")  # noqa: SIM115 - owned by the process for its lifetime
    proc = subprocess.Popen([sys.executable, "-m", "workbench.app", "--port", str(port), *args],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    return proc, f"http://127.0.0.1:{port}/"


def stop_app(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


@contextmanager
def browser_page(width: int = 1280, height: int = 1800):
    """A headless Chromium page (Debian's Chromium; nothing is downloaded)."""
    from playwright.sync_api import sync_playwright
    path = chromium_path()
    if path is None:
        raise RuntimeError("Chromium not found (install Debian's `chromium` or set $CHROMIUM)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            yield page
        finally:
            browser.close()


APP_TREE = "#wb-tree .js-plotly-plot .scatterlayer"      # the app's drawn draft tree
ANY_TREE = ".js-plotly-plot .scatterlayer"               # ... or the preview's


def first_figure(page, url: str, timeout_ms: int = 120_000, selector: str = APP_TREE) -> float:
    """Navigate to ``url`` and return the seconds until ``selector`` (the app's draft tree)
    is drawn."""
    t0 = time.perf_counter()
    page.goto(url, timeout=timeout_ms)
    page.wait_for_selector(selector, timeout=timeout_ms)
    return time.perf_counter() - t0


def app_ready(page, timeout_ms: int = 120_000) -> None:
    """Wait until the page is the interactive app (after the preview has reloaded into it)."""
    deadline = time.perf_counter() + timeout_ms / 1000
    while True:
        try:   # the preview reloads the page: a wait can be cut short by the navigation
            page.wait_for_selector("#wb-next", timeout=max(1, int(1000 * (deadline - time.perf_counter()))))
            page.wait_for_selector(APP_TREE, timeout=max(1, int(1000 * (deadline - time.perf_counter()))))
            return
        except Exception as exc:   # playwright's Error on navigation, TimeoutError past the deadline
            if time.perf_counter() >= deadline:
                raise TimeoutError("the page did not turn into the app") from exc


def current_cycle(page) -> int:
    import re
    m = re.search(r"cycle (\d+) /", page.inner_text("#cycle-counter"))
    if not m:
        raise AssertionError(f"no cycle in the counter: {page.inner_text('#cycle-counter')!r}")
    return int(m.group(1))


def step_ms(page, forward: bool = True, limit_ms: int = 30_000) -> float:
    """Click Next (or Prev) and return the in-page milliseconds until the new cycle shows."""
    want = current_cycle(page) + (1 if forward else -1)
    ms = page.evaluate(STEP_JS, ["#wb-next" if forward else "#wb-prev", want, limit_ms])
    if ms < 0:
        raise TimeoutError(f"cycle {want} did not show within {limit_ms} ms")
    return ms


def go_to_cycle(page, k: int, limit_ms: int = 30_000) -> None:
    """Type cycle ``k`` into the slider's box (as a user does) and wait until it shows."""
    box = page.locator("#wb-slider input[type=number]")
    box.fill(str(k))
    box.press("Enter")
    deadline = time.perf_counter() + limit_ms / 1000
    while current_cycle(page) != k:
        if time.perf_counter() > deadline:
            raise TimeoutError(f"cycle {k} did not show within {limit_ms} ms")
        page.wait_for_timeout(100)
    page.wait_for_timeout(500)        # the tree's plot redraws after the counter


def last_cycle(page) -> int:
    import re
    m = re.search(r"cycle \d+ / (\d+)", page.inner_text("#cycle-counter"))
    return int(m.group(1)) if m else 0


def measure_steps(page, n: int, probe=lambda step: step()) -> list:
    """``n`` steps, forward until the last cycle, then backward: what ``probe`` returns for
    each step (``probe`` runs the step it is given; by default the step's milliseconds)."""
    out, forward = [], True
    for _ in range(n):
        k, last = current_cycle(page), last_cycle(page)
        if last == 0:
            break
        if (forward and k >= last) or (not forward and k <= 0):
            forward = not forward
        out.append(probe(lambda: step_ms(page, forward)))
    return out


def _proc_table() -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, CPU seconds used so far) for every process (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(d.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
    return out


def cpu_seconds(root: int, exclude: int | None = None) -> float:
    """CPU seconds used so far by ``root`` and its descendants (minus the ``exclude`` subtree).

    Wall-clock times on a shared machine mostly measure the other jobs; CPU time is what a step
    would take with the machine to itself (close to it: the browser's main thread does the work).
    """
    table = _proc_table()
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        kids.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        if pid == exclude or pid not in table:
            continue
        total += table[pid][1]
        todo.extend(kids.get(pid, []))
    return total


def measure_steps_cpu(page, n: int, app_pid: int) -> list[tuple[float, float, float]]:
    """Like :func:`measure_steps`, with CPU time: (wall ms, browser CPU ms, app CPU ms) per step."""
    me = os.getpid()

    def probe(step):
        b0, a0 = cpu_seconds(me, exclude=app_pid), cpu_seconds(app_pid)
        ms = step()
        b1, a1 = cpu_seconds(me, exclude=app_pid), cpu_seconds(app_pid)
        return ms, 1000 * (b1 - b0), 1000 * (a1 - a0)
    return measure_steps(page, n, probe)


def tree_place(page) -> dict:
    """Where the app's draft tree sits on the page (CSS pixels from the top of the page, the
    page not scrolled): its title's top, the plot's top and its height."""
    title = page.locator("#wb-tree .gtitle").first.bounding_box()
    box = page.locator("#wb-tree").bounding_box()
    return {"title_top": round(title["y"]), "top": round(box["y"]), "height": round(box["height"])}


def load_average() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg()) + f" on {os.cpu_count()} CPUs"
    except OSError:
        return "?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m workbench.measure", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", default=None, help="trace file (default: the app's default assets)")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--log", default=None, help="app log file (default: a temp file)")
    ap.add_argument("--no-preview", action="store_true", help="start the app with --no-preview")
    ap.add_argument("--layout", default=None, metavar="WxH",
                    help="instead of timing: open the app at this window size and say where the tree sits")
    args = ap.parse_args(argv)
    import tempfile
    log = Path(args.log) if args.log else Path(tempfile.mkstemp(prefix="workbench-", suffix=".log")[1])
    app_args = (["--traces", args.traces] if args.traces else []) + (["--no-preview"] if args.no_preview else [])
    if args.layout:
        w, h = (int(x) for x in args.layout.lower().split("x"))
        proc, url = start_app(app_args, log)
        try:
            wait_for_app(url, proc)
            with browser_page(w, h) as page:
                first_figure(page, url)
                app_ready(page)
                places = [("the opening cycle", tree_place(page))]
                for name, k in (("the first cycle", 0), ("the last cycle", last_cycle(page))):
                    go_to_cycle(page, k)
                    places.append((name, tree_place(page)))
        finally:
            stop_app(proc)
        for name, at in places:
            print(f"at {w}x{h}, {name}: the tree's title {at['title_top']} px from the top of the page, "
                  f"the tree {at['height']} px tall from {at['top']} px (the window shows {h} px)")
        return 0
    print(f"load average before: {load_average()}")
    # the browser is open before the app starts, as a user's is
    with browser_page() as page:
        t0 = time.perf_counter()
        proc, url = start_app(app_args, log)
        try:
            up = wait_until_up(url, proc)
            fig = first_figure(page, url, selector=ANY_TREE)
            total = time.perf_counter() - t0
            preview = page.query_selector("#splash-tree") is not None
            wait_for_app(url, proc)
            gradio_up = time.perf_counter() - t0
            app_ready(page)
            ready = time.perf_counter() - t0
            app_cpu = cpu_seconds(proc.pid)
            page.wait_for_timeout(1000)
            steps = measure_steps_cpu(page, args.steps, proc.pid)
        finally:
            stop_app(proc)
    print(f"launch -> first figure ({'the preview' if preview else 'the app'}): {total:.2f} s wall "
          f"(port answers {up:.2f} s, page -> figure {fig:.2f} s)")
    split = f" (gradio answers {gradio_up:.2f} s)" if preview else ""
    print(f"launch -> app ready: {ready:.2f} s wall{split}; the app process used {app_cpu:.2f} s CPU until then")
    if steps:
        for name, i in (("wall", 0), ("browser CPU", 1), ("app CPU", 2)):
            xs = [x[i] for x in steps]
            print(f"step render, {name}: median {statistics.median(xs):.0f} ms, min {min(xs):.0f} ms, "
                  f"max {max(xs):.0f} ms over {len(xs)} steps")
    print(f"load average after: {load_average()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
