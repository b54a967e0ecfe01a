"""Every reader fails the same way (issue 20): for any bytes at all, a loader returns a valid
object or raises the project's own error (:class:`~oilbird.errors.InputError`, the loader's
subclass) naming the file; nothing else escapes.

Property tests feed each loader arbitrary bytes, mutated copies of a valid file (bytes flipped,
cut, inserted, deleted) and valid files with one field replaced by an arbitrary JSON value.
Then one test per case the issue found: deep nesting, a 5,000-digit integer, a truncated
``.jsonl.gz``, bad UTF-8, NaN/Infinity, a huge line, an empty file, and results files of the
right outline but wrong field types. No model; a few seconds in all.
"""
from __future__ import annotations

import gzip
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wb_traces import all_requests

from oilbird.data.conversations import Conversation, ConversationError, read_jsonl
from oilbird.errors import InputError
from oilbird.evaluation.report import ResultsError, load_results, markdown_table, paired_table, source_table, trace_methods
from oilbird.evaluation.report import main as report_main
from oilbird.data.requests import DataError, Request, has_text, load_api_bank, load_jsonl, load_requests
from oilbird.store import Store, StoreError
from oilbird.store_files import load_store, save_store
from oilbird.trace import RequestTrace, TraceError, load_traces, save_traces

# fixed examples by default, so a CI verdict never depends on a seed; OILBIRD_FUZZ_EXAMPLES=5000
# searches further, with fresh random examples each run
_MORE = int(os.environ.get("OILBIRD_FUZZ_EXAMPLES", "0"))
FUZZ = settings(max_examples=_MORE or 60, deadline=None, derandomize=not _MORE, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# -- what a valid answer looks like, per loader ---------------------------------------------------
def _valid_requests(reqs) -> None:
    assert isinstance(reqs, list) and reqs and all(isinstance(r, Request) for r in reqs)
    assert len({r.id for r in reqs}) == len(reqs)
    for r in reqs:
        assert isinstance(r.id, str) and has_text(r.messages)
        assert all(isinstance(m["role"], str) and isinstance(m["content"], str) for m in r.messages)


def _valid_traces(traces) -> None:
    assert traces and all(isinstance(t, RequestTrace) for t in traces)
    for t in traces:
        assert [x for c in t.cycles for x in c.committed] == t.output_ids
    source_table(trace_methods(traces))


def _valid_report(kind_res) -> None:
    kind, res = kind_res
    if kind == "diagnosis":
        from oilbird.evaluation.diagnose import format_gap_table
        format_gap_table(res, res.get("pool_full"))
    elif kind == "traces":
        source_table(res["methods"])
        paired_table(res)
    else:
        markdown_table(res)
        paired_table(res, (("oilbird", "goose"),))


def _valid_conversations(convs) -> None:
    assert isinstance(convs, list) and convs and all(isinstance(c, Conversation) for c in convs)
    assert len({c.id for c in convs}) == len(convs)
    for c in convs:
        assert any(m["role"] == "assistant" for m in c.messages)
        for m in c.messages:
            for call in m.get("tool_calls", ()):
                assert isinstance(call.arguments_json, str)         # replayed as written
                assert call.arguments is None or isinstance(call.arguments, dict)


def _valid_store(s) -> None:
    assert isinstance(s, Store)
    s.search(np.ones(s.dim, dtype=np.float32), 4)
    s.suffix.match([1, 2, 3])


# -- valid seed files ---------------------------------------------------------------------------------
REQUESTS = (json.dumps({"id": "a", "prompt": "Call GetWeather for Paris."}) + "\n"
            + json.dumps({"messages": [{"role": "system", "content": "be brief"},
                                       {"role": "user", "content": "hi \u2028 there"}]}) + "\n").encode()
CONVERSATIONS = (json.dumps({"id": "c1", "model": "m", "messages": [
    {"role": "user", "content": "Where is booking QX7?"},
    {"role": "assistant", "content": "", "tool_calls": [{"name": "get_booking", "arguments": {"id": "QX7"}}]},
    {"role": "tool", "name": "get_booking", "content": "{\"id\": \"QX7\", \"to\": \"Oslo\"}"},
    {"role": "assistant", "content": "QX7 goes to Oslo."}]}) + "\n").encode()
API_BANK = json.dumps([{"instruction": "Use the API.", "input": "User: hi\nGenerate API Request:",
                        "expected_output": "API-Request: [Hi()]"}], indent=1).encode()


def _method_row(tau: float, requests=("r1", "r2")) -> dict:
    return {"tau": tau, "tokens_per_s": 10.0, "speedup": 1.2, "decode_speedup": None, "lossless": True,
            "n_requests": len(requests), "tokens": 8, "forwards": 4, "seconds": 0.8, "overhead_share": 0.1,
            "mean_nodes": 9.5, "accepted_by_source": {"suffix": 3.0, "bonus": 4.0},
            "sole_by_source": {"suffix": 2}, "sole_share": {"semantic": 0.1},
            "per_request": [{"request": r, "tokens": 4, "forwards": 2, "seconds": 0.4, "prefill_seconds": 0.1}
                            for r in requests]}


RESULTS = json.dumps({"model": "tiny", "data": "builtin", "n_requests": 2, "max_new_tokens": 8,
                      "methods": {"goose": _method_row(2.0), "oilbird": _method_row(2.5)}}, indent=2).encode()
DIAGNOSIS = json.dumps({"n_requests": 2, "n_positions": 40, "n_gap": 6, "n_recovered": 2, "present_2": 0.5,
                        "gap": 0.15, "semantic_reach": None, "match_len_gap_median": 3,
                        "pool_full": {"present_2": 0.6, "gap": 0.1}}).encode()


def _traces_bytes(tmp: Path) -> bytes:
    return save_traces(all_requests(), tmp / "seed.jsonl").read_bytes()


def _store_bytes(tmp: Path) -> bytes:
    rng = np.random.default_rng(0)
    s = Store(dim=4, tenant="acme")
    for r in range(3):
        for i, t in enumerate(rng.integers(0, 20, 12).tolist()):
            s.add(f"q{r}", i, t, rng.normal(size=4))
        s.end_request()
    return save_store(s, tmp / "seed.oilstore").read_bytes()


@dataclass
class Reader:
    """One loader: the file name it reads, how to call it on a path, the error it may raise,
    and what a valid answer must satisfy."""
    name: str
    filename: str
    load: Callable
    error: type
    valid: Callable


def _api_bank(path: Path):
    """load_api_bank on the folder whose level-1 file is ``path`` (level-2: a valid one)."""
    (path.parent / "level-2-api.json").write_bytes(API_BANK)
    return load_api_bank(path.parents[1])


READERS = {
    "requests": Reader("requests", "r.jsonl", load_jsonl, DataError, _valid_requests),
    "requests-gz": Reader("requests-gz", "r.jsonl.gz", load_jsonl, DataError, _valid_requests),
    "api-bank": Reader("api-bank", "ab/test-data/level-1-api.json", _api_bank, DataError, _valid_requests),
    "traces": Reader("traces", "t.jsonl", load_traces, TraceError, _valid_traces),
    "results": Reader("results", "results.json", load_results, ResultsError, _valid_report),
    "diagnosis": Reader("diagnosis", "diagnosis.json", load_results, ResultsError, _valid_report),
    "report-traces": Reader("report-traces", "t.jsonl", load_results, TraceError, _valid_report),
    "store": Reader("store", "s.oilstore", load_store, StoreError, _valid_store),
    "conversations": Reader("conversations", "c.jsonl", read_jsonl, ConversationError, _valid_conversations),
}


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A scratch folder and every reader's valid seed bytes."""
    tmp = tmp_path_factory.mktemp("readers")
    traces = _traces_bytes(tmp)
    seeds = {"requests": REQUESTS, "requests-gz": gzip.compress(REQUESTS, mtime=0), "api-bank": API_BANK,
             "traces": traces, "results": RESULTS, "diagnosis": DIAGNOSIS, "report-traces": traces,
             "store": _store_bytes(tmp), "conversations": CONVERSATIONS}
    return tmp, seeds


def _check(reader: Reader, tmp: Path, data: bytes) -> None:
    """The property: valid answer, or the reader's own error naming the file."""
    case = tmp / reader.name
    shutil.rmtree(case, ignore_errors=True)
    path = case / reader.filename
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    try:
        got = reader.load(path)
    except reader.error as exc:
        assert isinstance(exc, InputError) and str(path) in str(exc) and exc.reason, str(exc)
        return
    reader.valid(got)


def test_every_seed_file_is_valid(work):
    tmp, seeds = work
    for name, reader in READERS.items():
        case = tmp / f"seed-{name}"
        (case / reader.filename).parent.mkdir(parents=True, exist_ok=True)
        (case / reader.filename).write_bytes(seeds[name])
        reader.valid(reader.load(case / reader.filename))


# -- arbitrary and mutated bytes ------------------------------------------------------------------
NAMES = list(READERS)


@FUZZ
@given(name=st.sampled_from(NAMES), data=st.binary(max_size=3000))
def test_arbitrary_bytes(work, name, data):
    tmp, _ = work
    _check(READERS[name], tmp, data)


# one edit of a byte string: flip a bit, cut the tail, insert bytes, delete a span
EDITS = st.one_of(
    st.tuples(st.just("flip"), st.floats(0, 1), st.integers(0, 7)),
    st.tuples(st.just("cut"), st.floats(0, 1), st.just(0)),
    st.tuples(st.just("insert"), st.floats(0, 1), st.sampled_from(
        [b"\xff", b"\x00", b"\n", b"[", b"{", b"\"", b"NaN", b"1e999", b"9" * 30, b"\xe2\x80\xa8", b"\\"])),
    st.tuples(st.just("delete"), st.floats(0, 1), st.integers(1, 64)),
)


def _mutate(data: bytes, edits) -> bytes:
    b = bytearray(data)
    for kind, where, arg in edits:
        at = min(int(where * len(b)), max(len(b) - 1, 0))
        if kind == "flip" and b:
            b[at] ^= 1 << arg
        elif kind == "cut":
            del b[at:]
        elif kind == "insert":
            b[at:at] = arg
        elif kind == "delete":
            del b[at:at + arg]
    return bytes(b)


@FUZZ
@given(name=st.sampled_from(NAMES), edits=st.lists(EDITS, min_size=1, max_size=4))
def test_mutated_valid_files(work, name, edits):
    tmp, seeds = work
    _check(READERS[name], tmp, _mutate(seeds[name], edits))


# any JSON value, numbers and strings included, nested a few levels
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8)


def _replace_somewhere(value, draw):
    """``value`` (parsed JSON) with one place in it replaced by an arbitrary JSON value, or a
    key deleted: the outline stays right, a field goes wrong."""
    if isinstance(value, dict) and value:
        key = draw(st.sampled_from(sorted(value)))
        choice = draw(st.integers(0, 2))
        out = dict(value)
        if choice == 0:
            del out[key]
        elif choice == 1:
            out[key] = draw(JSON)
        else:
            out[key] = _replace_somewhere(value[key], draw)
        return out
    if isinstance(value, list) and value:
        i = draw(st.integers(0, len(value) - 1))
        out = list(value)
        out[i] = draw(JSON) if draw(st.booleans()) else _replace_somewhere(value[i], draw)
        return out
    return draw(JSON)


JSON_READERS = ["requests", "api-bank", "traces", "results", "diagnosis", "report-traces"]


@FUZZ
@given(name=st.sampled_from(JSON_READERS), data=st.data())
def test_valid_files_with_one_field_gone_wrong(work, name, data):
    tmp, seeds = work
    text = seeds[name].decode()
    if name in ("requests", "traces", "report-traces"):            # JSON lines: change one line
        lines = text.splitlines()
        k = data.draw(st.integers(0, len(lines) - 1))
        lines[k] = json.dumps(_replace_somewhere(json.loads(lines[k]), data.draw), ensure_ascii=False)
        out = "\n".join(lines) + "\n"
    else:
        out = json.dumps(_replace_somewhere(json.loads(text), data.draw), indent=1)
    _check(READERS[name], tmp, out.encode())


# -- the cases the issue found ------------------------------------------------------------------------
DEEP = "[" * 200_000 + "]" * 200_000
BIG_INT = '{"prompt": "x", "id": ' + "9" * 5000 + "}"

# a valid first line, then the bad one on line 2 (so the line number is checked)
BAD_LINES = {
    "nested 200,000 deep": (DEEP, "nested too deeply"),
    "a 5,000-digit integer": (BIG_INT, "5000 digits"),
    "NaN": ('{"prompt": "x", "id": NaN}', "NaN is not a number"),
    "Infinity": ('{"prompt": "x", "id": -Infinity}', "Infinity is not a number"),
    "a float overflowing": ('{"prompt": "x", "n": 1e999}', "overflows a float"),
    # Python's message ends where the position follows: it read "(Unterminated string starting at, column 12)"
    "an unterminated string": ('{"prompt": "x", "id": "1}', "Unterminated string starting at: column"),
}


def _two_lines(tmp: Path, name: str, second: str, first: str | None = None) -> Path:
    """A file whose line 1 is ``first`` (by default a valid request) and line 2 ``second``."""
    p = tmp / name
    p.write_text((first or json.dumps({"id": "ok", "prompt": "hi"})) + "\n" + second + "\n")
    return p


@pytest.mark.parametrize("case", list(BAD_LINES))
def test_a_bad_line_is_named_by_every_jsonl_reader(tmp_path, case):
    """bench --data (requests), the trace loader (app start, upload) and oilbird.evaluation.report: one
    error with the file and the line, not a RecursionError or a raw ValueError."""
    line, reason = BAD_LINES[case]
    trace_head = _traces_bytes(tmp_path).decode().split("\n")[0]      # a valid request line
    for load, error, first in ((load_requests, DataError, None), (load_traces, TraceError, trace_head),
                               (load_results, TraceError, trace_head)):
        p = _two_lines(tmp_path, "bad.jsonl", line, first)
        with pytest.raises(error, match=reason) as e:
            load(p)
        assert str(e.value).startswith(f"{p}:2: "), str(e.value)


@pytest.mark.parametrize("case", list(BAD_LINES))
def test_a_bad_whole_document_is_named(tmp_path, case):
    """The same values inside a results.json and an API-Bank file."""
    line, reason = BAD_LINES[case]
    doc = line.replace('"prompt": "x"', '"methods": {}')
    p = tmp_path / "results.json"
    p.write_text(doc)
    with pytest.raises(InputError, match=reason) as e:
        load_results(p)
    assert str(p) in str(e.value)
    f = tmp_path / "ab" / "test-data" / "level-1-api.json"
    f.parent.mkdir(parents=True)
    f.write_text(doc)
    with pytest.raises(DataError, match=reason):
        load_api_bank(tmp_path / "ab")


def _truncated_gz(tmp: Path, name: str, payload: bytes) -> Path:
    p = tmp / name
    p.write_bytes(gzip.compress(payload)[:-30])
    return p


def test_a_truncated_gz_is_one_error(tmp_path):
    traces = _traces_bytes(tmp_path)
    for load, error, payload in ((load_requests, DataError, REQUESTS * 20), (load_traces, TraceError, traces),
                                 (load_results, TraceError, traces)):
        p = _truncated_gz(tmp_path, "cut.jsonl.gz", payload)
        with pytest.raises(error, match="damaged or truncated gzip") as e:
            load(p)
        assert str(p) in str(e.value)


@pytest.mark.parametrize("data, reason, line", [
    (b'{"prompt": "ok"}\n{"prompt": "caf\xe9"}\n', "not UTF-8", 2),
    (gzip.compress(b'{"prompt": "ok"}\n'), "gzip-compressed, but the name does not end in .gz", None),
    (b"", "no ", None),
    (b"\n  \n", "no ", None),
])
def test_bad_utf8_and_empty_files(tmp_path, data, reason, line):
    for load, error in ((load_requests, DataError), (load_traces, TraceError)):
        p = tmp_path / "x.jsonl"
        p.write_bytes(data)
        with pytest.raises(error, match=reason) as e:
            load(p)
        assert e.value.path == str(p) and e.value.line == line


def test_a_lone_surrogate_is_refused_by_line_and_a_pair_reads(tmp_path):
    """``"\\ud800"`` is valid JSON but no text: every reader refused it only later, in a tokenizer
    or an encoder, with a traceback. A pair is one astral character; an escaped backslash before
    ``ud800`` is plain text."""
    p = _two_lines(tmp_path, "x.jsonl", '{"id": "s", "prompt": "hello \\ud800 there"}')
    lines = _traces_bytes(tmp_path).decode().split("\n")
    assert '"method": "' in lines[1]
    lines[1] = lines[1].replace('"method": "', '"method": "\\ud800', 1)
    (tmp_path / "t.jsonl").write_text("\n".join(lines))
    for load, error, path in ((load_requests, DataError, p), (load_traces, TraceError, tmp_path / "t.jsonl"),
                              (load_results, TraceError, tmp_path / "t.jsonl")):
        with pytest.raises(error, match=r"lone UTF-16 surrogate \(\\ud800") as e:
            load(path)
        assert e.value.line == 2
    p = tmp_path / "r.json"
    p.write_text('{"methods": {\n"x\\udfff": {}}}')
    with pytest.raises(InputError, match="lone UTF-16 surrogate") as e:
        load_results(p)
    assert e.value.line == 2
    # a tool call's recorded argument text is read as JSON too: one with a lone surrogate is broken
    # JSON, replayed as written (its text is ASCII), not a value the chat template chokes on
    from oilbird.data.openai_messages import ToolCall
    assert ToolCall("f", '{"a": "\\ud800"}').arguments is None
    assert ToolCall("f", '{"a": "\\ud83d\\ude00"}').arguments == {"a": "\U0001f600"}
    # escapes read as the decoder reads them: after an escaped backslash "ud800" is text, and the
    # line named is the lone one's
    for text, line in (('{"a": "\\\\ud800\\udc00"}', 1), ('{"a": "\\\\ud800 text",\n "b": "\\ud800"}', 2),
                       ('["\\ud83d\\ud83d\\ude00"]', 1), ('["\\ud83d\\\\"]', 1)):
        (tmp_path / "d.json").write_text(text)
        with pytest.raises(InputError, match="lone UTF-16 surrogate") as e:
            load_results(tmp_path / "d.json")
        assert e.value.line == line, text
    ok = _two_lines(tmp_path, "ok.jsonl", '{"id": "p", "prompt": "a \\ud83d\\ude00 and \\\\ud800"}')
    assert load_requests(ok)[1].messages[0]["content"] == "a \U0001f600 and \\ud800"


def test_report_reads_a_trace_file_under_any_name(tmp_path):
    """The app's upload takes a .txt; report judged a trace by its name (not valid JSON: Extra data)."""
    p = tmp_path / "oil.txt"
    p.write_bytes(_traces_bytes(tmp_path))
    kind, res = load_results(p)
    assert kind == "traces" and res["methods"]
    bom = tmp_path / "bom.txt"                     # a byte-order mark, which every reader drops
    bom.write_bytes(b"\xef\xbb\xbf" + p.read_bytes())
    assert load_results(bom)[0] == "traces"
    one = tmp_path / "one.txt"                     # one request without cycles: one JSON document
    one.write_text(p.read_text().split("\n")[0] + "\n")
    with pytest.raises(TraceError, match="its cycles commit 0 tokens"):
        load_results(one)
    bad = tmp_path / "bad.txt"
    bad.write_text('{"a":\n')
    with pytest.raises(InputError, match="not valid JSON"):
        load_results(bad)


def test_a_huge_line_loads_or_fails_without_echoing_it(tmp_path):
    huge = "y" * 5_000_000
    p = _two_lines(tmp_path, "big.jsonl", json.dumps({"id": "big", "prompt": huge}))
    assert [len(r.messages[0]["content"]) for r in load_requests(p)] == [2, len(huge)]
    p = _two_lines(tmp_path, "big.jsonl", json.dumps({"id": "big", "prompt": 3, "pad": huge}))
    with pytest.raises(DataError) as e:
        load_requests(p)
    assert len(str(e.value)) < 300


def test_line_separators_inside_strings_do_not_split_a_trace_line(tmp_path):
    """U+2028 and U+0085 are written raw (ensure_ascii=False); str.splitlines used to cut the
    line there, so a model that produced one could not be loaded back."""
    reqs = all_requests()
    reqs[0].prompt_text = "a\u2028b\x85c"
    assert load_traces(save_traces(reqs, tmp_path / "t.jsonl")) == reqs


def test_traces_saved_to_a_gz_path_are_gzipped_and_the_same_bytes_each_time(tmp_path):
    """save_traces gzips a .gz path (every reader takes it so; it used to write plain text there,
    which no reader could open), with no name or time in the header: the same traces, the same bytes."""
    reqs = all_requests()
    a = save_traces(reqs, tmp_path / "a.jsonl.gz")
    b = save_traces(reqs, tmp_path / "deeper" / "b.jsonl.gz")
    assert a.read_bytes()[:2] == b"\x1f\x8b" and a.read_bytes() == b.read_bytes()
    assert load_traces(a) == reqs
    assert gzip.decompress(a.read_bytes()) == save_traces(reqs, tmp_path / "c.jsonl").read_bytes()


# -- results.json and diagnosis.json of the right outline but wrong field types (issue 20 #6) -----------
def _results_with(method_row) -> dict:
    return {"methods": {"goose": _method_row(2.0), "x": method_row}}


@pytest.mark.parametrize("doc, message", [
    ({"methods": {"x": 1}}, "method 'x' is 1, not an object"),
    (_results_with({**_method_row(2.0), "tau": "1.45"}), "'tau' of method 'x' is '1.45', not a number >= 0"),
    (_results_with({**_method_row(2.0), "tau": -5}), "'tau' of method 'x' is -5, not a number >= 0"),
    (_results_with({**_method_row(2.0), "tau": None}), "'tau' of method 'x' is null, not a number >= 0"),
    ({"methods": {}}, "its 'methods' holds no method: nothing to report"),
    ({"methods": [1, 2]}, "its 'methods' is a list, not an object"),
    (_results_with({**_method_row(2.0), "lossless": "yes"}), "'lossless' of method 'x' is 'yes', not true, false or null"),
    (_results_with({k: v for k, v in _method_row(2.0).items() if k != "tau"}), "method 'x' has no 'tau'"),
    (_results_with({**_method_row(2.0), "tokens_per_s": "fast"}),      # absent is fine: a fast replay's
     "'tokens_per_s' of method 'x' is 'fast', not a number >= 0 or null"),
    (_results_with({**_method_row(2.0), "sole_share": {"pld": 0.1, "semantic": "a lot"}}),
     "'sole_share' of method 'x' is an object whose 'semantic' is 'a lot', not an object of numbers"),
    (_results_with({**_method_row(2.0), "per_request": [{"request": "r1", "tokens": 3, "forwards": 0}]}),
     "'forwards' of per_request row 0 of method 'x' is 0, not a count of at least 1"),
    ({"present_2": 0.5, "n_requests": 1, "n_gap": 0, "n_recovered": 0}, "the diagnosis has no 'n_positions'"),
    ({"present_2": "half", "n_requests": 1, "n_positions": 3, "n_gap": 0, "n_recovered": 0},
     "'present_2' of the diagnosis is 'half', not a number or null"),
    ({"present_2": 0.5, "n_requests": 1, "n_positions": 3, "n_gap": 0, "n_recovered": 0, "copy_oracle_tau": 1.5},
     "'copy_oracle_tau' of the diagnosis is 1.5, not an object of numbers (or nulls), or null"),
    ({"present_2": 0.5, "n_requests": 1, "n_positions": 3, "n_gap": 0, "n_recovered": 0,
      "teacher_forced_agreement": "most"},
     "'teacher_forced_agreement' of the diagnosis is 'most', not a number or null"),
    ([1, 2], "no 'methods' object"),
])
def test_report_refuses_wrong_field_types_in_one_line(tmp_path, capsys, doc, message):
    p = tmp_path / "results.json"
    p.write_text(json.dumps(doc, indent=2))
    assert report_main([str(p)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {p}: ") and message in err, err


def test_report_refuses_a_key_given_twice_instead_of_keeping_the_last(tmp_path, capsys):
    """Two taus for one method (a hand-merged results.json): Python's reader would keep the
    second without a word; the report names the key and refuses."""
    row = json.dumps(_method_row(2.0))[1:-1]
    p = tmp_path / "results.json"
    p.write_text('{"methods": {"x": {' + row + ', "tau": 3.0}}, "n_requests": 1}')
    assert report_main([str(p)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the key 'tau' appears twice in one object" in err, err
    p.write_text('{"methods": {"x": {' + row + '}}, "n_requests": 1}')
    assert report_main([str(p)]) == 0


def test_report_reads_a_valid_results_file_and_folder(tmp_path, capsys):
    (tmp_path / "results.json").write_bytes(RESULTS)
    assert report_main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| oilbird | 2.50 |" in out and "oilbird vs goose" in out


def test_bench_refuses_a_bad_data_file_in_one_line_before_the_model(tmp_path, capsys, monkeypatch):
    import oilbird.model
    from oilbird.__main__ import main
    monkeypatch.setattr(oilbird.model, "load_model", lambda *a, **k: pytest.fail("model loaded"))
    for name, (line, reason) in BAD_LINES.items():
        p = _two_lines(tmp_path, "bad.jsonl", line)
        assert main(["bench", "--data", str(p), "--methods", "ar", "--out", str(tmp_path / "run")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{p}:2: " in err and reason in err, (name, err)
    p = _truncated_gz(tmp_path, "cut.jsonl.gz", REQUESTS * 20)
    assert main(["bench", "--data", str(p), "--methods", "ar", "--out", str(tmp_path / "run")]) == 2
    assert "damaged or truncated gzip" in capsys.readouterr().err


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.update(tau=2.5), "unknown request field 'tau'"),
    (lambda d: d.update(meta=[1]), "field 'meta' is [1], not an object"),
    (lambda d: d.pop("output_ids"), "the request has no 'output_ids' field"),
    (lambda d: d.pop("method"), "the request has no 'method' field"),
    (lambda d: d.update(lossless="yes"), "field 'lossless' is \"yes\", not true, false or null"),
])
def test_a_wrong_request_line_names_its_field_in_the_files_words(tmp_path, edit, message):
    """A trace file's request line with a field added, of another type or missing: one line
    naming the field as the file spells it, never a Python constructor's or type's words."""
    from oilbird.trace import TraceError, load_traces, request_to_lines
    lines = [json.loads(x) for x in request_to_lines(all_requests()[0])]
    edit(lines[0])
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(d) for d in lines))
    with pytest.raises(TraceError) as err:
        load_traces(path)
    said = str(err.value)
    assert message in said and f"{path}:1" in said and "__init__" not in said and "<class" not in said, said


def test_a_version_1_trace_converts_when_it_recorded_the_provenance_and_is_refused_when_not(tmp_path):
    """Trace format 2 records the semantic key's outcome on every drafting cycle, each
    neighbour's why_no_node and the stop reason. A format-1 file that recorded the first two
    converts on load (its stop reason unknown); one written before them is refused in one line,
    so no view derives provenance."""
    from oilbird.trace import TRACE_VERSION, TraceError, load_traces, request_to_lines
    assert TRACE_VERSION == 2
    lines = [json.loads(x) for r in all_requests() for x in request_to_lines(r)]
    for d in lines:
        if d["kind"] == "request":
            d["version"] = 1
            d.pop("stop")
        else:
            d.pop("stop")
    path = tmp_path / "v1.jsonl"
    path.write_text("\n".join(json.dumps(d) for d in lines))
    loaded = load_traces(path)
    assert [r.request_id for r in loaded] == [r.request_id for r in all_requests()]
    assert all(r.stop is None for r in loaded) and loaded[0].cycles[1].retrieval == "retrieved"
    older = [dict(d) for d in lines]
    at = next(i for i, d in enumerate(older) if d["kind"] == "cycle" and d["cycle"] == 1)
    older[at]["retrieval"] = None
    path.write_text("\n".join(json.dumps(d) for d in older))
    with pytest.raises(TraceError, match=rf"v1.jsonl:{at + 1}: a trace of format 1 written before"):
        load_traces(path)
    # ... and one whose neighbours have no outcome (the record's default would read "got a node")
    older = [dict(d) for d in lines]
    at = next(i for i, d in enumerate(older) if d["kind"] == "cycle" and d["neighbours"])
    older[at]["neighbours"] = [{k: v for k, v in n.items() if k != "why_no_node"} for n in older[at]["neighbours"]]
    path.write_text("\n".join(json.dumps(d) for d in older))
    with pytest.raises(TraceError, match=rf"v1.jsonl:{at + 1}: a trace of format 1 written before"):
        load_traces(path)


def test_the_report_leaves_out_what_no_method_measured():
    """A fast replay times nothing: no tokens/s, speedup or overhead column of dashes, and its
    check is named for what it checks (the recording followed), not losslessness."""
    row = {"tau": 3.5, "mean_nodes": 11.2, "lossless": True, "per_request": []}
    replayed = markdown_table({"methods": {"goose": row, "oilbird": {**row, "sole_share": {"semantic": 0.05}}},
                               "replay": {"mode": "fast"}})
    header = replayed.splitlines()[0]
    assert header == "| method | tau | semantic sole % | mean nodes | follows recording |"
    assert replayed.splitlines()[2].startswith("| goose | 3.50 | - | 11.2 |")
    timed = markdown_table({"methods": {"goose": {**row, "tokens_per_s": 30.0, "speedup": 2.0}}})
    assert timed.splitlines()[0] == "| method | tau | tokens/s | speedup | mean nodes | lossless |"


def test_an_indented_json_document_given_as_json_lines_is_named_as_such(tmp_path):
    """A results.json given where a trace file (JSON lines) belongs: said as what it is, not as
    JSON that does not parse."""
    p = tmp_path / "results.json"
    p.write_text(json.dumps({"methods": {}}, indent=2))
    with pytest.raises(TraceError, match=r"results.json: one JSON document over several lines .*not JSON lines"):
        load_traces(p)
    broken = tmp_path / "t.jsonl"
    broken.write_text('{"kind": "request"\n')
    with pytest.raises(TraceError, match="t.jsonl:1: not valid JSON"):
        load_traces(broken)
