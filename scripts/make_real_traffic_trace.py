"""Make the shipped real-traffic trace: recorded gpt-4o tau-bench airline turns, replayed, and the
few turns that show the identifiability gap best.

    python scripts/make_real_traffic_trace.py                      # replays, selects, writes
    python scripts/make_real_traffic_trace.py --run runs/tau-replay   # selects from an earlier replay

Step 1 (unless ``--run`` names a folder it already wrote): the conversations named by
``--conversations`` (default :data:`CONVERSATIONS`: the first trial of tasks 0-19, so that the store
holds other customers' conversations with the same tools, as in production where many users ask
alike; three trials each of tasks 0 and 12, the first default, left today's drafter one contested
recovery per kept turn, mostly list numbers, where these give tool-call frames) are
copied, their lines unchanged and in that order, from ``../shared/data/agent-transcripts/
tau-airline.jsonl`` to ``RUN/conversations.jsonl`` (``runs/`` is never committed) and replayed:
``python -m oilbird replay --data RUN/conversations.jsonl --methods goose,oilbird --budget 24
--traces --diagnose --out RUN`` (:data:`REPLAY_ARGS`): fast mode on the local
model, every turn with the gap labels of ``--diagnose``.

Step 2: every replayed turn is scored on its ``oilbird`` trace by its gap moments
(:mod:`workbench.panels.gap_moments`) and the cycles that committed them:

* a **recovery** is a ``gap_recovered`` moment inside a tool call's arguments or holding a
  digit (an ID or a value), with a token the semantic source alone delivered in the cycle where
  a lexical source (prompt lookup, suffix: the exact-match keys) proposed a different token at
  the same place in the tree (``GapMoment.contested``): the exact-match key proposed a wrong ID
  or value and the hidden-state key the right one;
* a **miss** is a ``gap_missed`` moment inside a tool call or holding a digit: both keys failed.

The ``--recovered`` turns with the most recoveries (then most semantic tokens) and the
``--missed`` turns with the most misses (among the rest) are kept, both methods' traces of
each, in replay order, gzipped to ``--out``; beside it ``LICENSE-tau-bench`` (MIT, copied from
the shared data) and ``--out`` with ``.md`` for ``.jsonl.gz``: the provenance note, naming
every conversation and turn taken, why, and both commands. Nothing else of the transcript
file is written: the traces hold the turns' prompts, outputs and the store records their
cycles retrieved.
"""
from __future__ import annotations

import argparse
import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from oilbird.data.requests import data_root  # noqa: E402
from oilbird.trace import RequestTrace, load_traces, request_to_lines  # noqa: E402
from workbench.panels.gap_moments import GapMoment, gap_moments  # noqa: E402

REPLAY_ARGS = ["--methods", "goose,oilbird", "--budget", "24", "--traces", "--diagnose"]
CONVERSATIONS = tuple(f"tau-airline-task{k}-trial0" for k in range(20))
TRANSCRIPTS = Path("agent-transcripts") / "tau-airline.jsonl"
DEFAULT_OUT = ROOT / "assets" / "traces" / "real-traffic.jsonl.gz"


def in_value(tr: RequestTrace, m: GapMoment) -> bool:
    """Is the moment an ID or a value: inside a ``<tool_call>`` of the output, or holding a digit?"""
    before = "".join(tr.output_text[: m.start])
    inside_call = before.rfind("<tool_call>") > before.rfind("</tool_call>")
    return inside_call or any(ch.isdigit() for ch in m.text)


def score(tr: RequestTrace) -> dict:
    """Recoveries and misses of one turn (see the module docstring)."""
    rec, miss = [], []
    for m in gap_moments(tr, ("gap_recovered", "gap_missed")):
        if not in_value(tr, m):
            continue
        if m.label == "gap_missed":
            miss.append(m)
        elif m.contested:
            rec.append(m)
    return {"recovered": rec, "missed": miss, "semantic": sum(m.semantic for m in rec)}


def select(traces: list[RequestTrace], n_recovered: int, n_missed: int) -> tuple[list[str], dict]:
    """The request ids to keep, in replay order, and each one's score (on its oilbird trace)."""
    scored = {t.request_id: score(t) for t in traces if t.method == "oilbird" and t.gap_labels is not None}
    by_rec = sorted((r for r in scored if scored[r]["recovered"]),
                    key=lambda r: (-len(scored[r]["recovered"]), -scored[r]["semantic"]))[:n_recovered]
    by_miss = sorted((r for r in scored if scored[r]["missed"] and r not in by_rec),
                     key=lambda r: -len(scored[r]["missed"]))[:n_missed]
    order = list(dict.fromkeys(t.request_id for t in traces))
    keep = [r for r in order if r in set(by_rec) | set(by_miss)]
    return keep, scored


def provenance(keep: list[str], scored: dict, traces: list[RequestTrace], replay_cmd: str, select_cmd: str,
               out: Path) -> str:
    lines = [f"# {out.name}: where it comes from", "",
             "A replay of recorded **gpt-4o** turns (tau-bench, airline domain) on the local model: the drafts are "
             "the local model's drafters', the verdict is the recording's. Shipped so that the workbench opens on a "
             "real language model's traffic on a machine without `../shared`.", "",
             "| what | value |", "| --- | --- |",
             "| source | `sierra-research/tau-bench`, `historical_trajectories/gpt-4o-airline.json`, commit "
             "`59a200c6d575d595120f1cb70fea53cef0632f6b`, as converted in the shared data's "
             "`agent-transcripts/tau-airline.jsonl` |",
             "| licence | MIT, `LICENSE-tau-bench` beside this file (copied from the shared data, which copied it "
             "from the repository) |",
             "| model that wrote the replayed turns | gpt-4o (the user turns come from tau-bench's simulated user) |",
             f"| local model | {traces[0].model} |", "",
             "## Commands", "", "```bash", select_cmd, replay_cmd, "```", "",
             "## What was taken", "",
             "Only the turns below (each with goose and oilbird; a trace holds the turn's prompt, i.e. the "
             "conversation before it, its recorded output, and the text of the store records its cycles "
             "retrieved from earlier turns). Nothing else of the transcript file is copied.", "",
             "| turn (conversation#k) | why | recoveries (lexical wrong, semantic right) | misses (both wrong) |",
             "| --- | --- | --- | --- |"]
    for r in keep:
        s = scored[r]
        why = "recovery" if s["recovered"] else "miss"
        rec = "; ".join(f"`{m.text}` (tokens {m.start}-{m.end - 1})" for m in s["recovered"][:4]) or "-"
        miss = "; ".join(f"`{m.text}` (tokens {m.start}-{m.end - 1})" for m in s["missed"][:4]) or "-"
        lines.append(f"| {r} | {why} | {rec} | {miss} |")
    lines += ["", "A recovery: a `gap_recovered` moment (diagnosis labels of `replay --diagnose`) inside a tool "
              "call or holding a digit, whose token the semantic source delivered where a lexical source (prompt "
              "lookup or suffix) proposed a different token in the same tree. A miss: a `gap_missed` moment "
              "there. `scripts/make_real_traffic_trace.py` says how turns are ranked.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", default=None, help="a replay folder already written by step 1 (skips the replay)")
    ap.add_argument("--conversations", default=",".join(CONVERSATIONS),
                    help="comma-separated conversation ids of tau-airline.jsonl to replay in step 1")
    ap.add_argument("--recovered", type=int, default=3, help="turns with recoveries to keep (default 3)")
    ap.add_argument("--missed", type=int, default=1, help="further turns with misses to keep (default 1)")
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    args = ap.parse_args(argv)
    run = Path(args.run or ROOT / "runs" / "real-traffic-replay")
    shown_run = Path(args.run).as_posix() if args.run else "runs/real-traffic-replay"
    replay_cmd = (f"python -m oilbird replay --data {shown_run}/conversations.jsonl " + " ".join(REPLAY_ARGS)
                  + f" --out {shown_run}")
    if args.run is None:
        ids = [x.strip() for x in args.conversations.split(",") if x.strip()]
        by_id = {}
        for line in (data_root() / TRANSCRIPTS).read_text(encoding="utf-8").splitlines():
            if line.strip():
                by_id[json.loads(line)["id"]] = line
        missing = [i for i in ids if i not in by_id]
        if missing:
            print(f"make_real_traffic_trace: no conversation {missing[0]!r} in {TRANSCRIPTS}", file=sys.stderr)
            return 2
        run.mkdir(parents=True, exist_ok=True)
        (run / "conversations.jsonl").write_text("".join(by_id[i] + "\n" for i in ids), encoding="utf-8")
        cmd = [sys.executable, "-m", "oilbird", "replay", "--data", str(run / "conversations.jsonl"), *REPLAY_ARGS,
               "--out", str(run), "--force"]
        if subprocess.call(cmd, cwd=ROOT) not in (0, 1):
            print("make_real_traffic_trace: the replay failed", file=sys.stderr)
            return 2
    traces = load_traces(run / "traces.jsonl")
    keep, scored = select(traces, args.recovered, args.missed)
    if not keep:
        print("make_real_traffic_trace: no turn shows a recovery or a miss; replay more conversations (--conversations)",
              file=sys.stderr)
        return 1
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    kept = [t for t in traces if t.request_id in set(keep)]
    with gzip.GzipFile(out, "wb", compresslevel=9, mtime=0) as f:
        f.write("".join(line + "\n" for t in kept for line in request_to_lines(t)).encode())
    shutil.copyfile(data_root() / "agent-transcripts" / "LICENSE-tau-bench", out.parent / "LICENSE-tau-bench")
    replayed = list(dict.fromkeys(t.meta.get("replay", {}).get("conversation", "?") for t in traces))
    select_cmd = (f"python scripts/make_real_traffic_trace.py --conversations {','.join(replayed)} "
                  f"--recovered {args.recovered} --missed {args.missed}"
                  + (f" --out {out.relative_to(ROOT).as_posix()}" if out.is_relative_to(ROOT) else "")
                  + f"   # copies those lines of tau-airline.jsonl to {shown_run}/conversations.jsonl, runs:")
    note = out.with_name(out.name.replace(".jsonl.gz", "") + ".md")
    note.write_text(provenance(keep, scored, kept, replay_cmd, select_cmd, out))
    for r in keep:
        s = scored[r]
        print(f"{r}: {len(s['recovered'])} recoveries, {len(s['missed'])} misses")
    print(f"wrote {out} ({out.stat().st_size / 1e6:.2f} MB, {len(kept)} traces), {note.name}, LICENSE-tau-bench")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
