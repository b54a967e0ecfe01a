"""Teacher forcing for fast replay (oilbird.evaluation.teacher): windowed states past the
context, the shared prefix, the disk cache, the floor; on the tiny mock model."""
import dataclasses
import random

import pytest
import torch

from conftest import make_tiny_lm, make_windowed_lm
from oilbird.evaluation.replay import RecordedTurn, replay
from oilbird.evaluation.teacher import (TeacherCache, TeacherForcer, flops_per_token, floor_seconds,
                                        matmul_gflops)
from oilbird.verifier import Verifier


def _conversation(name: str, n_turns: int, seed: int, system: list[int] | None = None, rec_len: int = 10):
    """Turns that extend each other: system + (user, recording) x n_turns, byte-like ids."""
    rng = random.Random(seed)
    ids = list(system or [1] + [rng.randrange(3, 250) for _ in range(40)])
    turns = []
    for k in range(n_turns):
        ids = ids + [rng.randrange(3, 250) for _ in range(rng.randint(5, 15))]
        rec = [rng.randrange(3, 250) for _ in range(rec_len)] + [2]
        turns.append(RecordedTurn(f"{name}#{k}", name, k, list(ids), rec))
        ids = ids + rec
    return turns


def _rows(forcer, turns):
    return list(forcer.conversation(turns))


def _equal(a, b, exact=True):
    same = (torch.equal if exact else (lambda x, y: torch.allclose(x, y, atol=1e-5, rtol=1e-4)))
    return (a.argmax.tolist() == b.argmax.tolist() and a.topk_ids.tolist() == b.topk_ids.tolist()
            and same(a.states, b.states) and same(a.topk_probs, b.topk_probs))


def _same_rows(xs, ys, turns, exact=True) -> bool:
    """Two forcers' rows of ``turns``: one per turn each (a zip alone would pass a forcer that
    dropped turns), equal turn by turn, with the same windowed flags."""
    return len(xs) == len(ys) == len(turns) and all(
        _equal(a, b, exact) and wa == wb for (a, wa), (b, wb) in zip(xs, ys))


@pytest.fixture(scope="module")
def small_lm():
    lm = make_tiny_lm()
    lm.model.config.max_position_embeddings = 96       # a conversation of ~250 tokens overflows it
    return lm


def test_prefill_keeps_only_the_key_layer_and_its_states_are_the_full_forwards(tiny_lm):
    v = Verifier(tiny_lm)
    ids = [1] + list(range(10, 40))
    _, out = v.prefill(ids, keep=5)
    with torch.inference_mode():
        full = tiny_lm.model(input_ids=torch.tensor([ids]), output_hidden_states=True)
        sel = tiny_lm.model(input_ids=torch.tensor([ids]), output_hidden_states=[tiny_lm.state_layer])
    assert torch.equal(out.states, full.hidden_states[tiny_lm.state_layer][0, -5:].float())
    assert sum(h is not None for h in sel.hidden_states) == 1


def test_a_conversation_longer_than_the_context_replays_with_windowed_states(small_lm):
    turns = _conversation("long", 10, seed=1)
    assert len(turns[-1].prompt_ids) + len(turns[-1].recording_ids) > 2 * 96
    forcer = TeacherForcer(Verifier(small_lm))
    rows = _rows(forcer, turns)
    assert [len(r.argmax) for r, _ in rows] == [len(t.recording_ids) + 1 for t in turns]
    flags = [w for _, w in rows]
    first = flags.index(True)
    assert not any(flags[:first]) and all(flags[first:]) and forcer.stats.windowed_turns == len(turns) - first
    # inside the context the rows are the unwindowed ones (the same weights, a context that holds it all)
    wide = _rows(TeacherForcer(Verifier(make_tiny_lm())), turns)
    assert all(_equal(a, b) for (a, _), (b, _) in zip(rows[:first], wide[:first]))
    assert not all(_equal(a, b, exact=False) for (a, _), (b, _) in zip(rows[first:], wide[first:]))
    # a windowed turn's rows are a fresh forward over the window's tokens (it starts at most `window` back)
    t = turns[first]
    ids = t.prompt_ids + t.recording_ids
    start = len(ids) - forcer.window
    _, fresh = Verifier(small_lm).prefill(ids[start:], keep=len(t.recording_ids) + 1)
    assert _equal(rows[first][0], fresh)


def test_replay_skips_no_conversation_and_says_which_turns_were_windowed(small_lm):
    convs = [_conversation("short", 2, seed=2), _conversation("long", 10, seed=3)]
    seen = []
    res = replay(convs, ["pld", "oilbird"], Verifier(small_lm), trace=True,
                 on_request=lambda trs, _: seen.extend(trs))
    r = res["replay"]
    assert r["skipped_over_context"] == {"conversations": 0, "turns": 0, "ids": []} and r["turns"] == 12
    assert 0 < r["windowed_turns"] < 12 and r["teacher"]["window"] == 48
    assert sum(tr.meta["replay"]["windowed"] for tr in seen) == 2 * r["windowed_turns"]
    assert all(m["lossless"] for m in res["methods"].values())
    exact = replay(convs, ["pld"], Verifier(small_lm), mode="exact")
    assert exact["replay"]["skipped_over_context"]["conversations"] == 1      # exact mode cannot window


def test_a_recording_longer_than_the_context_skips_its_conversation_counted(small_lm):
    """One recording past the context cannot be teacher-forced even windowed: fast replay skips
    its conversation and counts it (it stopped the whole run), and replays the others."""
    convs = [_conversation("short", 2, seed=2), _conversation("huge", 2, seed=4, rec_len=120)]
    res = replay(convs, ["pld"], Verifier(small_lm))
    r = res["replay"]
    assert r["skipped_over_context"] == {"conversations": 1, "turns": 2, "ids": ["huge"]} and r["conversations"] == 1
    assert r["turns"] == 2 and res["methods"]["pld"]["lossless"]
    # results.json says whose its numbers are, and times nothing it did not time
    assert r["whose"].startswith("tau: what each drafter, run on the local model, would have committed") \
        and "the recording is the verdict" in r["whose"] and "fast mode times nothing" in r["whose"]
    assert all("seconds" not in row for row in res["methods"]["pld"]["per_request"])
    # recorded by: only the replayed conversations' models, and each trace its own conversation's
    seen = []
    res = replay(convs, ["pld"], Verifier(small_lm), recorded_by={"short": "gpt-4o", "huge": "grok-3"},
                 on_request=lambda trs, _: seen.extend(trs))
    assert res["replay"]["recorded_by"] == "gpt-4o"
    assert {tr.meta["replay"]["recorded_by"] for tr in seen} == {"gpt-4o"}
    mixed = replay([_conversation("a", 1, seed=2), _conversation("b", 1, seed=3)], ["pld"], Verifier(small_lm),
                   recorded_by={"a": "gpt-4o", "b": None}, on_request=lambda trs, _: seen.extend(trs))
    assert mixed["replay"]["recorded_by"] == "an unnamed model, gpt-4o"
    assert [tr.meta["replay"]["recorded_by"] for tr in seen[-2:]] == ["gpt-4o", "an unnamed model"]


def test_a_shared_system_prompt_is_computed_once_and_the_states_are_unchanged(tiny_lm):
    system = [1] + list(range(3, 3 + 120))
    convs = [_conversation(f"c{i}", 3, seed=10 + i, system=system) for i in range(3)]
    plain = TeacherForcer(Verifier(tiny_lm), shared_prefix=False)
    shared = TeacherForcer(Verifier(tiny_lm))
    for turns in convs:
        assert _same_rows(_rows(plain, turns), _rows(shared, turns), turns, exact=False)
    assert shared.stats.shared_prefix_tokens >= 2 * len(system)
    assert shared.stats.tokens_forwarded <= plain.stats.tokens_forwarded - 2 * len(system)


def test_the_disk_cache_returns_the_computed_rows_and_refuses_what_does_not_match(tiny_lm, tmp_path, capsys):
    turns = _conversation("c", 4, seed=5)
    cold = TeacherForcer(Verifier(tiny_lm), cache=TeacherCache(tmp_path))
    rows = _rows(cold, turns)
    assert cold.stats.cache_misses == 1 and len(list(tmp_path.glob("*.npz"))) == 1
    warm = TeacherForcer(Verifier(tiny_lm), cache=TeacherCache(tmp_path))
    again = _rows(warm, turns)
    assert warm.stats.cache_hits == 1 and warm.stats.tokens_forwarded == 0
    assert _same_rows(rows, again, turns)
    # other bytes (one recorded token changed) are another key: never the stored rows
    other = [RecordedTurn(t.id, t.conversation, t.index, t.prompt_ids, t.recording_ids) for t in turns]
    other[-1].recording_ids = other[-1].recording_ids[:-2] + [7, 2]
    c = TeacherCache(tmp_path)
    assert c.key(Verifier(tiny_lm), other, cold.settings()) != c.key(Verifier(tiny_lm), turns, cold.settings())
    assert c.key(Verifier(make_tiny_lm(seed=1)), turns, cold.settings()) != c.key(Verifier(tiny_lm), turns,
                                                                                   cold.settings())
    # the same weights on other kernels (or another device) round differently: another key too
    packed = dataclasses.replace(tiny_lm, gemm="onednn")
    assert TeacherCache(tmp_path).key(Verifier(packed), turns, cold.settings()) != \
        c.key(Verifier(tiny_lm), turns, cold.settings())
    # a partial entry: one line, recomputed, the same numbers
    entry = next(tmp_path.glob("*.npz"))
    entry.write_bytes(entry.read_bytes()[:200])
    third = TeacherForcer(Verifier(tiny_lm), cache=TeacherCache(tmp_path))
    assert _same_rows(rows, _rows(third, turns), turns)
    err = capsys.readouterr().err
    assert err.count("teacher cache:") == 1 and "recomputed" in err and third.stats.cache_misses == 1
    # rewritten whole: the next run hits again
    fourth = TeacherForcer(Verifier(tiny_lm), cache=TeacherCache(tmp_path))
    _rows(fourth, turns)
    assert fourth.stats.cache_hits == 1
    # another conversation's entry under this key's name: refused by the key inside it
    key = c.key(Verifier(tiny_lm), turns, cold.settings())
    _rows(TeacherForcer(Verifier(tiny_lm), cache=c), other)
    c.path(c.key(Verifier(tiny_lm), other, cold.settings())).replace(c.path(key))
    fifth = TeacherForcer(Verifier(tiny_lm), cache=TeacherCache(tmp_path))
    assert _same_rows(rows, _rows(fifth, turns), turns)
    assert "another conversation's key" in capsys.readouterr().err


def test_the_disk_cache_stays_within_its_bound(tiny_lm, tmp_path, capsys):
    forcer = TeacherForcer(Verifier(tiny_lm), cache=TeacherCache(tmp_path, max_bytes=1000))
    for i in range(2):
        _rows(forcer, _conversation(f"c{i}", 3, seed=i))
    assert not list(tmp_path.glob("*.npz")) and capsys.readouterr().err.count("bound") == 1


def test_a_warm_cache_replays_to_the_same_taus_and_the_time_split_is_reported(tiny_lm, tmp_path):
    convs = [_conversation(f"c{i}", 3, seed=20 + i) for i in range(2)]
    v = Verifier(tiny_lm)
    timing = {"encode_seconds": 0.0, "matmul": matmul_gflops(tiny_lm, seconds=0.05)}
    res = [replay(convs, ["pld", "oilbird"], v, teacher=TeacherForcer(v, cache=TeacherCache(tmp_path)),
                  timing=timing) for _ in range(2)]
    assert [r["methods"]["oilbird"]["tau"] for r in res] == [res[0]["methods"]["oilbird"]["tau"]] * 2
    assert res[0]["replay"]["teacher"]["cache_misses"] == 2 and res[1]["replay"]["teacher"]["cache_hits"] == 2
    t = res[0]["replay"]["time"]
    assert set(t["drafting_seconds"]) == {"pld", "oilbird"} and t["floor"]["flops"] > 0
    assert t["floor"]["tokens_forwarded"] == res[0]["replay"]["teacher"]["tokens_forwarded"] > 0
    assert res[1]["replay"]["time"]["floor"]["flops"] == 0
    assert res[0]["replay"]["teacher"]["cache_seconds"] == 0
    assert 0 < res[1]["replay"]["teacher"]["cache_seconds"] == res[1]["replay"]["teacher"]["seconds"]
    # half read, half computed: the floor is compared with the computing half's seconds only
    mixed = replay(convs + [_conversation("c2", 3, seed=30)], ["pld"], v,
                   teacher=TeacherForcer(v, cache=TeacherCache(tmp_path)), timing=timing)
    tm, f = mixed["replay"]["teacher"], mixed["replay"]["time"]["floor"]
    assert tm["cache_hits"] == 2 and tm["cache_misses"] == 1 and tm["cache_seconds"] > 0
    assert f["teacher_over_floor"] == pytest.approx((tm["seconds"] - tm["cache_seconds"]) / f["seconds"])


def test_the_floor_counts_linear_head_and_attention_flops(tiny_lm):
    f = flops_per_token(tiny_lm)
    # 2 layers x (q, k, v, o: 32x32, 32x16, 32x16, 32x32; mlp 3 x 32x64) weight entries, x2
    assert f["linear"] == 2 * 2 * (32 * 32 * 2 + 32 * 16 * 2 + 3 * 32 * 64)
    assert f["lm_head"] == 2 * 259 * 32 and f["attention_per_pair"] == 4 * 2 * 32
    from oilbird.evaluation.teacher import TeacherStats
    st = TeacherStats(tokens_forwarded=10, rows_kept=2, attention_pairs=55)
    fl = floor_seconds(st, f, gflops=1.0)
    assert fl["flops"] == 10 * f["linear"] + 2 * f["lm_head"] + 55 * f["attention_per_pair"]
    assert fl["seconds"] == pytest.approx(fl["flops"] / 1e9)


def test_cache_and_window_are_refused_with_exact_in_one_line(capsys):
    from oilbird.__main__ import main
    assert main(["replay", "--exact", "--cache", "x", "--data", "agent-builtin"]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0


def _eos_dropped(turns):
    """The same conversation as a template-less rendering writes it: each recording ends with an
    EOS that the next prompt does not hold."""
    return [RecordedTurn(t.id, t.conversation, t.index, [i for i in t.prompt_ids if i != 2], t.recording_ids)
            for t in turns]


@pytest.mark.parametrize("windowed", [False, True])
def test_a_turn_that_does_not_extend_the_last_is_fed_on_the_cropped_cache(tiny_lm, windowed):
    """A template-less rendering's turns share all but the EOS: the rest is fed on the cache cropped
    back to the shared part, with a model whose sliding-window layers have long passed their
    window too; every row is a fresh forward's."""
    lm = make_windowed_lm() if windowed else tiny_lm
    system = [1] + list(range(3, 3 + 40))
    convs = [_eos_dropped(_conversation(f"c{i}", 4, seed=30 + i, system=system)) for i in range(2)]
    assert all(not b.prompt_ids[:len(a.prompt_ids) + len(a.recording_ids)] == a.prompt_ids + a.recording_ids
               for a, b in zip(convs[0], convs[0][1:]))
    forcer = TeacherForcer(Verifier(lm))
    v = Verifier(lm)
    for turns in convs:
        for t, (row, windowed_row) in zip(turns, _rows(forcer, turns)):
            _, fresh = v.prefill(t.prompt_ids + t.recording_ids, keep=len(t.recording_ids) + 1)
            assert _equal(row, fresh, exact=False) and not windowed_row
    every_turn_whole = sum(len(t.prompt_ids) + len(t.recording_ids) for turns in convs for t in turns)
    assert forcer.stats.tokens_forwarded < every_turn_whole / 2
    assert forcer.stats.shared_prefix_tokens >= len(system)


def test_a_windowed_cache_too_short_to_crop_starts_the_next_turn_afresh():
    """The third turn shares less with the second than the second's forward fed: its
    sliding-window layers have dropped what a crop that deep needs, so the turn is fed afresh
    (a full-attention cache would be cropped), and its rows are still a fresh forward's."""
    lm = make_windowed_lm(window=4)
    a = RecordedTurn("c#0", "c", 0, [1] + list(range(3, 40)), list(range(50, 60)) + [2])
    b = RecordedTurn("c#1", "c", 1, a.prompt_ids + a.recording_ids + [7, 8, 9], list(range(60, 65)) + [2])
    c = RecordedTurn("c#2", "c", 2, [1] + list(range(3, 20)) + [99] * 30, list(range(70, 75)) + [2])
    turns = [a, b, c]
    forcer = TeacherForcer(Verifier(lm), shared_prefix=False)
    rows = _rows(forcer, turns)
    for t, (row, _) in zip(turns, rows):
        _, fresh = Verifier(lm).prefill(t.prompt_ids + t.recording_ids, keep=len(t.recording_ids) + 1)
        assert _equal(row, fresh, exact=False)
    ids = [len(t.prompt_ids) + len(t.recording_ids) for t in turns]
    assert forcer.stats.tokens_forwarded == ids[1] + ids[2]
    full = TeacherForcer(Verifier(make_tiny_lm()), shared_prefix=False)
    _rows(full, turns)
    assert full.stats.tokens_forwarded == ids[1] + ids[2] - 18          # cropped to the 18 shared tokens
