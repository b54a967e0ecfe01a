"""The notebooks: executed top to bottom, and their widget callbacks called as functions.

* The ``model`` tests run each notebook in a real ``python3`` Jupyter kernel (nbclient) on the
  real default model, with the tagged ``parameters`` cell made as small as it goes (1-2
  requests, 16 new tokens); any cell error fails the test, and no output may load anything
  from a CDN. The kernel needs ``ipykernel`` and its kernelspec: ``pip install ipykernel`` (in
  requirements.txt) installs it; if ``jupyter kernelspec list`` shows no ``python3``, run
  ``python -m ipykernel install --user``.
* The other tests need no model: the stepper's callbacks (they never fire headless), the
  lesson's pickers on hand-built traces, notebook 02 stepping through a hand-built trace file,
  and the committed notebooks' hygiene (no outputs, one ``parameters`` cell, no absolute paths).
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
from pathlib import Path

import pytest

import wb_traces as W
from oilbird.trace import CycleTrace, save_traces
from workbench import lesson as L
from workbench import figures as F
from workbench.widgets import Stepper, StepperError, figures_for

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
ALL = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))

# What a cell output must never hold: a script, stylesheet or module import that loads from the
# network. The plotly.js library embedded once per notebook (workbench.offline) is cut out first:
# its minified body mentions CDN addresses as default *settings* of features these figures never
# use (map tiles and icons), which load nothing here.
REMOTE = re.compile(r"""(<script[^>]*\bsrc\s*=\s*["']?(https?:)?//|<link[^>]*\bhref\s*=\s*["']?(https?:)?//"""
                    r"""|import\s*["'](https?:)?//|require\.config\([^)]*https?://)""", re.I)


# --------------------------------------------------------------------------- helpers

def _nb(name: str):
    import nbformat
    return nbformat.read(NOTEBOOKS / name, as_version=4)


def set_parameters(nb, **values) -> None:
    """Override the ``parameters`` cell: its defaults, then ``values`` (papermill-style)."""
    cells = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(cells) == 1, "exactly one cell must be tagged 'parameters'"
    cells[0].source += "\n# test overrides\n" + "\n".join(f"{k} = {v!r}" for k, v in values.items())


def execute(nb, timeout: int = 600):
    """Run every cell in a fresh python3 kernel, in notebooks/ (as Jupyter would)."""
    from nbclient import NotebookClient
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()
    return nb


def outputs_text(nb) -> str:
    """Every output of every cell (and the widget state) as one string."""
    parts = [json.dumps(c.get("outputs", [])) for c in nb.cells if c.cell_type == "code"]
    parts.append(json.dumps(nb.metadata.get("widgets", {})))
    return "\n".join(parts)


def check_offline(nb) -> None:
    """No output references a CDN (the literal "cdn." included) or loads anything remote."""
    from plotly.offline import get_plotlyjs
    text = outputs_text(nb)
    library = json.dumps(get_plotlyjs())[1:-1]          # as it appears inside the JSON text
    assert text.count(library) <= 1, "plotly.js is embedded more than once"
    text = text.replace(library, "<plotly.js>")
    for m in (REMOTE.search(text), re.search(r"cdn\.", text)):
        assert m is None, f"an output loads from the network: ...{text[max(0, m.start() - 120):m.end() + 80]}..."


def errors(nb) -> list[str]:
    return [o.get("ename", "") + ": " + o.get("evalue", "") for c in nb.cells if c.cell_type == "code"
            for o in c.get("outputs", []) if o.get("output_type") == "error"]


# --------------------------------------------------------------------------- committed notebooks

@pytest.mark.parametrize("name", ALL)
def test_committed_notebook_is_clean(name):
    nb = _nb(name)
    import nbformat
    nbformat.validate(nb)
    raw = json.loads((NOTEBOOKS / name).read_text(encoding="utf-8"))
    assert all("id" in c for c in raw["cells"]), "every cell needs an id (nbformat warns now, will refuse later)"
    assert len({c["id"] for c in raw["cells"]}) == len(raw["cells"])
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code), "commit notebooks without outputs"
    tagged = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1
    src = "\n".join(c.source for c in nb.cells)
    setup = [c.source for c in code if "use_offline_plots()" in c.source]
    assert len(setup) == 1 and "renderers.default" not in "".join(c.source for c in code)
    statements = "\n".join(line.split("#")[0] for c in code for line in c.source.splitlines())
    assert "connected" not in statements, "a plotly renderer that loads from a CDN"
    assert not re.search(r"(/work/|/root/|/home/|/tmp/)", src), "no absolute paths of a machine"
    assert nb.metadata.kernelspec.name == "python3"


def test_notebooks_exist():
    assert ALL == ["01_identifiability_gap.ipynb", "02_step_through_api_bank.ipynb", "03_benchmarks.ipynb"]


def _options(command: str) -> dict[str, str]:
    words = command.split()
    return {w: words[i + 1] for i, w in enumerate(words[:-1]) if w.startswith("--")}


def test_notebook_03_example_commands_describe_the_same_requests():
    """The bench and diagnose commands it suggests must pair up in its copy-oracle table, each
    into its own folder (one run into another's folder is refused, or with --force replaces it)."""
    text = "\n".join(c.source for c in _nb("03_benchmarks.ipynb").cells if c.cell_type == "markdown")
    bench, diag = (_options(line) for line in text.splitlines()
                   if line.startswith(("python -m oilbird bench", "python -m oilbird diagnose")))
    for opt in ("--data", "--skip", "--limit", "--max-new-tokens"):
        assert bench.get(opt) == diag.get(opt), opt
    assert bench["--out"] != diag["--out"]


def test_notebook_02_says_what_cycle_0_and_the_gap_labels_are():
    text = " ".join(" ".join(c.source.split()) for c in _nb("02_step_through_api_bank.ipynb").cells
                    if c.cell_type == "markdown")
    assert "Cycle 0 is the prefill" in text and "The stepper opens where the app opens" in text
    assert "opens on cycle 1" not in text          # it jumps to the clearest gap moment (cell 6)
    assert "run `01_identifiability_gap.ipynb` first" in text and "tau (tokens committed per verify forward)" in text
    assert "labels describe the output, not the method" in text


# --------------------------------------------------------------------------- the stepper, as functions

@pytest.fixture
def stepper():
    return Stepper(W.all_requests())


def test_stepper_opens_on_first_tree(stepper):
    assert (stepper.request, stepper.method, stepper.cycle) == ("r1", "oilbird", 1)
    assert stepper.request_ids == ["r1", "r2"] and stepper.methods == ["oilbird", "goose"]


def test_show_returns_the_shared_figures(stepper):
    figs = stepper.show("r1", "oilbird", 1)
    assert list(figs) == ["tree", "neighbours", "gap"]
    assert figs["tree"].layout.title.text.startswith("r1 · oilbird · cycle 1")
    assert figs["neighbours"].data[0].type == "table"
    assert {t.meta for t in figs["gap"].data} >= {"lexical_hit", "gap_recovered"}
    assert (stepper.request, stepper.method, stepper.cycle) == ("r1", "oilbird", 1)


@pytest.mark.parametrize("args, message", [
    (("nope", "oilbird", 0), "unknown request 'nope'; choose from r1, r2"),
    (("r2", "goose", 0), "no trace of request 'r2' with method 'goose'; it has oilbird"),
    (("r1", "goose", 9), "cycle 9 is outside 0..4"),
    (("r1", "goose", -1), "cycle -1 is outside"),
])
def test_show_rejects_unknown_selection_and_keeps_state(stepper, args, message):
    with pytest.raises(StepperError, match=re.escape(message)):
        stepper.show(*args)
    assert (stepper.request, stepper.method, stepper.cycle) == ("r1", "oilbird", 1)


def test_step_clamps_and_select_keeps_method(stepper):
    stepper.step(+1)
    assert stepper.cycle == 2
    stepper.step(+5)
    assert stepper.cycle == 2                    # r1/oilbird has cycles 0..2
    stepper.step(-9)
    assert stepper.cycle == 0
    stepper.select("r1", "goose")
    assert (stepper.method, stepper.cycle) == ("goose", 1)
    stepper.select("r2")                         # r2 has no goose trace: its first method
    assert (stepper.request, stepper.method, stepper.cycle) == ("r2", "oilbird", 0)
    assert "r2 · oilbird · cycle 0 / 0" in stepper.describe()


def test_switching_method_keeps_the_token_in_view(stepper):
    """The stepper's method menu, as the app's: the other method's cycle that commits the token
    this cycle commits first (a class compares the two trees there), not its first cycle."""
    stepper.show("r1", "oilbird", 2)
    at = stepper.trace("r1", "oilbird").cycles[2].generated_before
    stepper.switch("goose")
    want = F.token_cycles(stepper.trace("r1", "goose"))[at]
    assert (stepper.method, stepper.cycle) == ("goose", want) and want != F.first_cycle(stepper.trace("r1", "goose"))
    with pytest.raises(StepperError, match="no trace of request 'r2' with method 'goose'"):
        stepper.select("r2")
        stepper.switch("goose")
    assert (stepper.request, stepper.method) == ("r2", "oilbird")


def test_figures_for_rejects_unknown_view():
    with pytest.raises(StepperError, match="unknown view"):
        figures_for(W.request_oilbird(), 1, views=("tree", "pixels"))
    assert list(figures_for(W.request_oilbird(), 1, views=("text", "metrics"))) == ["text", "metrics"]


def test_slider_and_play_stop_at_the_last_real_cycle(stepper):
    """A prefill-only request has cycle 0 alone: the controls must not offer a cycle 1."""
    with contextlib.redirect_stdout(io.StringIO()):
        single = Stepper([W.request_other()])
        single.widget()
        w = single._w
        assert w["cycle"].max == w["play"].max == 0 and w["cycle"].disabled and w["play"].disabled
        single.step(+1)
        assert single.cycle == 0 and single.last_error is None
        stepper.widget()
        stepper.select("r2")                         # from a request with cycles 0..2 to r2
        w = stepper._w
        assert w["cycle"].max == w["play"].max == 0 and w["cycle"].value == 0
        stepper.select("r1")
        assert w["cycle"].max == 2 and not w["cycle"].disabled and w["cycle"].value == 1


def test_a_trace_without_cycles_draws_messages_in_the_stepper():
    """As workbench.figures.cycle_figures does: messages, not an error."""
    from workbench import figures as F
    r = W.request_oilbird(gap_labels=["absent", "lexical_hit", "gap_recovered", "gap_missed", "absent"])
    r.cycles = []
    figs = figures_for(r, 0)
    assert list(figs) == ["tree", "neighbours", "gap"]
    assert F.NO_CYCLES in figs["tree"].layout.annotations[0].text
    assert F.NO_CYCLES in figs["neighbours"].layout.annotations[0].text
    assert list(figures_for(r, 0, views=("text", "metrics"))) == ["text", "metrics"]
    with pytest.raises(StepperError, match=r"cycle 1 is outside 0\.\.0"):
        figures_for(r, 1)
    st = Stepper([r])
    assert st.cycle == 0 and F.NO_CYCLES in st.describe()
    st.step(+1)
    with contextlib.redirect_stdout(io.StringIO()):
        st.widget()
    assert st.last_error is None and st._w["cycle"].max == 0 and st._w["out"].outputs


def test_empty_stepper_is_an_error():
    with pytest.raises(StepperError, match="no traces"):
        Stepper([])


def test_widget_callbacks_drive_the_selection(stepper):
    """The callbacks, called as the front end would; errors land in the Output, not the log."""
    import ipywidgets as widgets
    with contextlib.redirect_stdout(io.StringIO()):   # display() prints figure reprs headless
        box = stepper.widget()
        w = stepper._w
        assert isinstance(box, widgets.VBox) and isinstance(w["out"], widgets.Output)
        assert isinstance(w["play"], widgets.Play) and w["cycle"].max == 2
        w["next"].click()
        assert stepper.cycle == 2 and w["cycle"].value == 2 and w["play"].value == 2
        w["prev"].click()
        assert stepper.cycle == 1
        w["cycle"].value = 0                         # what the slider (or Play, via jslink) does
        assert stepper.cycle == 0
        w["method"].value = "goose"
        assert (stepper.method, stepper.cycle, w["cycle"].max) == ("goose", 1, 4)
        w["request"].value = "r2"
        assert (stepper.request, stepper.method) == ("r2", "oilbird")
        assert w["method"].options == ("oilbird",) and stepper.last_error is None
        stepper._on_request({"new": "missing"})      # a bad value: shown, state kept
    assert stepper.last_error == "StepperError: unknown request 'missing'; choose from r1, r2"
    assert stepper.request == "r2"
    assert w["link"].source == (w["play"], "value") and w["link"].target == (w["cycle"], "value")


# --------------------------------------------------------------------------- the lesson's pickers

def test_exact_match_cycle_copies_the_old_value():
    """Frame [5, 6, 7], old value 20, closing [9, 9]; the answer has the new value 30."""
    prompt = [1, 5, 6, 7, 20, 9, 9, 4]
    answer = [5, 6, 7, 30, 9, 9]
    c = L.exact_match_cycle(prompt, answer, 3, decode=str, request_id="r")
    assert c.tokens[:4] == [7, 20, 9, 9] and c.sources[1] == ["pld"]
    assert c.accepted == [0] and c.bonus == 30 and c.committed == [30]
    assert L.discarded_behind(c, answer) == [2, 3]          # the [9, 9] frame, thrown away
    c.sources[1].append("semantic")                         # each node's provenance its own
    assert c.sources[2] == ["pld"] and c.scores[1] is not c.scores[2]
    with pytest.raises(ValueError, match="proposes nothing"):
        L.exact_match_cycle([1, 2, 3], [4, 5], 1, decode=str)
    # the chain runs to the answer's end: the drafts are committed, no bonus past the end
    end = L.exact_match_cycle([1, 2, 3, 1, 2], [3], 0, decode=str)
    assert end.tokens[:2] == [2, 3] and end.committed == [3] and end.committed_sources == [["pld"]]
    with pytest.raises(ValueError, match="outside the answer"):
        L.exact_match_cycle(prompt, answer, len(answer), decode=str)


def test_backoff_keys_find_the_new_value_nowhere_after_its_frame():
    """Frame [5, 6, 7] with the old value 20 before; the user listed 30 followed by 8 (the list
    goes on). After the verifier commits 30, keys ending in 30: only the one-token key occurs,
    followed by the list's 8, not the frame's 9."""
    prompt = [1, 30, 8, 5, 6, 7, 20, 9, 9, 4]
    answer = [5, 6, 7, 30, 9, 9]
    rows = L.backoff_keys(prompt, answer, 3, decode=lambda t: f"<{t}>", longest=3, shown=2)
    assert [(r.length, r.key, r.occurrences) for r in rows] == [(1, "<30>", 1), (2, "<7><30>", 0),
                                                                 (3, "<6><7><30>", 0)]
    assert rows[0].follows == "<8><5>" and rows[0].right == 0 and rows[1].follows == "" and rows[1].right == 0
    # where the frame did stand before the value, the long key copies the frame's rest
    again = L.backoff_keys(prompt + [5, 6, 7, 30, 9, 9, 1], answer, 3, decode=str, longest=4)
    assert again[-1].occurrences == 1 and again[-1].right == 2 and again[0].right == 2   # the latest 30 is the frame's
    # a short key in the user's list: the value's own rest is right, then the list goes on
    listed = L.backoff_keys([1, 30, 9, 8, 5, 6, 7, 20, 9, 9], answer, 3, decode=str, longest=2)
    assert (listed[0].occurrences, listed[0].right, listed[1].occurrences) == (1, 1, 0)
    with pytest.raises(ValueError, match="no next answer token"):
        L.backoff_keys(prompt, answer, 5, decode=str)


def _goose_with_discard():
    """Output [7, 30, 9, 9, 2]; cycle 1 drafts 20, 9, 9 below the root 7: rejected at 20."""
    tr = W.request_goose()
    tr.request_id, tr.output_ids = "r1", [7, 30, 9, 9, 2]
    c = CycleTrace(request_id="r1", method="goose", cycle=1, prefix_len=3, generated_before=1,
                   tokens=[7, 20, 9, 9], token_text=["7", "20", "9", "9"], parents=[-1, 0, 1, 2],
                   depths=[0, 1, 2, 3], sources=[[], ["suffix"], ["suffix"], ["suffix"]],
                   scores=[{}] * 4, argmax=[30, 1, 1, 1], argmax_text=["30", "1", "1", "1"],
                   accepted=[0], bonus=30, committed=[30], committed_text=["30"],
                   committed_sources=[["bonus"]])
    tr.cycles = [tr.cycles[0], c]
    return tr


def test_discarded_frames_and_story():
    frames = L.discarded_frames(_goose_with_discard())
    assert len(frames) == 1
    d = frames[0]
    assert (d.cycle, d.position, d.node, d.drafted, d.wanted, d.behind) == (1, 1, 1, "20", "30", [2, 3])
    assert L.discarded_frames(W.request_goose()) == []
    finds = L.semantic_finds(W.request_key_find())
    assert [(f.cycle, f.neighbour, f.item.request_id) for f in finds] == [(1, 0, "r0")]
    assert L.semantic_finds(W.request_oilbird()) == []         # prompt lookup proposed it too: no find of the key's own
    assert len(L.semantic_finds(W.request_oilbird(), only_unreachable=False)) == 1
    story = L.pick_story([_goose_with_discard(), W.request_key_find()])
    assert story.same_place and story.discarded.position == 1 and story.find.cycle == 1
    story = L.pick_story([W.request_goose()])
    assert story.discarded is None and story.find is None and "no rejected" in story.note


def test_best_find_is_the_neighbour_with_the_most_accepted_nodes_over_all_requests():
    from dataclasses import replace
    a = W.request_key_find()
    b = replace(a, request_id="b", cycles=[replace(c, neighbours=[replace(n, accepted=n.accepted + 2)
                                                                  for n in c.neighbours]) for c in a.cycles])
    best = L.best_find([a, b, W.request_goose()], "oilbird")
    assert best.request_id == "b" and best.item.accepted == max(f.item.accepted for f in L.semantic_finds(b))
    assert L.best_find([W.request_goose()], "oilbird") is None


def test_greedy_outputs_settle_only_what_they_can():
    a, b, c = W.request_oilbird(), W.request_goose(), W.request_other()    # outputs end in EOS (2)
    assert L.greedy_outputs([a, c], 3, eos_ids=[2]) == {"r1": [10, 11, 12], "r2": [2]}   # cut to 3
    assert L.greedy_outputs([a], 9, eos_ids=[2]) == {"r1": [10, 11, 12, 99, 2]}         # ended early
    assert L.greedy_outputs([a], 9, eos_ids=[7]) == {}       # too short and no EOS: unknown
    b.lossless = False
    assert L.greedy_outputs([b], 2, eos_ids=[2]) == {}


def test_resolve_data(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    root.mkdir()
    monkeypatch.delenv("OILBIRD_DATA", raising=False)
    data, what = L.resolve_data(None, root)
    assert data == "builtin" and "falling back to the built-in" in what and "../shared/data/api-bank" in what
    bank = tmp_path / "shared" / "data" / "api-bank" / "test-data"
    bank.mkdir(parents=True)
    (bank / "level-1-api.json").write_text("[]")
    data, what = L.resolve_data(None, root)
    assert data == bank.parent and what.startswith("API-Bank") and "falling back" not in what
    assert L.resolve_data("builtin", root)[0] == "builtin"
    with pytest.raises(FileNotFoundError, match="not found"):
        L.resolve_data("no/such/folder", root)


def test_lesson_figures():
    fig = L.label_counts_figure({"a": ["absent", "lexical_hit", "lexical_hit"], "b": []})
    assert [t.meta for t in fig.data] == ["lexical_hit", "gap_recovered", "gap_missed", "absent"]
    assert list(fig.data[0].y) == [2, 0]
    res = {"methods": {"ar": {"tau": 1.0, "tokens": 4},
                       "oilbird": {"tokens": 4, "accepted_by_source": {"semantic": 1.0, "bonus": 3.0}}}}
    fig = L.source_share_figure(res)
    sem = next(t for t in fig.data if t.meta == "semantic")
    assert list(sem.x) == ["oilbird"] and sem.y[0] == 0.25
    rows = L.diagnosis_rows({"gap": 0.05, "run_behind": 3.0}, full={})
    assert rows[3] == {"measure": "gap", "ours": "5.0%", "full pool": "-", "paper (API-Bank)": "6.8%"}
    diag = {"copy_oracle_tau": {"12": 4.48, "64": 4.97}, "n_requests": 2, "max_new_tokens": 8}
    res = {"n_requests": 2, "max_new_tokens": 8, "tree": {"budget": 12},
           "methods": {"ar": {"tau": 1.0}, "oilbird": {"tau": 2.69}}}
    rows = L.oracle_rows(diag, res)
    assert [(r["what"], r["tau"], r["note"] == "") for r in rows] == [
        ("perfect verbatim-copy drafter, 12 nodes", "4.48", False),
        ("perfect verbatim-copy drafter, 64 nodes", "4.97", False),
        ("oilbird (budget 12)", "2.69", True)]
    assert L.oracle_rows(diag, {**res, "max_new_tokens": 16})[-1]["note"]   # different runs: said
    assert L.oracle_rows({"n_requests": 2}, res) == []                      # an older diagnosis.json


def test_oracle_rows_compare_which_requests_not_only_how_many():
    """runs/api40-79 (requests 40-79) beside runs/diag-api40 (requests 0-39): 40 requests each."""
    diag = {"data": "api-bank", "limit": 40, "n_requests": 40, "max_new_tokens": 64,   # no skip: 0
            "copy_oracle_tau": {"12": 4.48}}
    res = {"data": "api-bank", "skip": 40, "n_requests": 40, "max_new_tokens": 64, "tree": {"budget": 12},
           "methods": {"goose": {"tau": 2.1}, "oilbird": {"tau": 2.7}}}
    rows = L.oracle_rows(diag, res)
    assert [r["what"] for r in rows[1:]] == ["goose (budget 12)", "oilbird (budget 12)"]
    assert all("skip 40 vs 0" in r["note"] for r in rows[1:])
    assert all(r["note"] == "" for r in L.oracle_rows(diag, {**res, "skip": 0})[1:])
    assert "data builtin vs api-bank" in L.oracle_rows(diag, {**res, "skip": None, "data": "builtin"})[1]["note"]
    assert L.run_differences({"n_requests": 1}, {"n_requests": 1, "skip": 0}) == []   # files before --skip


def test_oracle_rows_label_hf_pld_by_its_chain_not_a_tree_budget():
    from oilbird.evaluation.peers import HF_PLD_NUM_TOKENS
    diag = {"n_requests": 2, "max_new_tokens": 8, "copy_oracle_tau": {"12": 4.48}}
    res = {"n_requests": 2, "max_new_tokens": 8, "tree": {"budget": 12},
           "methods": {"hf-greedy": {"tau": 1.0}, "hf-pld": {"tau": 1.9}, "suffix-arctic": {"tau": 2.2}}}
    assert [r["what"] for r in L.oracle_rows(diag, res)[1:]] == [
        f"hf-pld (one chain of {HF_PLD_NUM_TOKENS} tokens, no tree)", "suffix-arctic (budget 12)"]


# --------------------------------------------------------------------------- executed notebooks

def test_notebook_02_steps_through_a_trace_file(tmp_path):
    """The precomputed-trace path: no model, so it runs without the model marker."""
    path = save_traces(W.all_requests(), tmp_path / "traces.jsonl")
    nb = _nb("02_step_through_api_bank.ipynb")
    set_parameters(nb, N_REQUESTS=1, TRACES=str(path))                   # DATA: the default (API-Bank)
    execute(nb, timeout=180)
    assert not errors(nb)
    check_offline(nb)
    text = outputs_text(nb)
    assert "Data</b>: the precomputed traces in" in text and "3 traces of 2 requests" in text
    assert "DATA, N_REQUESTS, METHODS and MAX_NEW_TOKENS are not used" in text
    assert "API-Bank" not in text and "serving the first" not in text       # the data note says what is shown
    assert "accepted_share" in text and "pld+semantic" in text          # the tables: the judged nodes by proposers
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    shown = [o for m in state.values() if m["model_name"] == "OutputModel" for o in m["state"]["outputs"]]
    assert sum("application/vnd.plotly.v1+json" in o["data"] for o in shown) == 3   # tree, neighbours, gap


def test_notebook_02_on_traces_without_cycles(tmp_path):
    """Requests that stopped at their prefill: every cell runs and says there is nothing to step."""
    from dataclasses import replace
    bare = replace(W.request_other("bare"), cycles=[], output_ids=[], output_text=[])
    nb = _nb("02_step_through_api_bank.ipynb")
    set_parameters(nb, N_REQUESTS=1, TRACES=str(save_traces([bare], tmp_path / "bare.jsonl")))
    execute(nb, timeout=180)
    assert not errors(nb)
    assert "these traces hold no cycle" in outputs_text(nb) and "no drafted node in these traces" in outputs_text(nb)


SMALL = {
    "01_identifiability_gap.ipynb": dict(SITUATION="builtin/00-1", TRACES=None, N_REQUESTS=2,
                                         MAX_NEW_TOKENS=16, DIAGNOSIS=None, N_DIAGNOSE=2,
                                         RECORDED_LIMIT=1, RECORDED_DIAGNOSIS=None),
    "02_step_through_api_bank.ipynb": dict(N_REQUESTS=1, MAX_NEW_TOKENS=16, TRACES=None),
    "03_benchmarks.ipynb": dict(RESULTS=None, DIAGNOSIS=None, DATA="builtin", N_REQUESTS=2, MAX_NEW_TOKENS=16),
}


@pytest.mark.model
@pytest.mark.parametrize("name", ALL)
def test_notebook_runs_on_the_real_model(name, monkeypatch):
    # One torch thread per kernel unless told otherwise: on a small shared CI machine two
    # threads per process oversubscribe the cores, and a forward then runs 3-6x slower.
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))
    nb = _nb(name)
    set_parameters(nb, **SMALL[name])
    execute(nb)
    assert not errors(nb)
    check_offline(nb)
    text = outputs_text(nb)
    assert "application/vnd.plotly.v1+json" in text      # the figures were drawn
    if name.startswith("01"):                              # a find shown: the traces' own or the shipped replay's
        assert "no lexical source proposed its first token" in text
    if name.startswith("02"):
        assert "API-Bank" in text                          # found, or said that it fell back
    if name.startswith("03"):
        assert "perfect verbatim-copy drafter" in text     # the copy-oracle table beside the tau


def _notebook_03_on(folder, results: dict, diag: dict):
    """Notebook 03 run on a bench folder holding this results.json and a diagnose folder holding
    this diagnosis.json, as the commands it suggests write them; no cell fails."""
    (folder / "bench").mkdir()
    (folder / "diag").mkdir()
    (folder / "bench" / "results.json").write_text(json.dumps(results))
    (folder / "diag" / "diagnosis.json").write_text(json.dumps(diag))
    nb = _nb("03_benchmarks.ipynb")
    set_parameters(nb, RESULTS=str(folder / "bench"), DIAGNOSIS=str(folder / "diag"))
    execute(nb, timeout=180)
    assert not errors(nb)
    return nb


def test_notebook_03_reads_saved_results(tmp_path):
    """The saved-results path: results.json and diagnosis.json from the command line's format."""
    results = {"model": "m", "data": "builtin", "n_requests": 1, "max_new_tokens": 8, "methods": {
        "ar": {"tau": 1.0, "tokens_per_s": 10.0, "speedup": 1.0, "decode_speedup": 1.0, "lossless": True,
               "n_requests": 1, "tokens": 8},
        "oilbird": {"tau": 2.0, "tokens_per_s": 15.0, "speedup": 1.5, "decode_speedup": 1.6, "lossless": True,
                    "n_requests": 1, "tokens": 8, "overhead_share": 0.1,
                    "accepted_by_source": {"semantic": 2.0, "suffix": 2.0, "bonus": 4.0}}}}
    diag = {"n_requests": 1, "n_positions": 3, "n_gap": 1, "n_recovered": 1, "gap": 1 / 3,
            "labels": {"r": ["absent", "gap_recovered", "lexical_hit"]}}
    nb = _notebook_03_on(tmp_path, results, diag)
    check_offline(nb)
    text = outputs_text(nb)
    assert "saved results.json" in text and "saved diagnosis.json" in text and "33.3%" in text and "oilbird" in text


def test_notebook_03_without_ar_and_with_an_older_diagnosis(tmp_path):
    """A run without ar has no speedup to chart; a diagnosis.json from before copy_oracle_tau
    says so instead of dropping the table silently."""
    results = {"model": "m", "data": "api-bank", "skip": 40, "n_requests": 1, "max_new_tokens": 8, "methods": {
        "goose": {"tau": 1.5, "tokens_per_s": 12.0, "lossless": True, "n_requests": 1, "tokens": 8,
                  "accepted_by_source": {"suffix": 2.0, "bonus": 6.0}},
        "oilbird": {"tau": 2.0, "tokens_per_s": 15.0, "lossless": True, "n_requests": 1, "tokens": 8,
                    "accepted_by_source": {"semantic": 2.0, "suffix": 2.0, "bonus": 4.0}}}}
    diag = {"data": "api-bank", "n_requests": 1, "max_new_tokens": 8, "n_positions": 3, "n_gap": 1,
            "n_recovered": 1, "gap": 1 / 3, "labels": {"r": ["absent", "gap_recovered", "lexical_hit"]}}
    text = outputs_text(_notebook_03_on(tmp_path, results, diag))
    assert "no ar in this run: no speedup chart" in text and "speedup vs ar" not in text
    assert "tau (tokens per target forward)" in text                 # the tau chart is still drawn
    assert "predates copy_oracle_tau" in text and "python -m oilbird diagnose" in text


def test_the_notebooks_show_data_paths_without_climbing_out_of_the_checkout(tmp_path, monkeypatch):
    """A data folder named by $OILBIRD_DATA was printed relative to the checkout
    ("../../../elsewhere/data/..."); it is said under $OILBIRD_DATA, and the default one beside the
    checkout as ../shared/..."""
    from workbench.lesson import _shown
    root = tmp_path / "checkout"
    data = tmp_path / "far" / "away" / "data"
    monkeypatch.setenv("OILBIRD_DATA", str(data))
    assert _shown(data / "api-bank" / "x.json", root) == "$OILBIRD_DATA/api-bank/x.json"
    assert _shown(root / "assets" / "t.jsonl", root) == "assets/t.jsonl"
    monkeypatch.delenv("OILBIRD_DATA")
    assert _shown(tmp_path / "shared" / "data", root) == "../shared/data"


def test_the_readmes_figures_snippet_runs_from_any_folder(tmp_path, monkeypatch):
    """The README's "for notebooks too" code, run from another working folder (a notebook's is
    notebooks/): it found the shipped traces by a path relative to the checkout, and picked a
    request whose key had an empty store. Without Chromium, all but its PNG export."""
    import shutil
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    code = text.split("for notebooks too:\n\n```python\n", 1)[1].split("```", 1)[0]
    png = shutil.which("chromium") is not None
    if not png:
        code = "\n".join(line for line in code.splitlines() if not line.startswith("export_figures("))
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)          # noqa: S102 - the README's own code
    req = scope["req"]
    assert any(c.neighbours for c in req.cycles[:4]) and req.cycles[3].neighbours
    assert list(scope["figs"]) == ["tree", "text", "neighbours", "gap", "metrics"]
    if png:
        pngs = sorted(p.name for p in (tmp_path / "slides").glob("*.png"))
        assert pngs == [f"00-3-cycle3-{k}.png" for k in ("gap", "metrics", "neighbours", "text", "tree")]


def test_a_view_opens_on_a_method_with_the_key_when_oilbird_is_not_there():
    """Notebook 02 with METHODS="goose,oilbird:reserved,recycling+sem" opened on goose and said
    no token was the key's alone: a view prefers "oilbird", then a method with the hidden-state
    key, then the first."""
    from workbench.session import opening, preferred_method
    assert preferred_method(["goose", "oilbird:reserved", "recycling+sem"]) == "oilbird:reserved"
    assert preferred_method(["goose", "recycling+sem", "oilbird"]) == "oilbird"
    assert preferred_method(["goose", "pld"]) == "goose" and preferred_method(["mine", "goose"]) == "mine"
    from dataclasses import replace
    traces = [replace(t, method="goose" if t.method == "goose" else "recycling+sem") for t in W.all_requests()]
    assert opening(traces).method == "recycling+sem"
    assert Stepper(traces).method == "recycling+sem"                    # a bare stepper opens the same way
