"""Never lose a run (issue 20 #1-#3): outputs checked before the model loads, written request by
request, an interrupted run (Ctrl-C, SIGTERM, a failed write) left readable and marked
incomplete, and --force replacing a whole earlier run. The tiny mock model stands in for the
real one; an interruption is made at the audit of the second request."""
from __future__ import annotations

import errno
import json
import os
import signal

import pytest
from conftest import make_tiny_lm

import oilbird.audit
import oilbird.model
from oilbird.__main__ import main
from oilbird.evaluation.report import main as report_main
from oilbird.evaluation.runs import Run, RunStopped
from oilbird.trace import load_traces

MAX_NEW = 6          # the warm-up asks generate() for 4 tokens, the audit for MAX_NEW


def _data(tmp_path, n=3):
    p = tmp_path / "reqs.jsonl"
    p.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"call f({i}) twice"}) + "\n" for i in range(n)))
    return str(p)


@pytest.fixture
def tiny_model(monkeypatch):
    monkeypatch.setattr(oilbird.model, "load_model", lambda *a, **k: make_tiny_lm())


@pytest.fixture
def no_model(monkeypatch):
    monkeypatch.setattr(oilbird.model, "load_model", lambda *a, **k: pytest.fail("model loaded"))


def _interrupt_at_request(monkeypatch, k: int, stop):
    """Call ``stop()`` when the bench audits request ``k`` (1-based): after every method decoded
    it, before its results are written."""
    real = oilbird.audit.hf_greedy
    seen = []

    def audit(lm, ids, max_new, stock=True):
        if stock and max_new == MAX_NEW:
            seen.append(ids)
            if len(seen) == k:
                stop()
        return real(lm, ids, max_new, stock)
    monkeypatch.setattr("oilbird.evaluation.bench.hf_greedy", audit)


def _ctrl_c():
    raise KeyboardInterrupt


def _sigterm():
    os.kill(os.getpid(), signal.SIGTERM)


def _bench(tmp_path, out, *extra):
    return main(["bench", "--data", _data(tmp_path), "--methods", "ar,goose", "--max-new-tokens", str(MAX_NEW),
                 "--out", str(out), *extra])


# -- 1. the output is checked before the model loads -----------------------------------------------
@pytest.mark.parametrize("cmd, out", [
    (["bench", "--methods", "goose"], "blocker/run"),
    (["diagnose"], "blocker/run"),
    (["trace", "--methods", "goose"], "blocker/sub/t.jsonl"),
])
def test_an_output_that_cannot_be_created_fails_before_the_model_loads(tmp_path, capsys, no_model, cmd, out):
    (tmp_path / "blocker").write_text("a file where a folder would have to be")
    assert main(cmd + ["--data", "builtin", "--limit", "1", "--out", str(tmp_path / out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot be written" in err, err


def test_an_unwritable_folder_fails_before_the_model_loads(tmp_path, capsys, no_model, monkeypatch):
    """A read-only place (simulated: the tests may run as root, who can write anywhere)."""
    def refuse(*a, **k):
        raise PermissionError(errno.EACCES, "Permission denied")
    monkeypatch.setattr("oilbird.evaluation.runs.tempfile.mkstemp", refuse)
    for cmd in (["bench", "--methods", "goose", "--out", str(tmp_path / "run")],
                ["trace", "--methods", "goose", "--out", str(tmp_path / "t.jsonl")]):
        assert main(cmd + ["--data", "builtin", "--limit", "1"]) == 2
        assert "cannot be written (Permission denied)" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []            # the probe leaves nothing behind


# -- 2. written as it goes; an interrupted run is readable and marked incomplete ----------------------
@pytest.mark.parametrize("stop, code, why", [(_ctrl_c, 130, "Ctrl-C"), (_sigterm, 143, "SIGTERM")])
def test_an_interrupted_bench_leaves_a_readable_run_marked_incomplete(tmp_path, capsys, tiny_model, monkeypatch,
                                                                       stop, code, why):
    _interrupt_at_request(monkeypatch, 2, stop)
    out = tmp_path / "run"
    assert _bench(tmp_path, out, "--traces") == code
    err = capsys.readouterr().err
    assert f"interrupted ({why}) after 1 of 3 requests" in err and "marked incomplete" in err
    res = json.loads((out / "results.json").read_text())
    assert res["complete"] is False and res["n_requests"] == 1 and res["n_requests_planned"] == 3
    assert [r["request"] for r in res["methods"]["goose"]["per_request"]] == ["q0"]
    assert [(t.request_id, t.method) for t in load_traces(out / "traces.jsonl")] == [("q0", "goose")]
    assert sorted(p.name for p in out.iterdir()) == ["results.json", "traces.jsonl"]   # no temp file
    assert report_main([str(out)]) == 0
    assert "incomplete run (interrupted): 1 of 3 requests done" in capsys.readouterr().out
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL      # the handler is put back


def test_a_finished_bench_is_marked_complete(tmp_path, capsys, tiny_model):
    out = tmp_path / "run"
    assert _bench(tmp_path, out) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["complete"] is True and res["n_requests"] == res["n_requests_planned"] == 3
    capsys.readouterr()
    assert report_main([str(out)]) == 0 and "incomplete" not in capsys.readouterr().err


def test_an_interrupted_trace_keeps_the_requests_it_finished(tmp_path, capsys, tiny_model, monkeypatch):
    """trace used to hold every trace in memory until the end: Ctrl-C lost the whole run."""
    _interrupt_at_request(monkeypatch, 3, _ctrl_c)
    out = tmp_path / "t.jsonl"
    assert main(["trace", "--data", _data(tmp_path), "--methods", "goose,oilbird", "--max-new-tokens", str(MAX_NEW),
                 "--out", str(out)]) == 130
    assert "after 2 of 3 requests" in capsys.readouterr().err
    assert [(t.request_id, t.method) for t in load_traces(out)] == [
        ("q0", "goose"), ("q0", "oilbird"), ("q1", "goose"), ("q1", "oilbird")]


def test_an_interrupted_diagnose_leaves_a_readable_diagnosis_marked_incomplete(tmp_path, capsys, tiny_model,
                                                                               monkeypatch):
    import oilbird.evaluation.diagnose
    real = oilbird.evaluation.diagnose.teacher_forced
    calls = []

    def forced(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **k)
    monkeypatch.setattr(oilbird.evaluation.diagnose, "teacher_forced", forced)
    out = tmp_path / "diag"
    assert main(["diagnose", "--data", _data(tmp_path), "--max-new-tokens", str(MAX_NEW), "--out", str(out)]) == 130
    assert "after 1 of 3 requests" in capsys.readouterr().err
    doc = json.loads((out / "diagnosis.json").read_text())
    assert doc["complete"] is False and doc["n_requests"] == 1 and doc["requests"] == ["q0"]
    assert report_main([str(out)]) == 0
    assert "1 of 3 requests done" in capsys.readouterr().out


def test_a_failed_write_stops_the_run_in_one_line_and_keeps_what_was_written(tmp_path, capsys, tiny_model,
                                                                              monkeypatch):
    """The disk fills while results.json is rewritten after request 2: the run stops, says so
    in one line, and the results of request 1 stay (marked incomplete), no temp file left."""
    real = os.replace
    calls = []

    def replace(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(src, dst)
    monkeypatch.setattr("oilbird.evaluation.runs.os.replace", replace)
    out = tmp_path / "run"
    assert _bench(tmp_path, out) == 1
    last = capsys.readouterr().err.rstrip("\n").split("\n")[-1]          # (above it: the progress bar)
    assert "results.json (No space left on device): the run stopped" in last and "after 1 of 3 requests" in last
    res = json.loads((out / "results.json").read_text())
    assert res["complete"] is False and res["n_requests"] == 1
    assert [p.name for p in out.iterdir()] == ["results.json"]


def test_a_failed_trace_write_is_cut_back_to_the_last_whole_request(tmp_path, monkeypatch):
    """Half of a request's lines reach the disk, then it is full: the file is cut back to the
    requests before, so it still loads."""
    from pathlib import Path

    from wb_traces import all_requests, request_other

    from oilbird.evaluation.runs import RunStopped
    path = tmp_path / "t.jsonl"
    run = Run(path)
    run.append_traces([request_other("a")])
    before = path.read_bytes()
    real_open = Path.open

    class HalfThenFull:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def __getattr__(self, name):
            return getattr(self.f, name)

        def write(self, data):
            self.f.write(data[:len(data) // 2])
            self.f.flush()
            raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(Path, "open", lambda self, *a, **k: HalfThenFull(real_open(self, *a, **k)))
    with pytest.raises(RunStopped, match=r"t.jsonl \(No space left on device\): the run stopped; after 1 of 2"):
        with run.recording(2):
            run.append_traces(all_requests())
    monkeypatch.undo()
    assert path.read_bytes() == before and [t.request_id for t in load_traces(path)] == ["a"]


def test_traces_appended_to_a_gz_file_load(tmp_path):
    """``trace --out t.jsonl.gz``: every reader takes a ``.gz`` trace file as gzip, so the
    requests appended one by one are gzip members, read back as one file."""
    from wb_traces import all_requests, request_other
    path = tmp_path / "t.jsonl.gz"
    run = Run(path)
    run.append_traces([request_other("a")])
    run.append_traces(all_requests())
    loaded = load_traces(path)
    assert [t.request_id for t in loaded] == ["a"] + [t.request_id for t in all_requests()]
    assert report_main([str(path)]) == 0


# -- 3. --force replaces a run, not a file ---------------------------------------------------------------
def test_force_replaces_the_whole_earlier_run(tmp_path, capsys, tiny_model):
    out = tmp_path / "run"
    out.mkdir()
    for f in ("results.json", "traces.jsonl", "results.csv", "tau.html", "notes.txt"):
        (out / f).write_text("earlier")
    assert _bench(tmp_path, out) == 2                    # refused without --force
    assert "already holds results.json, traces.jsonl, results.csv, tau.html" in capsys.readouterr().err
    assert _bench(tmp_path, out, "--force") == 0
    assert "removed the earlier run's results.json, traces.jsonl, results.csv, tau.html" in capsys.readouterr().out
    assert not (out / "traces.jsonl").exists()           # this run wrote no traces: the old ones went
    assert json.loads((out / "results.json").read_text())["complete"] is True
    assert (out / "notes.txt").read_text() == "earlier"  # not a run's file: left alone


def test_a_folder_where_a_run_writes_a_file_is_refused_before_the_model_loads(tmp_path, capsys):
    """--force would remove nothing there and the write failed after the whole run."""
    out = tmp_path / "run"
    (out / "results.json").mkdir(parents=True)
    for extra in ((), ("--force",)):
        assert main(["bench", "--out", str(out), "--model", str(tmp_path / "no-such-model"), *extra]) == 2
        err = capsys.readouterr().err
        assert "holds results.json, which is not a file (a folder?)" in err and "no-such-model" not in err


def test_force_leaves_the_earlier_run_alone_until_the_new_one_writes(tmp_path, capsys, tiny_model, monkeypatch):
    """A forced run stopped before its first request finished has replaced nothing."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "results.json").write_text("earlier")
    _interrupt_at_request(monkeypatch, 1, _ctrl_c)
    assert _bench(tmp_path, out, "--force") == 130
    assert "nothing was written" in capsys.readouterr().err
    assert (out / "results.json").read_text() == "earlier"


@pytest.mark.parametrize("name", ["t.jsonl", "t.jsonl.gz"])
def test_force_replaces_an_earlier_trace_file_but_never_another_file(tmp_path, name):
    """A trace run's --out is one file: an earlier trace file is replaced with --force, but a
    file that is not one (the user's own data given the wrong name) is refused even then."""
    from oilbird.errors import InputError
    from wb_traces import all_requests
    out = tmp_path / name
    Run(out).append_traces(all_requests())
    with pytest.raises(InputError, match="already exists .an earlier run's.: pass --force"):
        Run(out).check()
    Run(out, force=True).check()
    for text in ("precious notes\n", '{"messages": []}\n', '{"kind": "cycle"}\n'):
        out.write_text(text)
        with pytest.raises(InputError, match="exists and is not a trace file .* not replaced, even with --force"):
            Run(out, force=True).check()
        assert out.read_text() == text
    out.write_text("")                                   # empty: nothing to lose
    Run(out, force=True).check()


def test_a_diagnosis_sits_beside_the_bench_run_it_diagnoses(tmp_path, capsys, tiny_model):
    """diagnose --out on a bench folder writes diagnosis.json there without --force, and its
    --force replaces only an earlier diagnosis: never the bench's results or its --traces input."""
    out = tmp_path / "run"
    assert _bench(tmp_path, out, "--traces") == 0
    assert f"wrote {out / 'traces.jsonl'}" in capsys.readouterr().out      # said with the others
    held = sorted(f.name for f in out.iterdir())
    diagnose = ["diagnose", "--data", _data(tmp_path), "--max-new-tokens", str(MAX_NEW),
                "--traces", str(out / "traces.jsonl"), "--out", str(out)]
    assert main(diagnose) == 0
    assert main(diagnose) == 2 and "already holds diagnosis.json" in capsys.readouterr().err
    assert main(diagnose + ["--force"]) == 0
    assert sorted(f.name for f in out.iterdir()) == sorted(held + ["diagnosis.json"])
    assert load_traces(out / "traces.jsonl") and json.loads((out / "results.json").read_text())["complete"]


@pytest.mark.parametrize("writes, name", [(("results.json",), "results.json"), ((), None)])
def test_files_another_run_wrote_after_the_check_are_not_removed_without_force(tmp_path, writes, name):
    """Two runs given one --out: the one that writes second finds the other's files at its
    first write and stops, removing nothing."""
    out = tmp_path / ("run" if writes else "t.jsonl")
    run = Run(out, writes=writes)
    run.check()
    target = out / name if name else out
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("the other run's")                # written since the check
    with pytest.raises(ValueError, match="another run wrote .* after this one started; nothing of this run"):
        run.write_json("results.json", {}) if writes else run.append_traces([])
    assert target.read_text() == "the other run's"


def test_a_list_option_named_twice_is_refused(capsys):
    """store_bench measured a repeated dtype or size twice and drew both rows."""
    from oilbird.evaluation.store_bench import main as store_bench
    for argv, message in ((["--dtypes", "int8,fp16,int8"], "--dtypes: 'int8' is named twice"),
                          (["--sizes", "1000,1000"], "--sizes: '1000' is named twice")):
        with pytest.raises(SystemExit) as e:
            store_bench(argv)
        assert e.value.code == 2 and message in capsys.readouterr().err


def test_a_full_disk_at_the_figures_keeps_the_complete_results(tmp_path, capsys, tiny_model, monkeypatch):
    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr("oilbird.evaluation.report.write_csv", full)
    out = tmp_path / "run"
    assert _bench(tmp_path, out) == 1
    last = capsys.readouterr().err.rstrip("\n").split("\n")[-1]
    assert last.startswith("cannot write the CSV and figures (No space left on device)") and "is complete" in last
    assert json.loads((out / "results.json").read_text())["complete"] is True


def test_a_closed_stdout_is_not_a_failed_write_of_the_run(tmp_path):
    """`python -m oilbird trace ... | head`: printing into the closed pipe inside the run stays a
    BrokenPipeError (run_cli ends the command quietly), not "cannot write: the run stopped"."""
    run = Run(tmp_path / "out", writes=("results.json",))
    with pytest.raises(BrokenPipeError):
        with run.recording(2):
            raise BrokenPipeError(32, "Broken pipe")
    with pytest.raises(RunStopped, match="cannot write"):         # a real write failure still stops the run
        with run.recording(2):
            raise OSError(28, "No space left on device")
