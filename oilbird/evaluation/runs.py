"""Where a command's results go, and what is left of them when a run stops early.

A :class:`Run` is the output of one ``bench`` or ``diagnose`` run (a folder of named files) or
one ``trace`` run (one JSONL file):

1. :meth:`Run.check`, before the model loads: the output is of the right kind, holds no
   earlier run unless ``force``, and can be created: a probe file is made and removed (and the
   folders made for it removed again), so a read-only or full place fails now, not after an
   hour of decoding.
2. Written as the run goes. The first write replaces the earlier run, not one file of it: with
   ``force``, every file an earlier run of the same kind left there is removed first (and the
   terminal says which), so an interrupted new run never sits beside an old run's traces or
   figures. Kinds: a run that writes ``results.json`` (bench, replay, serve-bench) replaces the
   results and what is made from them (traces, CSV, figures); a run that writes only
   ``diagnosis.json`` (diagnose) replaces that alone, so a diagnosis can sit beside the bench
   run it diagnoses (its ``--traces`` input included). A file another run wrote there after
   :meth:`Run.check` (two runs given one ``--out``) is never removed without ``force``. :meth:`Run.write_json` replaces a file atomically; :meth:`Run.append_traces`
   appends one request's traces and flushes them, and cuts a failed write back to the last
   whole request.
3. :meth:`Run.recording`: Ctrl-C, SIGTERM or a failed write stop the run with
   :class:`RunStopped`, whose one line says how many requests were done and where they are.
   A results file written per request carries ``"complete": false`` and the requests done
   until the run's last write marks it complete, so ``python -m oilbird.evaluation.report`` reads an
   interrupted run and says it is one.

Knows files and signals, nothing about models or methods.
"""
from __future__ import annotations

import gzip
import json
import os
import signal
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable

from ..errors import InputError, repeated
from ..trace import RequestTrace, request_to_lines

_UMASK = os.umask(0)
os.umask(_UMASK)

# every file a bench or diagnose run writes into its folder
RUN_FILES = ("results.json", "traces.jsonl", "results.csv", "tau.html", "tau.png", "speedup.html",
             "speedup.png", "diagnosis.json")
# what --force replaces for a run that writes results.json: the results and what is made from them
RESULTS_FILES = RUN_FILES[:-1]


# the longest first line read to tell what a file is (a trace's request line holds its prompt)
FIRST_LINE_CHARS = 1 << 26
UNREADABLE = object()           # first_record's answer for a file it cannot read as a JSON line


def first_record(p: Path):
    """The first non-blank line of ``p`` (gzipped where it says so; a byte-order mark dropped, as
    the readers drop it) as JSON, read alone; None where it has none, :data:`UNREADABLE` where it
    cannot be read, is no JSON or runs past :data:`FIRST_LINE_CHARS`."""
    try:
        with (gzip.open(p, "rt", encoding="utf-8-sig") if p.suffix == ".gz" and p.stat().st_size
              else open(p, encoding="utf-8-sig")) as f:
            while line := f.readline(FIRST_LINE_CHARS + 1):
                if len(line) > FIRST_LINE_CHARS:
                    return UNREADABLE
                if line.strip():
                    return json.loads(line)
            return None
    except (OSError, EOFError, UnicodeDecodeError, ValueError, RecursionError):
        return UNREADABLE


def _request_record(d) -> bool:
    return isinstance(d, dict) and d.get("kind") == "request"


def opens_a_trace(p: Path) -> bool:
    """Does ``p`` begin as a trace file does, with a ``{"kind": "request", ...}`` record?"""
    return _request_record(first_record(p))


def holds_traces(p: Path) -> bool:
    """Is ``p`` empty, or does it begin a trace file (:func:`opens_a_trace`)? What a trace run
    may replace with ``force``."""
    d = first_record(p)
    return d is None or _request_record(d)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like Ctrl-C's KeyboardInterrupt."""


class RunStopped(Exception):
    """A run stopped early (Ctrl-C, SIGTERM, a failed write): ``str()`` is the one line for
    the terminal, ``code`` the exit status (130 Ctrl-C, 143 SIGTERM, 1 a failed write)."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


class _WriteFailed(Exception):
    def __init__(self, path: Path, exc: OSError):
        super().__init__(f"cannot write {path} ({exc.strerror or exc})")


class Run:
    """The output of one run: the folder ``out`` holding ``writes`` (names inside it), or,
    with ``writes`` empty, the one file ``out``. See the module docstring."""

    def __init__(self, out, force: bool = False, writes: tuple[str, ...] = (), unit: str = "requests"):
        self.out = Path(out)
        self.unit = unit                 # what a run counts, in its messages ("turns" for replay)
        self.force = force
        self.writes = tuple(writes)
        self.is_file = not writes
        self.planned: int | None = None
        self.done = 0
        self._begun = False

    # -- 1. before the model loads ---------------------------------------------------------------
    def check(self) -> None:
        """Refuse an output that would lose an earlier run or cannot be written, before any
        model loads: one :class:`~oilbird.errors.InputError`."""
        p = self.out
        if self.is_file:
            if p.is_dir():
                raise InputError(f"--out {p} is a folder; this command writes one file, e.g. runs/traces.jsonl")
            held = [p.name] if p.exists() else []
            if held and not holds_traces(p):
                raise InputError(f"--out {p} exists and is not a trace file (its first line is no trace record): "
                                 f"it is not replaced, even with --force; choose another --out")
        else:
            if p.exists() and not p.is_dir():
                raise InputError(f"--out {p} is a file; this command writes a folder ({', '.join(self.writes)})")
            held = self.earlier_files()
            odd = next((f for f in held if not (p / f).is_file()), None)
            if odd:              # --force would replace nothing: the write fails after the whole run
                raise InputError(f"--out {p} holds {odd}, which is not a file (a folder?): it is not replaced, "
                                 f"even with --force; choose another --out")
        if held and not self.force:
            where = f"{p} already exists" if self.is_file else f"{p} already holds {', '.join(held)}"
            raise InputError(f"--out {where} (an earlier run's): pass --force to replace it, or choose another --out")
        self._probe(p.parent if self.is_file else p)

    def earlier_files(self) -> list[str]:
        """The files of an earlier run of this kind in the folder (what ``force`` replaces; the
        module docstring says which)."""
        if self.is_file:
            return []
        mine = set(self.writes) | (set(RESULTS_FILES) if "results.json" in self.writes else set())
        return [f for f in RUN_FILES if f in mine and (self.out / f).exists()]

    def _probe(self, folder: Path) -> None:
        """Make ``folder`` (and its parents) and a file in it, then remove what was made."""
        made = []
        try:
            for d in reversed([folder, *folder.parents]):
                if not d.exists():
                    d.mkdir()
                    made.append(d)
            fd, probe = tempfile.mkstemp(prefix=".oilbird-probe-", dir=folder)
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            raise InputError(f"--out {self.out} cannot be written ({exc.strerror or exc}); choose another --out") \
                from None
        finally:
            for d in reversed(made):
                try:
                    d.rmdir()
                except OSError:
                    pass

    # -- 2. as the run goes ---------------------------------------------------------------------
    def path(self, name: str | None = None) -> Path:
        return self.out if name is None else self.out / name

    def _begin(self) -> None:
        """At the first write: make the folder and replace the earlier run."""
        if self._begun:
            return
        self._begun = True
        if self.is_file:
            self.out.parent.mkdir(parents=True, exist_ok=True)
            if self.out.exists():
                self._refuse_unforced([self.out.name])
                print(f"--force: replacing the earlier {self.out}", flush=True)
            self.out.write_bytes(b"")
            return
        self.out.mkdir(parents=True, exist_ok=True)
        earlier = self.earlier_files()
        self._refuse_unforced(earlier)
        for f in earlier:
            (self.out / f).unlink()
        if earlier:
            print(f"--force: removed the earlier run's {', '.join(earlier)} from {self.out}", flush=True)

    def _refuse_unforced(self, held: list[str]) -> None:
        """At the first write, files :meth:`check` did not see (another run on the same
        ``--out`` wrote them since) are not removed without ``force``."""
        if held and not self.force:
            raise InputError(f"--out {self.out}: another run wrote {', '.join(held)} there after this one started; "
                             f"nothing of this run was written (give each run its own --out, or pass --force)")

    def write_json(self, name: str, doc: dict) -> Path:
        """Replace ``name`` in the folder by ``doc`` as JSON, atomically (a temp file, then a
        rename; the temp file goes if anything fails)."""
        path = self.path(name)
        tmp = None
        try:
            self._begin()
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=self.out)
            os.chmod(tmp, 0o666 & ~_UMASK)          # mkstemp makes it 0600: as any file written here
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(json.dumps(doc, indent=2))
            os.replace(tmp, path)
            tmp = None
        except OSError as exc:
            raise _WriteFailed(path, exc) from None
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
        return path

    def save_results(self, name: str, doc: dict, done: int, planned: int, complete: bool = False) -> Path:
        """:meth:`write_json` of a results file that says whether the run is complete:
        ``complete``, ``n_requests`` (done) and ``n_requests_planned``."""
        self.planned = planned
        path = self.write_json(name, {**doc, "complete": complete, "n_requests": done, "n_requests_planned": planned})
        self.done = done
        return path

    def append_traces(self, traces: Iterable[RequestTrace], name: str | None = None) -> None:
        """Append one request's traces (every method's) to the trace file and flush; a write
        that fails (or is interrupted) is cut back to the last whole request. A ``.gz`` file
        gets one gzip member per request (readers take the members as one stream)."""
        path = self.path(name)
        data = "".join(line + "\n" for tr in traces for line in request_to_lines(tr)).encode("utf-8")
        if path.suffix == ".gz":
            data = gzip.compress(data, mtime=0)
        try:
            self._begin()
            with path.open("ab") as f:
                end = f.tell()
                try:
                    f.write(data)
                    f.flush()
                except BaseException:
                    f.truncate(end)
                    raise
        except OSError as exc:
            raise _WriteFailed(path, exc) from None
        if name is None or self.is_file:
            self.done += 1

    # -- 3. when it stops early ---------------------------------------------------------------------
    @contextmanager
    def recording(self, planned: int):
        """The run proper: SIGTERM raises :class:`Terminated` (in the main thread), and
        Ctrl-C, SIGTERM or a failed write become :class:`RunStopped` saying what was kept."""
        self.planned = planned
        old = None
        if threading.current_thread() is threading.main_thread():
            def terminate(signum, frame):
                raise Terminated()
            old = signal.signal(signal.SIGTERM, terminate)
        try:
            yield self
        except KeyboardInterrupt as exc:
            why, code = ("SIGTERM", 143) if isinstance(exc, Terminated) else ("Ctrl-C", 130)
            raise RunStopped(f"interrupted ({why}) {self._kept()}", code) from None
        except _WriteFailed as exc:
            raise RunStopped(f"{exc}: the run stopped; {self._kept()}", 1) from None
        except BrokenPipeError:             # stdout's reader left (| head): run_cli ends it quietly
            raise
        except OSError as exc:              # a write of the run's own (e.g. trace --diagnose's labels)
            where = f" {exc.filename}" if exc.filename else ""
            raise RunStopped(f"cannot write{where} ({exc.strerror or exc}): the run stopped; {self._kept()}", 1) \
                from None
        finally:
            if old is not None:
                signal.signal(signal.SIGTERM, old)

    def _kept(self) -> str:
        """What an early stop leaves, in words."""
        unit = self.unit
        of = f"{self.done} of {self.planned} {unit}" if self.planned is not None else f"{self.done} {unit}"
        if not self._begun or not self.done:
            return f"before the first of the {unit} was written: nothing was written to {self.out}"
        if self.is_file:
            return f"after {of}: {self.out} holds their traces (python -m oilbird report {self.out})"
        return (f"after {of}: {self.out} holds their results, marked incomplete "
                f"(python -m oilbird report {self.out})")


def unique(items: list[str], option: str) -> list[str]:
    """``items`` if none is named twice; else one error naming the repeat (a list option whose
    repeats would be run, and counted, twice)."""
    twice = repeated(items)
    if twice is not None:
        raise InputError(f"{option}: '{twice}' is named twice; name each once")
    return items
