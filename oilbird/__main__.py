"""Command line: ``python -m oilbird {bench,trace,decode,diagnose,replay,serve-bench,serve,report} ...``.

    python -m oilbird decode "List three colours."                 # one prompt, oilbird vs greedy
    python -m oilbird bench --data builtin --methods ar,hf-greedy,goose,oilbird --limit 8
    python -m oilbird trace --data builtin --methods goose,oilbird --out runs/builtin.jsonl
    python -m oilbird diagnose --data builtin --out runs/diag
    python -m oilbird replay --data my-logs.jsonl --methods goose,oilbird     # recorded agent traffic (docs/replay.md)
    python -m oilbird serve-bench --data builtin --limit 16 --out runs/serve   # inside vLLM (docs/serving.md)
    python -m oilbird serve --port 8000                                        # vLLM's OpenAI server, Oilbird drafting
    python -m oilbird report runs/diag/diagnosis.json                          # a saved run's tables again

Every subcommand works offline on a built-in workload (``--data builtin``; ``replay``'s is
``--data agent-builtin``, recorded turns the project writes itself; ``serve`` and ``serve-bench`` need the vLLM
environment, docs/serving.md); ``--data api-bank`` reads ``../shared/data/api-bank`` (or
``$OILBIRD_DATA/api-bank``), ``--data PATH`` a folder or a JSONL file.
"""
from __future__ import annotations

import argparse
import sys
import time

from .errors import InputError, run_cli
from .model import ModelError
from .evaluation.runs import Run, RunStopped
from .cli_options import (at_least, common_options, data_arg, force_option, fresh_out, model_options, non_negative,
                          out_path)
from .serving.cli import add_serving_commands, serve, serve_bench
from .serving.serve_bench import ServeBenchError
from .data.template_form import FORMS


def _paired(res: dict) -> None:
    """The run's comparisons that docs/results.md reports, where both methods ran: the pooled tau
    ratio with its bootstrap interval, and request by request (``report`` prints the same)."""
    from .evaluation.report import paired_table
    table = paired_table(res)
    if table:
        print(table)


def _tree_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--budget", type=at_least(1), default=None,
                   help="tree nodes per cycle, root included (default 12)")
    p.add_argument("--semantic-budget", type=at_least(0), default=None,
                   help="nodes reserved for semantic chains, below --budget (default 2), under the reserved "
                        "fill only (NAME:reserved, pld+sem, recycling+sem): the Oilbird presets' expected fill "
                        "reserves nothing")


def _sampling_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--temperature", default="0",
                   help="sampling temperature; 0 (the default) is greedy decoding, audited token for token")
    p.add_argument("--top-p", default="1", help="nucleus sampling: keep the smallest set of tokens holding this "
                                                 "much probability, in (0, 1] (with --temperature > 0)")
    p.add_argument("--seed", default="0", help="the sampling seed, a whole number: the same seed reproduces "
                                                "the same outputs (with --temperature > 0)")


def _sampling(args):
    """The run's :class:`~oilbird.sampling.SamplingParams`, or None for greedy; bad values are
    a :class:`~oilbird.sampling.SamplingError` (one line, exit 2) before any model loads."""
    from .sampling import SamplingError, SamplingParams, parse_seed
    values = []
    for flag, text in (("--temperature", args.temperature), ("--top-p", args.top_p)):
        try:
            values.append(float(text))
        except ValueError:
            raise SamplingError(f"{flag} must be a number, not {text!r}") from None
    params = SamplingParams(values[0], values[1], parse_seed(args.seed))
    if params.greedy and (params.top_p != 1 or params.seed != 0):
        print("note: --top-p and --seed apply only with --temperature > 0: this run decodes greedily", file=sys.stderr)
    return None if params.greedy else params


def _tree(args, methods):
    """The run's base tree; a ``--semantic-budget`` that no method's tree reserves (only the
    reserved fill with a chain source does) is said in one line, not silently ignored."""
    from .methods import TreeConfig
    tree = TreeConfig.sized(args.budget, args.semantic_budget)
    if args.budget is not None and not any(m.drafts_tree for m in methods):
        print(f"note: --budget changes none of these methods ({', '.join(m.name for m in methods)} draft no tree)",
              file=sys.stderr)
    if args.semantic_budget is not None and not any(
            m.kind == "tree" and m.tree(tree).fill == "reserved" and m.tree(tree).semantic_budget > 0
            for m in methods):
        print("note: --semantic-budget changes none of these methods: it reserves nodes only under the reserved "
              "fill (NAME:reserved, pld+sem, recycling+sem); the Oilbird presets' expected fill reserves nothing",
              file=sys.stderr)
    return tree


def _decode(args) -> int:
    from .audit import audit, explain
    from .methods import parse_method
    from .model import load_model
    from .presets import make_decoder
    from .data.requests import NOT_TEXT, PromptError, Request, encode
    from .jsonio import not_text
    from .verifier import Verifier
    method = parse_method(args.method)                   # checked before the model loads
    if method.kind != "tree":
        raise ValueError(f"'{args.method}' is not a preset; decode takes one of the presets "
                         f"(oilbird, goose, pld, ...), optionally with a fill, e.g. oilbird:reserved")
    if not args.prompt.strip():
        raise PromptError("the prompt is empty: give some text to answer.")
    if not_text(args.prompt):
        raise PromptError(NOT_TEXT)
    sampling = _sampling(args)
    lm = load_model(args.model, state_layer=args.state_layer)
    req = Request("prompt", [{"role": "user", "content": args.prompt}])
    ids = encode(lm.tokenizer, req)
    if sampling is not None:
        return _decode_sampled(args, method, lm, ids, sampling)
    dec = make_decoder(method, Verifier(lm))
    tr = dec.run("prompt", ids, args.max_new_tokens)
    print(lm.tokenizer.decode(tr.output_ids))
    res = explain(lm, ids, audit(lm, ids, tr.output_ids, args.max_new_tokens))
    print(f"\n[{args.method}] {len(tr.output_ids)} tokens in {tr.forwards} forwards "
          f"(tau {tr.tau:.2f}); {res.message()}", file=sys.stderr)
    return 0 if res.lossless else 1


def _decode_sampled(args, method, lm, ids, sampling) -> int:
    """decode with --temperature > 0, audited as the sampled bench audits: the output must equal
    plain sampling of the same prompt with the same seed, token for token, and be valid."""
    from .audit import compare, explain
    from .presets import make_decoder
    from .sampled import Sampled, check_sampled_output, sampled_autoregressive
    from .verifier import Verifier
    v = Verifier(lm)
    tr = make_decoder(method, v).run("prompt", ids, args.max_new_tokens, judge=Sampled(sampling, "prompt"))
    print(lm.tokenizer.decode(tr.output_ids))
    invalid = check_sampled_output(tr.output_ids, int(lm.model.config.vocab_size), lm.eos_token_ids,
                                   args.max_new_tokens)
    res = explain(lm, ids, compare(sampled_autoregressive(v, ids, args.max_new_tokens, sampling, "prompt").output_ids,
                                   tr.output_ids), sampling, "prompt")
    print(f"\n[{args.method}] sampled ({sampling.describe()}): {len(tr.output_ids)} tokens in {tr.forwards} "
          f"forwards (tau {tr.tau:.2f}); {res.message('plain sampling with the same seed')}; "
          f"{'every token valid' if invalid is None else 'INVALID: ' + invalid}", file=sys.stderr)
    return 0 if res.lossless and invalid is None else 1


def _bench(args) -> int:
    from .evaluation.bench import run_bench
    from .methods import parse_methods
    from .model import load_model
    from .evaluation.report import write_report
    from .data.requests import load_requests
    from .evaluation.results import format_table
    from .verifier import Verifier
    methods = parse_methods(args.methods)
    tree = _tree(args, methods)
    sampling = _sampling(args)
    if sampling is not None:
        from .evaluation.sampled_bench import check_sampled_methods
        check_sampled_methods(methods)
    run = Run(args.out or fresh_out("bench", args.data), args.force,
              ("results.json", "traces.jsonl") if args.traces else ("results.json",))
    run.check()
    requests = load_requests(args.data, limit=args.limit, skip=args.skip)
    lm = load_model(args.model, state_layer=args.state_layer)
    store_kwargs = {"state_dtype": args.state_dtype, "index_type": args.store_index}
    if args.store_capacity:
        store_kwargs["max_records"] = args.store_capacity
    meta = {"data": str(args.data), "skip": args.skip}

    def save(res: dict, complete: bool = False) -> None:
        run.save_results("results.json", {**res, **meta}, res["n_requests"], res["n_requests_planned"], complete)

    with run.recording(len(requests)):
        res = run_bench(requests, methods, Verifier(lm), args.max_new_tokens, tree=tree,
                        store_kwargs=store_kwargs, checkpoint=save, sampling=sampling,
                        trace_sink=(lambda t: run.append_traces(t, "traces.jsonl")) if args.traces else None)
        save(res, complete=True)
    print(format_table(res))
    _paired(res)
    print(f"wrote {run.path('results.json')}")
    if args.traces:
        print(f"wrote {run.path('traces.jsonl')}")
    try:
        for p in write_report(res, run.out):
            print(f"wrote {p}")
    except BrokenPipeError:
        raise
    except OSError as exc:
        print(f"cannot write the CSV and figures ({exc.strerror or exc}); {run.path('results.json')} is "
              f"complete: python -m oilbird report {run.out} reads it", file=sys.stderr)
        return 1
    return 0 if all(_passed(r) for r in res["methods"].values()) else 1


def _passed(r: dict) -> bool:
    """A method's check passed: lossless (and, sampled, valid tokens); a sampled run of a version
    before the sampled audit (lossless null): seed-reproducible with valid tokens."""
    if r.get("lossless") is None:
        return bool(r.get("reproducible")) and bool(r.get("valid"))
    return bool(r["lossless"]) and r.get("valid") is not False


def _trace(args) -> int:
    from .evaluation.bench import run_bench
    from .methods import parse_methods
    from .model import load_model
    from .data.requests import load_requests
    from .verifier import Verifier
    methods = parse_methods(args.methods, traced=True)
    tree = _tree(args, methods)
    sampling = _sampling(args)
    if sampling is not None and args.diagnose:
        raise ValueError("--diagnose labels greedy outputs; leave it out with --temperature > 0")
    run = Run(args.out, args.force)
    run.check()
    requests = load_requests(args.data, limit=args.limit, skip=args.skip)
    lm = load_model(args.model, state_layer=args.state_layer)
    with run.recording(len(requests)):
        res = run_bench(requests, methods, Verifier(lm), args.max_new_tokens, tree=tree,
                        trace_sink=run.append_traces, sampling=sampling, label="trace")
        for m, r in res["methods"].items():
            if sampling is None:
                print(f"{m}: tau {r['tau']:.2f}, lossless {r['lossless']}")
            else:
                print(f"{m}: tau {r['tau']:.2f}, sampled ({sampling.describe()}): lossless {r['lossless']} "
                      f"(plain sampling, same seed), tokens valid {r['valid']}")
        if args.diagnose:
            from .evaluation.labels import attach_labels
            attach_labels(args.out, requests, lm, max_new_tokens=args.max_new_tokens)
    print(f"wrote {args.out}")
    return 0


DIAGNOSE_MAX_NEW_TOKENS = 128     # diagnose's default; with --traces, the limit they were decoded with


def traces_cap(traces, given: int | None, origin: str) -> int:
    """The ``--max-new-tokens`` a diagnosis of ``traces`` runs with: its gap labels attach to a
    trace only if the two outputs have one length, so the cap the traces were decoded with (the
    length of those that stopped at it) is taken when none is given, and a different one given is
    refused (128 when no trace stopped at a cap)."""
    caps = sorted({len(t.output_ids) for t in traces if t.stop == "limit"})
    if len(caps) > 1:
        raise ValueError(f"the traces in {origin} were decoded with different token limits ({caps[0]} and "
                         f"{caps[-1]}): their gap labels need one diagnosis each; split the file")
    if given is None:
        return caps[0] if caps else DIAGNOSE_MAX_NEW_TOKENS
    if caps and given != caps[0]:
        raise ValueError(f"the traces in {origin} stop at {caps[0]} tokens, so their gap labels need "
                         f"--max-new-tokens {caps[0]} (or leave it out), not {given}")
    return given


def _diagnose(args) -> int:
    from .evaluation.diagnose import diagnose_run, summary_lines
    from .model import load_model
    from .data.requests import load_requests
    run = Run(args.out or fresh_out("diagnose", args.data), args.force, ("diagnosis.json",))
    run.check()
    requests = load_requests(args.data, limit=args.limit, skip=args.skip)
    traces = None
    if args.traces:                  # read (and checked) before the model loads
        from .trace import load_traces
        traces = _of_requests(load_traces(args.traces), requests, args.traces)
        args.max_new_tokens = traces_cap(traces, args.max_new_tokens, args.traces)
    elif args.max_new_tokens is None:
        args.max_new_tokens = DIAGNOSE_MAX_NEW_TOKENS
    lm = load_model(args.model, state_layer=args.state_layer)
    planned = len(requests)

    def save(report: dict, complete: bool = False) -> None:
        run.save_results("diagnosis.json", report, report["n_requests"], planned, complete)

    with run.recording(planned):
        report = diagnose_run(requests, lm, args.max_new_tokens,
                              {"data": str(args.data), "limit": args.limit, "skip": args.skip}, checkpoint=save)
        if traces is not None:
            from .evaluation.funnel import labelled_funnel
            report["funnel"] = labelled_funnel(traces, report["labels"])
            report["funnel_traces"] = str(args.traces)
        save(report, complete=True)
    print("\n".join(summary_lines(report)))
    if traces is not None:
        from .evaluation.funnel import funnel_lines
        print("\n".join(funnel_lines(report["funnel"])))
    print(f"wrote {run.path('diagnosis.json')}")
    return 0


def _of_requests(traces: list, requests: list, path) -> list:
    """The traces of the requests diagnosed (the funnel is labelled per request): none of them
    is refused, in one line; traces of other requests are left out, said in a note."""
    ids = {r.id for r in requests}
    have = list(dict.fromkeys(t.request_id for t in traces))          # in file order
    both = ids.intersection(have)
    if not both:
        raise InputError(f"--traces holds no trace of the {len(ids)} requests diagnosed (its requests: "
                         f"{', '.join(have[:3])}, ...); give the --data, --limit and --skip the traces were "
                         f"made with", path)
    others = len(have) - len(both)
    if others or len(both) < len(ids):
        print(f"note: the funnel counts the traces of {len(both)} of the {len(ids)} requests diagnosed"
              + (f"; {others} other requests' traces in {path} are left out" if others else ""), file=sys.stderr)
    return [t for t in traces if t.request_id in both]


def _left_out(bad: list[dict]) -> str:
    """What ``replay --skip-bad`` left out, in its own words: a recording's bad lines, or an
    API-Bank dialogue folder's bad files ("2 bad dialogue files of the folder")."""
    files = all(b.get("what") == "dialogue file" for b in bad)
    what, where = ("dialogue file", "folder") if files else ("line", "recording")
    return f"{len(bad)} bad {what}{'s' if len(bad) > 1 else ''} of the {where}"


def _folded(folded: list[dict]) -> str:
    return f"{len(folded)} conversation{'s' if len(folded) > 1 else ''}"


def _encoded(convs, lm, tool_calls: str, bad: list[dict] | None) -> tuple[list, list]:
    """Every conversation's turns as the model's tokens, and the conversations encoded; one
    that cannot be (its tokens change once a reply follows) is left out into ``bad`` with
    ``--skip-bad`` (said, and listed in results.json), else it stops the run in one line."""
    from .data.conversations import encode_conversation
    from .data.requests import ConversationError
    turns, kept = [], []
    for c in convs:
        try:
            turns.append(encode_conversation(lm.tokenizer, c, end_ids=lm.eos_token_ids, tool_calls=tool_calls))
            kept.append(c)
        except ConversationError as exc:
            if bad is None:
                raise ConversationError(f"{exc.reason} (--skip-bad replays the other conversations)",
                                        exc.path, exc.line) from None
            bad.append({"file": c.source.rsplit(":", 1)[0], "line": c.line, "error": str(exc)})
            print(f"--skip-bad: left out {c.id}: {exc}", file=sys.stderr)
    if not kept:
        raise ConversationError("no conversation could be encoded for this model; the first: " + bad[0]["error"])
    return turns, kept


def _replay(args) -> int:
    from tqdm import tqdm
    from .data.conversations import load_conversations
    from .data.requests import ConversationError
    from .data.template_form import check_template
    from .model import load_model, load_tokenizer
    from .evaluation.replay import replay, replay_methods, time_lines
    from .evaluation.report import skipped_words
    from .evaluation.results import format_table
    from .verifier import Verifier
    methods = replay_methods(args.methods)               # hf-pld: refused before any work
    tree = _tree(args, methods)
    writes = ("results.json",) + (("traces.jsonl",) if args.traces else ()) + (
        ("diagnosis.json",) if args.diagnose else ())
    if args.exact and (args.cache or args.window):
        raise ValueError("--cache and --window are for fast mode's teacher forcing; --exact runs every forward")
    from .evaluation.teacher import TeacherCache, TeacherForcer, matmul_gflops
    run = Run(args.out or fresh_out("replay", args.data), args.force, writes, unit="turns")
    run.check()
    bad: list[dict] | None = [] if args.skip_bad else None
    folded: list[dict] = []
    try:
        convs = load_conversations(args.data, args.limit, bad, folded)   # every line checked before the model loads
    except ConversationError as exc:
        if args.skip_bad or not exc.skippable:       # not bad lines, or nothing else would load
            raise
        raise ConversationError(f"{exc.reason} (--skip-bad replays the other lines)", exc.path, exc.line) from None
    if bad:
        print(f"--skip-bad: left out {_left_out(bad)} (all listed in results.json); the first: {bad[0]['error']}",
              file=sys.stderr)
    if folded:
        print(f"left out {_folded(folded)}: each one's messages are the start of another's, which replays its "
              f"turns once (a log with a line per call?); listed in results.json; the first: {folded[0]['id']} "
              f"({folded[0]['source']}), in {folded[0]['into']}", file=sys.stderr)
    if args.tool_calls == "template":        # a template that cannot spell calls: refused before the weights load
        check_template(load_tokenizer(args.model))
    # made (a folder) once the run's inputs are known good, still before the weights load
    disk = TeacherCache(args.cache, max_bytes=int(args.cache_max_gb * 2 ** 30)) if args.cache else None
    lm = load_model(args.model, state_layer=args.state_layer)
    t0 = time.perf_counter()
    turns, convs = _encoded(convs, lm, args.tool_calls, bad)
    timing = {"encode_seconds": time.perf_counter() - t0, "matmul": matmul_gflops(lm)}
    mode = "exact" if args.exact else "fast"
    teacher = TeacherForcer(Verifier(lm), window=args.window, cache=disk) if mode == "fast" else None
    planned = sum(len(t) for t in turns)

    def save(res: dict, complete: bool = False) -> None:
        extra = ({"skipped_bad_lines": bad} if bad is not None else {}) | {"folded_conversations": folded}
        run.save_results("results.json", {**res, "data": str(args.data), "tool_calls": args.tool_calls, **extra},
                         res["n_requests"], planned, complete)

    from .evaluation.funnel import Accumulator, funnel_lines
    funnel = Accumulator()       # the conversion funnel, counted as the run goes

    def on_request(request_traces, res) -> None:
        if args.traces:
            run.append_traces(request_traces, "traces.jsonl")
        funnel.add(request_traces)
        save(res)

    teacher_rows: dict = {}      # --diagnose in fast mode: the replay's teacher forcing, reused
    keep = (lambda t, rows: teacher_rows.__setitem__(t.id, rows)) if args.diagnose and mode == "fast" else None
    bar = tqdm(total=planned, desc=f"replay ({mode})", unit="turn")
    with run.recording(planned):
        try:
            res = replay(turns, methods, Verifier(lm), mode=mode, tree=tree, trace=args.traces or args.diagnose,
                         recorded_by={c.id: c.model for c in convs}, on_request=on_request, progress=bar.update,
                         teacher=teacher, timing=timing, teacher_sink=keep)
        finally:
            bar.close()
        save(res, complete=True)
    r = res["replay"]
    recorded_by = r["recorded_by"] or "no model (every conversation skipped)"
    print(format_table(res))
    print(f"{r['turns']} turns of {r['conversations']} conversations recorded by {recorded_by}, replayed in "
          f"{mode} mode on {lm.name}"
          + ("; tool calls as the model's chat template spells them" if args.tool_calls == "template" else "")
          + (f"; {skipped_words(r['skipped_over_context'], mode)}" if r["skipped_over_context"]["conversations"]
             else "")
          + (f"; {_left_out(bad)} left out (--skip-bad)" if bad else "")
          + (f"; {_folded(folded)} left out (held whole by another)" if folded else ""))
    print("tau is what each drafter would have committed per forward on the recorded outputs; "
          + ("tokens/s and speedup are the local model's cost of these outputs" if mode == "exact"
             else "fast mode times nothing (--exact does)"))
    print(f"note: {r['note']}")
    if r["windowed_turns"]:
        print(f"{r['windowed_turns']} turns past the model's context read windowed states (the last "
              f"{r['teacher']['window']}-{r['teacher']['context']} tokens; see docs/replay.md)")
    print(time_lines(r["time"], r.get("teacher")))
    _paired(res)
    if not args.diagnose and args.traces:
        print("\n".join(funnel_lines(funnel.result())))
    if args.diagnose:
        from .evaluation.diagnose import K, MAX_SUFFIX, MIN_SUFFIX, build_report, summary_lines
        from .evaluation.replay import diagnose_turns
        # fast mode: the replay's own teacher rows (windowed past the context, as replay read them)
        with run.recording(planned):
            report = build_report(diagnose_turns(lm, turns, rows=teacher_rows), {
                "data": str(args.data), "model": lm.name, "recorded_by": recorded_by, "replay": True,
                "settings": {"k": K, "max_suffix": MAX_SUFFIX, "min_suffix": MIN_SUFFIX,
                             "state_layer": lm.state_layer, "num_layers": lm.num_layers}})
            report["funnel"] = funnel.result(report["labels"])
            run.write_json("diagnosis.json", report)
            if args.traces:       # the labels belong to the recording, the output of every method
                from .evaluation.labels import attach_report
                from .trace import load_traces, save_traces
                traces = load_traces(run.path("traces.jsonl"))
                attach_report(traces, report)
                save_traces(traces, run.path("traces.jsonl"))
        print("\n".join(summary_lines(report)))
        print("\n".join(funnel_lines(report["funnel"])))
    print(f"wrote {run.out}")
    return 0 if all(m["lossless"] for m in res["methods"].values()) else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m oilbird", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("bench", help="serve requests through several methods; results.json")
    common_options(p)
    p.add_argument("--methods", default="ar,hf-greedy",
                   help="comma-separated method names, each once; a tree method may add a fill after "
                        "a colon, ':expected', ':reserved' or ':open' (e.g. oilbird,oilbird:reserved)")
    p.add_argument("--out", type=out_path, default=None,
                   help="the folder to write (default: a new runs/bench-DATA-TIME-PID)")
    p.add_argument("--traces", action="store_true", help="also write traces.jsonl")
    force_option(p)
    _tree_options(p)
    _sampling_options(p)
    p.add_argument("--store-capacity", type=at_least(1), default=None,
                   help="cap the cross-request store at N records (oldest requests evicted)")
    p.add_argument("--state-dtype", choices=("fp16", "int8", "pq"), default="fp16",
                   help="how the store keeps hidden states")
    p.add_argument("--store-index", choices=("flat", "ivf"), default="flat",
                   help="cosine index: exhaustive, or IVF (approximate; for >= 100k records)")

    p = sub.add_parser("trace", help="decode requests and save per-cycle traces (JSONL)")
    common_options(p, default_max=64)
    p.add_argument("--methods", default="goose,oilbird",
                   help="comma-separated tree methods (presets or suffix-arctic), each once, each with "
                        "an optional fill after a colon, e.g. goose,oilbird:reserved")
    p.add_argument("--out", type=out_path, required=True, help="the JSONL file to write")
    p.add_argument("--diagnose", action="store_true", help="attach per-position gap labels")
    force_option(p)
    _tree_options(p)
    _sampling_options(p)

    p = sub.add_parser("decode", help="decode one prompt and audit it against greedy")
    p.add_argument("prompt")
    p.add_argument("--method", default="oilbird",
                   help="a preset (oilbird, goose, pld, suffix, ...; see oilbird/methods.py), optionally "
                        "with a fill after a colon, e.g. oilbird:reserved")
    p.add_argument("--max-new-tokens", type=at_least(1), default=64)
    model_options(p)
    _sampling_options(p)

    p = sub.add_parser("diagnose", help="the identifiability-gap diagnosis (paper section 3)")
    common_options(p, default_max=None, max_help=f"new tokens per request at most (default {DIAGNOSE_MAX_NEW_TOKENS}; with "
                                           "--traces, the limit those traces were decoded with, so that their gap "
                                           "labels attach)")
    p.add_argument("--traces", default=None, metavar="FILE",
                   help="a trace file of the same requests (bench --traces, trace): also count its conversion "
                        "funnel, split by this diagnosis' labels, into diagnosis.json")
    p.add_argument("--out", type=out_path, default=None,
                   help="the folder to write (default: a new runs/diagnose-DATA-TIME-PID)")
    force_option(p)

    add_serving_commands(sub)

    p = sub.add_parser("replay", help="replay recorded conversations through every drafter (what each would buy)",
                       description="Replay recorded conversations (every assistant turn is one request) through each "
                                   "drafter on the local model: tau is what each would have committed per forward on "
                                   "the recorded outputs, whose verdict is the recording's. docs/replay.md says how.")
    p.add_argument("--data", type=data_arg, default="agent-builtin",
                   help="agent-builtin (generated here) | agent-builtin-long (the same, ~6k-token system prompt) | "
                        "agent-transcripts, api-bank-dialogues (../shared/data) | a .jsonl or .jsonl.gz file of "
                        "conversations, or a folder of them (one per line; OpenAI chat, OpenAI Responses or "
                        "Anthropic Messages spellings of tool calls: docs/replay.md, Input)")
    p.add_argument("--methods", default="ar,goose,oilbird",
                   help="comma-separated methods, each once (default ar,goose,oilbird): ar, suffix-arctic and the "
                        "presets (hf-pld and hf-greedy cannot replay)")
    p.add_argument("--limit", type=at_least(1), default=None, help="replay only the first N conversations")
    p.add_argument("--exact", action="store_true",
                   help="run every verify forward (real hidden states, top-k and cost; tokens/s) instead of "
                        "one teacher-forced forward per turn shared by every method")
    p.add_argument("--skip-bad", action="store_true",
                   help="leave out a recording's bad lines (a repeated id counts as one; a bad API-Bank dialogue "
                        "file, or a damaged .gz's break and the rest, as one; the first is named on stderr, all are "
                        "listed in results.json) instead of stopping")
    p.add_argument("--tool-calls", choices=FORMS, default="text",
                   help="how a recorded tool call becomes tokens: text (default), the project's one Hermes-style text "
                        "form for every model; template, the model's chat template's own spelling of calls and tool "
                        "definitions (a template that writes no tool calls is refused)")
    p.add_argument("--traces", action="store_true", help="also write traces.jsonl (one trace per turn and method)")
    p.add_argument("--diagnose", action="store_true",
                   help="also write diagnosis.json: the identifiability-gap table and copy-oracle tau on the recordings")
    p.add_argument("--cache", default=None, metavar="DIR",
                   help="keep fast mode's teacher-forced outputs in DIR (one file per conversation, keyed by model "
                        "and tokens): a later replay of the same data with other methods or settings costs drafting only")
    p.add_argument("--cache-max-gb", type=non_negative, default=4.0,
                   help="bound on --cache's folder (default 4 GiB; 0 reads the cache and adds nothing to it)")
    p.add_argument("--window", type=at_least(1), default=None,
                   help="fast mode past the model's context: restart the teacher forcing on the last N tokens "
                        "(default: half the context)")
    p.add_argument("--out", type=out_path, default=None,
                   help="the folder to write (default: a new runs/replay-DATA-TIME-PID)")
    model_options(p)
    force_option(p)
    _tree_options(p)

    sub.add_parser("report", add_help=False,
                   help="the tables of a saved run: results.json or its folder, a trace file, a diagnosis.json "
                        "(python -m oilbird.evaluation.report; report --help)")
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["report"]:          # its own parser: python -m oilbird.evaluation.report
        from .evaluation.report import main as report
        return report(argv[1:], prog="python -m oilbird report")
    args = ap.parse_args(argv)
    try:
        return {"bench": _bench, "trace": _trace, "decode": _decode, "diagnose": _diagnose,
                "replay": _replay, "serve-bench": serve_bench, "serve": serve}[args.cmd](args)
    except RunStopped as exc:              # Ctrl-C, SIGTERM or a failed write during the run
        print(exc, file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:              # before the run began: nothing was written
        print("interrupted (Ctrl-C) before the run began: nothing was written", file=sys.stderr)
        return 130
    except (InputError, ModelError, ValueError, ImportError, ServeBenchError) as exc:
        # ValueError: the registry's and presets' refusals; ImportError: an optional peer
        # (suffix-arctic) whose package is not installed. One line, exit 2.
        print(f"error: {exc}", file=sys.stderr)
        return 2


def cli() -> None:
    """The installed ``oilbird`` command (pyproject's console script): :func:`main` through
    :func:`~oilbird.errors.run_cli`, as ``python -m oilbird`` runs it."""
    sys.exit(run_cli(main))


if __name__ == "__main__":
    cli()
