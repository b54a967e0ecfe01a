"""The store over a long life (issue 7): eviction keeps both indexes consistent, quantized
states, save/load (and damaged files), tenants. Synthetic states; the tiny mock model only
for the decode checks."""
from __future__ import annotations

import hashlib
import json
import random
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oilbird.sources.base import DraftContext
from oilbird.sources.semantic import SemanticSource
from oilbird.sources.suffix import SuffixSource
from oilbird.store import SEP, Store, StoreError
from oilbird.presets import check_store_fits
from oilbird.store_files import StoreRegistry, load_store, save_store
from oilbird.suffix_index import PoolSuffixIndex, SuffixIndex

D = 8


def unit(v):
    v = np.asarray(v, dtype=np.float32)
    return v / np.linalg.norm(v)


def fill(store: Store, rid: str, tokens, states=None):
    for i, t in enumerate(tokens):
        store.add(rid, i, t, None if states is None else states[i])
    store.end_request()


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


# -- the pool's suffix index answers exactly like the reference index ------------------------
def test_pool_index_matches_reference_index():
    rng = random.Random(0)
    for _ in range(150):
        ref, pool = SuffixIndex(gram=4), PoolSuffixIndex(gram=4)
        for _ in range(rng.randrange(1, 8)):
            doc = [rng.randrange(5) for _ in range(rng.randrange(1, 30))]
            ref.extend(doc + [SEP])
            pool.add_document(doc)
        for _ in range(10):
            ctx = [rng.randrange(5) for _ in range(rng.randrange(1, 20))]
            ml = rng.choice([2, 4, 16])
            hits = ref.match(ctx, max_len=ml)
            assert pool.match(ctx, max_len=ml) == hits
            for p, _ in hits:
                assert pool.continuation(p, 7) == ref.continuation(p, 7)


# -- property: any sequence of adds, evictions, expiries, compactions --------------------------
class Model:
    """What the store should hold: the live requests, oldest first."""

    def __init__(self, max_records, max_requests, max_age_s):
        self.max_records, self.max_requests, self.max_age_s = max_records, max_requests, max_age_s
        self.live = []          # (rid, first record id, tokens, states, end time)
        self.next_id = 0

    def add(self, rid, tokens, states, now):
        self.live.append((rid, self.next_id, tokens, states, now))
        self.next_id += len(tokens)
        self.enforce(now)

    def enforce(self, now):
        def over():
            if not self.live:
                return False
            n = sum(len(r[2]) for r in self.live)
            return ((self.max_records is not None and n > self.max_records)
                    or (self.max_requests is not None and len(self.live) > self.max_requests)
                    or (self.max_age_s is not None and now - self.live[0][4] > self.max_age_s))
        while over():
            self.live.pop(0)

    def records(self):
        """record id -> (token, state, request id)"""
        out = {}
        for rid, first, toks, states, _ in self.live:
            for k, t in enumerate(toks):
                out[first + k] = (t, states[k], rid)
        return out


def check_consistent(store: Store, model: Model, rng: np.random.Generator):
    recs = model.records()
    assert len(store) == len(recs)
    if recs:
        assert store.first_record == min(recs) and store.next_record == max(recs) + 1
    for i, (t, _, rid) in recs.items():
        r = store.record(i)
        assert (r.token, r.request_id) == (t, rid)
    for dead in (store.first_record - 1, store.next_record):
        if dead >= 0:
            with pytest.raises(KeyError):
                store.record(dead)
            with pytest.raises(KeyError):
                store.next_tokens([dead])
    # the vectorised next-token lookup: the token step records on in the same request (the
    # model's), and what continuation(r, step, 1) reads
    ids = list(recs)
    for step in (0, 1, 2):
        want = [recs[i + step][0] if i + step in recs and recs[i + step][2] == recs[i][2] else -1 for i in ids]
        assert store.next_tokens(ids, step).tolist() == want
        if step:
            assert [(store.continuation(i, step, 1) or [-1])[0] for i in ids] == want
    # lexical key: exactly the reference index over the live requests, shifted to the live start
    ref = SuffixIndex(gram=store.gram)
    pos_to_rec = {}
    for rid, first, toks, _, _ in model.live:
        for k in range(len(toks)):
            pos_to_rec[len(ref) + k] = first + k
        ref.extend(list(toks) + [SEP])
    s0 = store.suffix.start
    for _ in range(6):
        ctx = rng.integers(0, 4, size=int(rng.integers(1, 10))).tolist()
        got = store.suffix.match(ctx, max_len=8)
        assert got == [(p + s0, L) for p, L in ref.match(ctx, max_len=8)]
        for p, L in got:
            rec = pos_to_rec[p - s0]                     # a live record...
            assert store.record(rec).token == store.suffix.token_at(p) == ctx[-1]  # ...same token
            assert store.suffix.continuation(p, 5) == ref.continuation(p - s0, 5)
    # semantic key: every hit is a live record with a state; the top-k is the brute-force one
    with_state = {i: s for i, (_, s, _) in recs.items() if s is not None}
    q = unit(rng.standard_normal(store.dim))
    hits = store.search(q, k=5)
    assert len(hits) == min(5, len(with_state))
    tol = 2e-3 if store.state_dtype == "fp16" else 1.5e-2
    for rec, sim in hits:
        assert rec in with_state
        assert store.record(rec).token == recs[rec][0]
        assert abs(sim - float(with_state[rec] @ q)) < tol
    if with_state:
        best = sorted((float(s @ q) for s in with_state.values()), reverse=True)[:5]
        assert np.allclose(sorted((s for _, s in hits), reverse=True), best, atol=2 * tol)
    # the root check's search: the top-k of only the records followed by a token, exactly
    for step in (0, 1, 2):
        tok = int(rng.integers(0, 4))
        ok = {i: v for i, v in with_state.items()
              if i + step in recs and recs[i + step][2] == recs[i][2] and recs[i + step][0] == tok}
        hits = store.search(q, k=3, followed_by=tok, step=step)
        assert len(hits) == min(3, len(ok)) and all(rec in ok for rec, _ in hits)
        best = sorted((float(v @ q) for v in ok.values()), reverse=True)[:3]
        assert np.allclose(sorted((s for _, s in hits), reverse=True), best, atol=2 * tol)
    assert store.index.ntotal - store._row_live == len(with_state)


op = st.one_of(
    st.tuples(st.just("add"), st.lists(st.integers(0, 3), min_size=1, max_size=12),
              st.floats(0, 1)),
    st.tuples(st.just("evict")),
    st.tuples(st.just("tick"), st.floats(0, 5)),
    st.tuples(st.just("compact")),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, min_size=1, max_size=25),
       max_records=st.one_of(st.none(), st.integers(0, 40)),
       max_requests=st.one_of(st.none(), st.integers(1, 5)),
       max_age_s=st.one_of(st.none(), st.floats(1, 8)),
       slack=st.sampled_from([0.0, 0.25, 2.0]),
       dtype=st.sampled_from(["fp16", "int8", "ivf-fp16", "ivf-int8"]),
       seed=st.integers(0, 2 ** 16))
def test_eviction_keeps_both_indexes_consistent(ops, max_records, max_requests, max_age_s,
                                                 slack, dtype, seed):
    rng = np.random.default_rng(seed)
    clock = Clock()
    # IVF probing all its lists is exhaustive, so it must agree with brute force exactly
    ivf = dtype.startswith("ivf-")
    store = Store(dim=D, state_dtype=dtype.removeprefix("ivf-"), max_records=max_records,
                  max_requests=max_requests, max_age_s=max_age_s, compact_slack=slack, clock=clock,
                  index_type="ivf" if ivf else "flat", ivf_nlist=4, ivf_nprobe=4, ivf_train_size=12)
    model = Model(max_records, max_requests, max_age_s)
    for k, o in enumerate(ops):
        if o[0] == "add":
            toks, p_state = o[1], o[2]
            states = [unit(rng.standard_normal(D)) if rng.random() < p_state + 0.3 else None
                      for _ in toks]
            fill(store, f"r{k}", toks, states)
            model.add(f"r{k}", toks, states, clock.now)
        elif o[0] == "evict":
            store.evict_oldest()
            if model.live:
                model.live.pop(0)
        elif o[0] == "tick":
            clock.now += o[1]
            store.expire()
            model.enforce(clock.now)
        else:
            store.compact()
        check_consistent(store, model, rng)


def test_eviction_is_physical_and_ids_are_never_reused():
    store = Store(dim=D, max_records=30, compact_slack=0.0)
    rng = np.random.default_rng(1)
    for r in range(50):
        fill(store, f"r{r}", [r % 7, 1, 2, 3, 4], [unit(rng.standard_normal(D)) for _ in range(5)])
    assert len(store) == 30 and store.n_requests == 6
    assert store.first_record == 220 and store.next_record == 250
    assert store.index.ntotal == 30 and len(store.suffix) == 36 and store._row_live == 0
    assert [store.record(i).request_id for i in (220, 249)] == ["r44", "r49"]
    with pytest.raises(KeyError):
        store.record(219)
    # memory does not grow with what was ever added, only with what is live
    before = store.nbytes()
    for r in range(50, 200):
        fill(store, f"r{r}", [r % 7, 1, 2, 3, 4], [unit(rng.standard_normal(D)) for _ in range(5)])
    assert store.nbytes() <= before * 1.5


def test_single_request_larger_than_capacity_is_not_kept():
    store = Store(dim=D, max_records=4)
    fill(store, "big", [1, 2, 3, 4, 5, 6], [unit(np.ones(D))] * 6)
    assert len(store) == 0 and store.search(unit(np.ones(D))) == []
    assert store.suffix.match([1, 2, 3]) == []


def test_retention_by_age_and_by_bytes():
    clock = Clock()
    store = Store(dim=D, max_age_s=60, clock=clock)
    fill(store, "old", [1, 2, 3])
    clock.now = 30
    fill(store, "new", [4, 5, 6])
    clock.now = 61
    assert store.expire() == 3 and [store.record(i).request_id for i in store.record_ids()] == ["new"] * 3
    clock.now = 100
    store.expire()
    assert len(store) == 0
    s = Store(dim=576, state_dtype="int8", max_bytes=10 * 636)
    assert s.record_nbytes == 576 + 60
    fill(s, "a", list(range(6)), [unit(np.ones(576))] * 6)
    fill(s, "b", list(range(6)), [unit(np.ones(576))] * 6)
    assert len(s) == 6 and s.record(s.first_record).request_id == "b"


# -- quantized states -------------------------------------------------------------------------------
def _clustered(rng, n, d, centers=20, noise=0.15):
    c = rng.standard_normal((centers, d))
    x = c[rng.integers(0, centers, n)] + noise * rng.standard_normal((n, d))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_int8_and_pq_search_agree_with_fp16():
    rng = np.random.default_rng(0)
    d = 32
    x = _clustered(rng, 600, d)
    stores = {k: Store(dim=d, state_dtype=k, pq_m=8, pq_nbits=6, pq_train_size=300)
              for k in ("fp16", "int8", "pq")}
    for s in stores.values():
        for r in range(6):
            fill(s, f"r{r}", list(range(100)), x[100 * r:100 * (r + 1)])
    assert stores["pq"].trained and stores["pq"].state_nbytes == 6
    assert stores["int8"].state_nbytes == d and stores["fp16"].state_nbytes == 2 * d
    q = _clustered(rng, 20, d)
    worst8 = worstpq = 0.0
    losspq = []
    for v in q:
        exact = x @ v
        best = float(exact.max())
        i8 = stores["int8"].search(v, 8)
        pq = stores["pq"].search(v, 8)
        assert abs(stores["fp16"].search(v, 1)[0][1] - best) < 2e-3
        assert abs(i8[0][1] - best) < 0.01
        # what the quantized top-1 really is, against the true best
        worst8 = max(worst8, best - float(exact[i8[0][0]]))
        worstpq = max(worstpq, best - float(exact[pq[0][0]]))
        losspq.append(best - float(exact[pq[0][0]]))
    # int8 is as good as exact; PQ (6 B per state here) finds a near neighbour
    assert worst8 < 0.01 and worstpq < 0.15 and np.mean(losspq) < 0.04


def test_the_root_checks_search_on_pq_and_ivf_and_where_nothing_follows():
    """``followed_by`` on a trained PQ store (a one-list IVF: a hash-set selector) returns every
    record followed by the token when k allows, and only those; on an IVF probing fewer lists
    only those; a token never seen, a store without states and a wrong-sized query behave."""
    rng = np.random.default_rng(5)
    d = 32
    x = _clustered(rng, 900, d)
    toks = rng.integers(0, 40, 900)
    pq = Store(dim=d, state_dtype="pq", pq_m=8, pq_nbits=6, pq_train_size=300)
    ivf = Store(dim=d, state_dtype="int8", index_type="ivf", ivf_nlist=8, ivf_nprobe=2, ivf_train_size=300)
    for s in (pq, ivf):
        for r in range(9):
            fill(s, f"r{r}", toks[100 * r:100 * (r + 1)].tolist(), x[100 * r:100 * (r + 1)])
    assert pq.trained and pq._is_ivf() and ivf.trained
    for tok in (3, 17):
        want = {i for i in range(899) if i % 100 != 99 and toks[i + 1] == tok}     # same request only
        got = pq.search(x[0], k=len(want) + 5, followed_by=tok)
        assert {r for r, _ in got} == want
        assert {r for r, _ in ivf.search(x[0], k=5, followed_by=tok)} <= want
    assert pq.search(x[0], k=8, followed_by=999) == []
    bare = Store(dim=d)
    fill(bare, "a", [1, 2, 3])                       # records without states: nothing to rank
    assert bare.search(x[0], 8, followed_by=2) == []
    with pytest.raises(ValueError, match="dims"):
        pq.search(x[0][:5], 8, followed_by=999)


def test_ivf_trains_once_then_searches_only_live_records():
    rng = np.random.default_rng(2)
    d = 32
    x = _clustered(rng, 2000, d)
    s = Store(dim=d, state_dtype="int8", index_type="ivf", ivf_nlist=16, ivf_nprobe=4,
              ivf_train_size=600, max_records=1200, compact_slack=1.0)
    for r in range(20):
        fill(s, f"r{r}", list(range(100)), x[100 * r:100 * (r + 1)])
        assert s.trained == (r >= 5)
    assert s._is_ivf() and s._row_live > 0          # dead rows not yet compacted...
    for v in _clustered(rng, 30, d):
        hits = s.search(v, 8)
        assert hits and all(s.first_record <= r < s.next_record for r, _ in hits)  # ...never found
        best = float((x[s.first_record:s.next_record] @ v).max())
        assert best - hits[0][1] < 0.05
    assert np.allclose(s.states.astype(np.float32), x[s.first_record:s.next_record], atol=5e-3)


def test_bytes_per_record_at_the_default_hidden_size():
    # honest live bytes per token at d = 576: state code + row map 4 + position 4 + token 4
    # + 4 n-gram entries x 12
    assert Store(dim=576).record_nbytes == 1152 + 60
    assert Store(dim=576, state_dtype="int8").record_nbytes == 576 + 60
    assert Store(dim=576, state_dtype="pq").record_nbytes == 72 + 8 + 60   # + id in its IVF list
    assert Store(dim=576, state_dtype="int8", index_type="ivf").record_nbytes == 576 + 8 + 60


# -- persistence ------------------------------------------------------------------------------------------
def _busy_store(dtype="fp16", seed=0, **kw):
    rng = np.random.default_rng(seed)
    d = 32
    ivf = dtype.startswith("ivf-")
    s = Store(dim=d, tenant="acme", state_dtype=dtype.removeprefix("ivf-"), max_records=700, pq_m=8,
              pq_nbits=6, pq_train_size=200, index_type="ivf" if ivf else "flat", ivf_nlist=8,
              ivf_nprobe=3, ivf_train_size=300, **kw)
    x = _clustered(rng, 1200, d)
    for r in range(12):
        toks = rng.integers(0, 30, 100).tolist()
        states = [x[100 * r + i] if i % 9 else None for i in range(100)]
        fill(s, f"req-{r}", toks, states)
    return s, rng


def _answers(s: Store, rng):
    qs = _clustered(rng, 10, s.dim)
    ctxs = [rng.integers(0, 30, 6).tolist() for _ in range(10)]
    return ([s.search(q, 8) for q in qs], [s.suffix.match(c) for c in ctxs],
            [s.record(i) for i in s.record_ids()], [s.continuation(i, 2, 10) for i in s.record_ids()])


@pytest.mark.parametrize("dtype", ["fp16", "int8", "pq", "ivf-int8"])
def test_save_load_round_trip(tmp_path, dtype):
    s, _ = _busy_store(dtype)
    assert s.evicted_records > 0
    path = save_store(s, tmp_path / "acme.oilstore")
    t = load_store(path, tenant="acme")
    assert t.config() == s.config() and len(t) == len(s) and t.first_record == s.first_record
    for hits in _answers(t, np.random.default_rng(4))[0]:      # evicted rows are never found
        assert hits and all(t.first_record <= r < t.next_record for r, _ in hits)
    assert _answers(t, np.random.default_rng(5)) == _answers(s, np.random.default_rng(5))
    # and both keep evolving identically
    for st_ in (s, t):
        r = np.random.default_rng(3)
        fill(st_, "after", r.integers(0, 30, 80).tolist(), list(_clustered(r, 80, s.dim)))
    assert _answers(t, np.random.default_rng(6)) == _answers(s, np.random.default_rng(6))


def _rewrite(path, out, edit):
    """Copy a store file, letting ``edit(name, bytes) -> bytes`` change members."""
    with zipfile.ZipFile(path) as z, zipfile.ZipFile(out, "w") as w:
        for name in z.namelist():
            w.writestr(name, edit(name, z.read(name)))
    return out


def test_damaged_files_give_one_clear_error_and_never_half_load(tmp_path):
    s, _ = _busy_store("int8")
    good = save_store(s, tmp_path / "good.oilstore")
    raw = good.read_bytes()
    reg = StoreRegistry(dim=32, state_dtype="int8")
    current = reg.load_tenant("acme", good)
    before = _answers(current, np.random.default_rng(1))

    cases = {}
    for frac in (0.3, 0.6, 0.9):                         # one flipped byte in the payload
        b = bytearray(raw)
        b[int(len(b) * frac)] ^= 0x40
        cases[f"flip{frac}"] = bytes(b)
    for frac in (0.0, 0.1, 0.5, 0.99):                   # truncated
        cases[f"trunc{frac}"] = raw[:int(len(raw) * frac)]
    cases["garbage"] = b"not a store at all" * 10
    for name, data in cases.items():
        p = tmp_path / f"{name}.oilstore"
        p.write_bytes(data)
        with pytest.raises(StoreError) as e:
            reg.load_tenant("acme", p)
        assert str(p) in str(e.value) and e.value.reason
    # a consistent, correctly signed file from a newer format version
    h = json.loads(zipfile.ZipFile(good).read("header.json"))
    h["version"] = 99
    hb = json.dumps(h).encode()
    newer = _rewrite(good, tmp_path / "v99.oilstore", lambda n, b: {
        "header.json": hb, "header.sha256": hashlib.sha256(hb).hexdigest().encode()}.get(n, b))
    with pytest.raises(StoreError, match="version 99 is not supported"):
        reg.load_tenant("acme", newer)
    zeroed = _rewrite(good, tmp_path / "zeroed.oilstore",
                      lambda n, b: bytes(len(b)) if n == "tokens.npy" else b)
    with pytest.raises(StoreError, match="checksum mismatch in 'tokens.npy'"):
        reg.load_tenant("acme", zeroed)
    with pytest.raises(StoreError, match="no such file"):
        reg.load_tenant("acme", tmp_path / "missing.oilstore")
    with pytest.raises(StoreError, match="holds tenant 'acme'"):
        reg.load_tenant("globex", good)
    # after all that, the registry still holds the store it had, unchanged
    assert reg.get("acme") is current and "globex" not in reg
    assert _answers(current, np.random.default_rng(1)) == before


def test_save_is_atomic(tmp_path, monkeypatch):
    s, _ = _busy_store()
    p = save_store(s, tmp_path / "s.oilstore")
    first = p.read_bytes()
    fill(s, "more", [1, 2, 3])

    def broken(*a, **k):
        raise RuntimeError("disk gone")
    import faiss
    monkeypatch.setattr(faiss, "serialize_index", broken)
    with pytest.raises(RuntimeError):
        save_store(s, p)
    # the earlier file is untouched and no temporary file is left behind
    assert p.read_bytes() == first and list(tmp_path.iterdir()) == [p]
    monkeypatch.undo()

    def no_rename(*a, **k):
        raise OSError("read-only file system")
    monkeypatch.setattr("oilbird.store_files.os.replace", no_rename)
    with pytest.raises(StoreError, match="cannot write"):     # failing after the temp file
        save_store(s, p)
    assert p.read_bytes() == first and list(tmp_path.iterdir()) == [p]
    monkeypatch.undo()
    save_store(s, p)
    assert load_store(p).record(s.next_record - 1).token == 3


def test_save_syncs_the_file_and_its_folder_and_a_full_disk_leaves_nothing_behind(tmp_path, monkeypatch):
    """save fsyncs the new file before the rename and the folder after it (a power cut leaves
    the old file or the new one); a write that fails (here: the disk fills at the fsync, or the
    folder refuses the temp file) is one StoreError, the temp file goes and the old file stays."""
    import errno
    import os
    import stat
    s, _ = _busy_store()
    p = save_store(s, tmp_path / "s.oilstore")
    first = p.read_bytes()
    synced = []
    real_fsync = os.fsync

    def record(fd):
        synced.append("folder" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)
    monkeypatch.setattr(os, "fsync", record)
    fill(s, "more", [1, 2, 3])
    save_store(s, p)
    assert synced == ["file", "folder"] and load_store(p).record(s.next_record - 1).token == 3
    second = p.read_bytes()

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "fsync", full)
    fill(s, "yet more", [4, 5])
    with pytest.raises(StoreError, match="cannot write [(]No space left on device[)]"):
        save_store(s, p)
    assert p.read_bytes() == second and list(tmp_path.iterdir()) == [p]
    monkeypatch.undo()

    def refused(*a, **k):
        raise PermissionError(errno.EACCES, "Permission denied")
    monkeypatch.setattr("oilbird.store_files.tempfile.mkstemp", refused)
    with pytest.raises(StoreError, match="cannot write [(]Permission denied[)]"):
        save_store(s, p)
    assert p.read_bytes() == second != first and list(tmp_path.iterdir()) == [p]


# -- tenants ------------------------------------------------------------------------------------------------
def test_registry_keeps_tenants_apart_through_both_keys_and_files(tmp_path):
    secret = [900, 901, 902, 903]
    frame = [10, 11, 12, 13]
    reg = StoreRegistry(dim=4, max_records=1000)
    st_a = [unit([1, i, 0, 0]) for i in range(9)]
    fill(reg.get("a"), "a1", frame + secret + [14], st_a)
    fill(reg.get("b"), "b1", frame + [500, 501, 502, 503, 14], st_a)   # same states, other text
    assert reg.get("a") is not reg.get("b")

    def drafts(store):
        ctx = DraftContext(tokens=[1] + frame, request_id="q", lexical_match_len=4,
                           query_state=unit([1, 3, 0, 0]))
        out = set()
        for src in (SuffixSource(store), SemanticSource(store)):
            src.start_request(ctx.tokens, "q")
            out |= {t for c in src.propose(ctx, 11).chains for t in c.tokens}
        return out

    assert set(secret) <= drafts(reg.get("a"))          # the probe does reach a's secret...
    assert drafts(reg.get("b")) and not drafts(reg.get("b")) & set(secret)   # ...never from b
    assert not drafts(reg.get("c")) & set(secret)       # nor from a new tenant
    # files: each tenant's own file, and a file never loads under another tenant's name
    reg.save(tmp_path)
    back = StoreRegistry.load(tmp_path, dim=4)
    assert back.tenants() == ["a", "b", "c"]
    assert not drafts(back.get("b")) & set(secret) and set(secret) <= drafts(back.get("a"))
    fa, fb = StoreRegistry.file_for(tmp_path, "a"), StoreRegistry.file_for(tmp_path, "b")
    fb.write_bytes(fa.read_bytes())                      # a's file planted under b's name
    with pytest.raises(StoreError, match="holds tenant 'a', not 'b'"):
        StoreRegistry.load(tmp_path, dim=4)


def test_a_dropped_tenant_stays_dropped_and_new_bounds_apply_on_load(tmp_path):
    reg = StoreRegistry(dim=4)
    for t in ("alice", "bob"):
        for r in range(4):
            fill(reg.get(t), f"{t}{r}", [10 + r] * 10, [unit([1, r, 0, 0])] * 10)
    reg.save(tmp_path)
    reg.drop("alice")
    reg.save(tmp_path)
    assert StoreRegistry.load(tmp_path, dim=4).tenants() == ["bob"]            # not back from its file
    back = StoreRegistry.load(tmp_path, dim=4, max_records=25)                  # a smaller capacity now
    assert len(back.get("bob")) == 20 and back.get("bob").max_records == 25     # the two oldest requests evicted
    with pytest.raises(StoreError, match="saved with state_dtype='fp16', asked for 'int8'"):
        StoreRegistry.load(tmp_path, dim=4, state_dtype="int8")
    assert StoreRegistry.load(tmp_path, dim=4, compact_slack=0.5).get("bob").compact_slack == 0.5   # tuning
    # another registry saving into the same folder leaves the tenants it never held alone
    other = StoreRegistry(dim=4)
    fill(other.get("carol"), "c0", [7] * 3, [unit([0, 0, 1, 0])] * 3)
    other.save(tmp_path)
    assert StoreRegistry.load(tmp_path, dim=4).tenants() == ["bob", "carol"]


def test_a_requests_records_fill_a_gap_stop_at_its_output_and_never_stay_half_queued():
    """The decoder's and the vLLM proposer's bookkeeping (oilbird.request_records): a step
    without states costs only its tokens' states; what lies past the (cut) output is dropped; a
    request the store refuses leaves nothing queued to block the next one."""
    from oilbird.request_records import RequestRecords
    e = np.eye(4, dtype=np.float32)
    out = [5, 6, 7, 8, 9]
    rr = RequestRecords("a")
    rr.record(out, -1, [e[0], e[1], e[2]])     # the root was the prompt's last token: positions 0, 1
    rr.record(out, 3, [e[3], e[0]])            # the step before had no states: position 2 without one
    rr.record(out, 2, [e[2], e[3]])            # already queued: skipped
    assert [(p, t, x is not None) for p, t, x in rr.records] == [(0, 5, True), (1, 6, True), (2, 7, False),
                                                                 (3, 8, True), (4, 9, True)]
    s = Store(dim=4)
    rr.close(s, out[:3])                       # the output was cut after its third token
    assert [s.record(i).token for i in s.record_ids()] == [5, 6, 7] and s.index.ntotal == 2
    assert not rr.records and s.n_requests == 1
    bad = RequestRecords("b")
    bad.record([1, 2], 0, [e[0], np.ones(3, np.float32)])     # a state of the wrong size
    with pytest.raises(ValueError, match="3 dims"):
        bad.close(s, [1, 2])
    RequestRecords("c").close(s, [4])          # not refused for b's leftovers
    assert [s.record(i).token for i in s.record_ids()] == [5, 6, 7, 4] and s.n_requests == 2


def test_records_of_two_requests_are_never_mixed_or_lost():
    s = Store(dim=4)
    s.add("p", 0, 5, unit([1, 0, 0, 0]))
    with pytest.raises(ValueError, match="request 'q' adds records while 'p' is still queued"):
        s.add("q", 0, 6, unit([0, 1, 0, 0]))
    s.end_request()
    assert len(s) == 1 and s.record(0).token == 5                     # p's record survived
    fill(s, "q", [6], [unit([0, 1, 0, 0])])
    # a raw (not unit) query is normalised: a cosine, at most 1
    (rec, sim), = s.search(np.array([0, 7.0, 0, 0]), k=1)
    assert rec == 1 and sim == pytest.approx(1.0, abs=1e-3)


def test_decoding_two_tenants_capped_int8_is_lossless_and_isolated(tiny_lm):
    from oilbird.audit import compare
    from oilbird.decoding import autoregressive
    from oilbird.drafter import TreeConfig
    from oilbird.presets import make_decoder
    from oilbird.verifier import Verifier

    v = Verifier(tiny_lm)
    dim = int(tiny_lm.model.config.hidden_size)
    reg = StoreRegistry(dim=dim, state_dtype="int8", max_records=40)
    rng = random.Random(3)
    base = [rng.randrange(3, 259) for _ in range(10)]
    decs = {t: make_decoder("oilbird", v, store=reg.get(t), tree=TreeConfig(budget=12, semantic_budget=4))
            for t in ("a", "b")}
    own: dict[str, set] = {"a": set(), "b": set()}
    seen = 0
    for i in range(3):
        ids = [1] + base + [rng.randrange(3, 259)] + base[:5]
        ref = autoregressive(v, ids, 24).output_ids
        for t in ("a", "b"):
            rid = f"{t}-{i}"
            tr = decs[t].run(rid, ids, 24)
            assert compare(ref, tr.output_ids).lossless
            own[t].add(rid)
            for c in tr.cycles:       # every neighbour came from this tenant's own requests
                for nb in c.neighbours:
                    assert nb.request_id in own[t]
                    assert nb.agreement >= 1           # root-checked: it agrees at least on the root
                    seen += 1
            assert len(reg.get(t)) <= 40
    assert seen and reg.get("a").evicted_records > 0 and reg.get("b").evicted_records > 0


def test_a_continuation_never_reads_into_the_next_request():
    """From a request's last record, a continuation that starts two tokens on (the semantic
    key's lag) is empty, not the next request's first token; the vectorised lookup agrees."""
    store = Store(dim=D)
    fill(store, "a", [1, 2, 3], [None] * 3)
    fill(store, "b", [7, 8], [None] * 2)
    assert store.continuation(2, 2, 4) == [] and store.continuation(1, 2, 4) == []
    assert store.continuation(0, 2, 4) == [3] and store.continuation(3, 1, 4) == [8]
    assert store.next_tokens([0, 1, 2, 3, 4], 2).tolist() == [3, -1, -1, -1, -1]
    assert store.next_tokens([0, 3], 0).tolist() == [1, 7]          # step 0: the record's own token
    with pytest.raises(ValueError, match="step"):
        store.next_tokens([0], -1)


@pytest.mark.parametrize("bound, value", [("max_age_s", float("inf")), ("max_age_s", float("nan")),
                                          ("max_bytes", 10 ** 30), ("max_records", -1), ("max_records", 2.5),
                                          ("max_requests", "5"), ("max_records", True)])
def test_a_bound_a_store_file_could_not_hold_is_refused_at_once(bound, value):
    with pytest.raises(ValueError, match=bound):
        Store(dim=4, **{bound: value})


def test_numpy_bounds_are_kept_as_plain_numbers_and_save(tmp_path):
    s = Store(dim=4, max_records=np.int64(100), max_age_s=np.float32(60))
    fill(s, "r0", [5, 6, 7], [unit([1, 0, 0, 0])] * 3)
    assert (type(s.max_records), type(s.max_age_s)) == (int, float)
    back = load_store(save_store(s, tmp_path / "s.oilstore"))
    assert back.max_records == 100 and back.max_age_s == 60.0 and len(back) == 3


def test_a_store_that_could_not_load_back_is_not_saved_and_the_old_file_stays(tmp_path):
    path = tmp_path / "s.oilstore"
    old = Store(dim=4)
    fill(old, "r0", [5, 6, 7], [unit([1, 0, 0, 0])] * 3)
    save_store(old, path)
    bad = Store(dim=4)
    fill(bad, "r1", [8, 9], [unit([0, 1, 0, 0])] * 2)
    bad.max_age_s = float("inf")                       # set behind the constructor's back
    with pytest.raises(StoreError, match="not plain JSON"):
        save_store(bad, path)
    bad.max_age_s = None
    bad._posn.extend([3])                              # tables that no longer fit together
    with pytest.raises(StoreError, match="inconsistent"):
        save_store(bad, path)
    assert load_store(path).record(0).request_id == "r0" and list(tmp_path.iterdir()) == [path]


def test_a_failed_end_request_changes_nothing_and_can_be_retried():
    s = Store(dim=4)
    fill(s, "r0", [5, 6, 7], [unit([1, 0, 0, 0])] * 3)
    before = (len(s), s.n_requests, s.index.ntotal, len(s.suffix.live_tokens()))

    class Failing:                                     # the faiss index, whose add fails once
        def __init__(self, index):
            self.inner, self.fail = index, True

        def add(self, x):
            if self.fail:
                self.fail = False
                raise MemoryError("no room")
            self.inner.add(x)

        def __getattr__(self, name):
            return getattr(self.inner, name)
    real, s.index = s.index, Failing(s.index)
    for i, t in enumerate([8, 9]):
        s.add("r1", i, t, unit([0, 1, 0, 0]))
    with pytest.raises(MemoryError):
        s.end_request()
    assert (len(s), s.n_requests, real.ntotal, len(s.suffix.live_tokens())) == before
    s.end_request()                                    # still queued: the retry stores it whole
    s.index = real
    assert len(s) == 5 and s.n_requests == 2 and real.ntotal == 5
    assert [s.record(i).token for i in (3, 4)] == [8, 9] and s.record(4).request_id == "r1"


@pytest.mark.parametrize("dtype", ["fp16", "ivf-int8"])
def test_a_token_index_failure_takes_the_requests_states_back_out(dtype):
    s, _ = _busy_store(dtype)
    before = (len(s), s.n_requests, s.index.ntotal, len(s.suffix.live_tokens()))
    real = s.suffix.add_document

    def failing(tokens):
        s.suffix.add_document = real
        raise MemoryError("no room")
    s.suffix.add_document = failing
    for i, t in enumerate([8, 9, 10]):
        s.add("late", i, t, unit(np.arange(s.dim) + i))
    with pytest.raises(MemoryError):
        s.end_request()
    assert (len(s), s.n_requests, s.index.ntotal, len(s.suffix.live_tokens())) == before
    s.end_request()                                    # still queued: the retry stores it whole
    assert s.record(s.next_record - 1).token == 10         # (the bound of 700 records evicts old ones)
    assert load_store(save_store(s, Path(tempfile.mkdtemp()) / "s.oilstore")).n_requests == s.n_requests


@pytest.mark.parametrize("kw", [{"state_dtype": "pq", "pq_m": 4, "pq_nbits": 8, "pq_train_size": 10},
                                {"state_dtype": "fp16", "pq_m": 8}, {"state_dtype": "ivf-int8"}])
def test_a_registry_loads_its_own_files_with_the_options_it_saved_them_with(tmp_path, kw):
    kw = dict(kw)
    if kw.get("state_dtype") == "ivf-int8":
        kw = {"state_dtype": "int8", "index_type": "ivf", "ivf_nlist": 4, "ivf_train_size": 1}
    reg = StoreRegistry(dim=8, **kw)
    fill(reg.get("alice"), "a0", [5, 6, 7], [unit(np.arange(8) + k) for k in range(3)])
    reg.save(tmp_path)
    back = StoreRegistry.load(tmp_path, dim=8, **kw)
    assert len(back.get("alice")) == 3


def test_a_store_of_another_model_is_refused_by_the_decoder(tiny_lm):
    from oilbird.presets import make_decoder
    from oilbird.verifier import Verifier
    v = Verifier(tiny_lm)
    with pytest.raises(ValueError, match="16-dimensional states and the model's hidden size is 32"):
        make_decoder("oilbird", v, store=Store(dim=16))
    other = Store(dim=32)
    fill(other, "r0", [5, 100_000], None)
    with pytest.raises(ValueError, match="token id 100000, beyond the model's vocabulary of 259"):
        make_decoder("oilbird", v, store=other)
    fill(other := Store(dim=32), "r0", [5, 258], None)
    assert make_decoder("oilbird", v, store=other).store is other


def test_a_store_keyed_by_another_layer_is_refused_and_the_label_survives_its_file(tiny_lm, tmp_path):
    """Hidden size and vocabulary can agree while the states do not (another key layer, another
    architecture or depth): a store the decoder made carries the model's state_key through its
    file, and a decoder keyed otherwise refuses it; an unlabelled store is checked by its shape
    alone; the model's name is for messages only."""
    from dataclasses import replace
    from oilbird.presets import make_decoder
    from oilbird.verifier import Verifier
    key = {"model": "tiny-llama", "model_type": "llama", "num_hidden_layers": 2, "state_layer": 2}
    assert tiny_lm.state_key == key
    dec = make_decoder("oilbird", Verifier(tiny_lm))
    assert dec.store.state_key == key
    fill(dec.store, "r0", [5, 6, 7], [unit(np.arange(32) + k) for k in range(3)])
    back = load_store(save_store(dec.store, tmp_path / "s.oilstore"))
    assert back.state_key == key
    assert make_decoder("oilbird", Verifier(replace(tiny_lm, name="renamed")), store=back).store is back
    other_layer = replace(tiny_lm, state_layer=1)
    with pytest.raises(ValueError, match="tiny-llama .llama, 2 layers., key layer 2, and this model keys with "
                                         "those of tiny-llama .llama, 2 layers., key layer 1: a store serves the "
                                         "model and key layer"):
        make_decoder("oilbird", Verifier(other_layer), store=back)
    assert len(back) == 3                                     # refused, not touched
    for field, value in (("num_hidden_layers", 3), ("model_type", "qwen2")):
        with pytest.raises(ValueError, match="a store serves the model and key layer"):
            check_store_fits(back, 32, 259, {**key, field: value})
    unlabelled = Store(dim=32)
    fill(unlabelled, "r0", [5, 6], None)
    assert make_decoder("oilbird", Verifier(other_layer), store=unlabelled).store is unlabelled
    for bad in ({"model": "m"}, {**key, "state_layer": "2"}, {**key, "state_layer": True}, "layer 2"):
        with pytest.raises(ValueError, match="state_key must be None or a model's LoadedModel.state_key"):
            Store(dim=32, state_key=bad)


def test_a_registry_checks_and_labels_the_stores_it_loads(tiny_lm, tmp_path):
    """A registry given a state_key refuses a saved store of another key layer (on load and on
    load_tenant), loads one whose model name alone differs, and labels an unlabelled one, which is
    then saved with the label."""
    from dataclasses import replace
    key = tiny_lm.state_key
    reg = StoreRegistry(dim=32, state_key=key)
    fill(reg.get("alice"), "a0", [5, 6], [unit(np.arange(32) + k) for k in range(2)])
    reg.save(tmp_path / "reg")
    with pytest.raises(StoreError, match="key layer 2, and this model keys with those of .* key layer 1"):
        StoreRegistry.load(tmp_path / "reg", dim=32, state_key=replace(tiny_lm, state_layer=1).state_key)
    assert StoreRegistry.load(tmp_path / "reg", dim=32, state_key={**key, "model": "other name"}).tenants() == ["alice"]
    assert StoreRegistry.load(tmp_path / "reg", dim=32).get("alice").state_key == key
    old = StoreRegistry(dim=32)                               # unlabelled, as older files are
    fill(old.get("bob"), "b0", [5, 6], [unit(np.arange(32) + k) for k in range(2)])
    old.save(tmp_path / "old")
    labelled = StoreRegistry.load(tmp_path / "old", dim=32, state_key=key)
    assert labelled.get("bob").state_key == key
    assert labelled.save(tmp_path / "old") == [StoreRegistry.file_for(tmp_path / "old", "bob")]
    assert load_store(StoreRegistry.file_for(tmp_path / "old", "bob")).state_key == key
    other = StoreRegistry(dim=32, state_key=replace(tiny_lm, state_layer=1).state_key)
    with pytest.raises(StoreError, match="a store serves the model and key layer"):
        other.load_tenant("bob", StoreRegistry.file_for(tmp_path / "old", "bob"))
    assert "bob" not in other


def test_bad_arguments_to_the_store_files_get_one_clear_error(tmp_path):
    """A mistyped folder is not an empty registry, a folder is not a store file, None is not a
    tenant (every caller passing None would share one store), and odd types are refused by name."""
    (tmp_path / "a-file").write_text("x")
    for call, error, said in (
            (lambda: StoreRegistry.load(tmp_path / "mistyped", dim=8), StoreError, "no such folder"),
            (lambda: StoreRegistry.load(tmp_path / "a-file", dim=8), StoreError, "is a file, not a registry's folder"),
            (lambda: load_store(tmp_path), StoreError, "is a folder, not a store file"),
            (lambda: load_store(None), StoreError, "path must be a non-empty str or Path"),
            (lambda: save_store(Store(8), None), StoreError, "path must be a non-empty str or Path"),
            (lambda: StoreRegistry(8).get(None), ValueError, "tenant must be a non-empty string, not None"),
            (lambda: StoreRegistry(8).save(tmp_path, overwrite=None), ValueError, "overwrite takes tenant names"),
            (lambda: StoreRegistry(8).save(tmp_path, overwrite=[1]), ValueError, "overwrite takes tenant names"),
            (lambda: StoreRegistry("x"), ValueError, "dim .the model's hidden size. must be a whole number >= 1"),
            (lambda: Store("8"), ValueError, "must be a whole number >= 1, not '8'"),
            (lambda: Store(0), ValueError, "must be a whole number >= 1, not '0'")):
        with pytest.raises(error, match=said):
            call()
    assert StoreRegistry.load(tmp_path, dim=8).tenants() == []        # a folder without stores: empty
    assert sorted(f.name for f in tmp_path.iterdir()) == ["a-file"]


def test_two_registries_on_one_folder_never_overwrite_each_others_work(tmp_path):
    """Two registries that loaded the same folder: each saves only the tenants it changed, so
    changes to different tenants both land; a save over a tenant the other saved since, or
    that the other dropped, or a tenant made afresh beside its saved file is refused, with
    nothing written; after loading again the save keeps both versions' work."""
    reg = StoreRegistry(dim=4)
    fill(reg.get("alice"), "a0", [5] * 3, [unit([1, 0, 0, 0])] * 3)
    fill(reg.get("bob"), "b0", [6] * 3, [unit([0, 1, 0, 0])] * 3)
    reg.save(tmp_path)
    a, b = StoreRegistry.load(tmp_path, dim=4), StoreRegistry.load(tmp_path, dim=4)
    fill(a.get("alice"), "a1", [7] * 2, [unit([1, 1, 0, 0])] * 2)
    assert a.save(tmp_path) == [StoreRegistry.file_for(tmp_path, "alice")]      # only what changed
    fill(b.get("bob"), "b1", [8] * 2, [unit([0, 1, 1, 0])] * 2)
    b.save(tmp_path)                                   # another tenant: both land
    back = StoreRegistry.load(tmp_path, dim=4)
    assert (back.get("alice").n_requests, back.get("bob").n_requests) == (2, 2)
    # both change alice: the later save is refused, and nothing of it is written
    fill(b.get("alice"), "a2", [9] * 2, [unit([1, 0, 1, 0])] * 2)
    fill(b.get("bob"), "b2", [9] * 2, [unit([0, 0, 1, 1])] * 2)
    before = {f.name: f.read_bytes() for f in tmp_path.glob("*.oilstore")}
    with pytest.raises(StoreError, match="'alice'.s file changed since this registry read or wrote it"):
        b.save(tmp_path)
    assert {f.name: f.read_bytes() for f in tmp_path.glob("*.oilstore")} == before     # not even bob's
    # a drop by one registry is not undone by another's save of what it loaded before
    c, d = StoreRegistry.load(tmp_path, dim=4), StoreRegistry.load(tmp_path, dim=4)
    c.drop("bob")
    c.save(tmp_path)
    fill(d.get("bob"), "b3", [4] * 2, [unit([0, 1, 0, 1])] * 2)
    fill(d.get("alice"), "a4", [4] * 2, [unit([1, 0, 0, 1])] * 2)
    with pytest.raises(StoreError, match=r"was deleted since this registry read it .* drop\(\) it here too"):
        d.save(tmp_path)
    assert StoreRegistry.load(tmp_path, dim=4).tenants() == ["alice"]
    d.drop("bob")                                      # agreed: the rest of d's work saves
    d.save(tmp_path)
    assert StoreRegistry.load(tmp_path, dim=4).tenants() == ["alice"]
    assert StoreRegistry.load(tmp_path, dim=4).get("alice").n_requests == 3
    e = StoreRegistry.load(tmp_path, dim=4)
    fill(e.get("carol"), "c0", [4] * 2, [unit([0, 0, 0, 1])] * 2)
    e.drop("alice")
    e.get("alice")                                     # made afresh after the drop: a new tenant
    fill(e.get("alice"), "n0", [2] * 2, [unit([1, 0, 0, 0])] * 2)
    e.save(tmp_path)
    assert StoreRegistry.load(tmp_path, dim=4).get("alice").n_requests == 1
    # a tenant made afresh beside its saved file
    fresh = StoreRegistry(dim=4)
    fresh.get("alice")
    with pytest.raises(StoreError, match="exists and was never read by this registry"):
        fresh.save(tmp_path)
    assert StoreRegistry.load(tmp_path, dim=4).get("alice").n_requests == 1
    fresh.load_tenant("alice", StoreRegistry.file_for(tmp_path, "alice"))
    fill(fresh.get("alice"), "a3", [3] * 2, [unit([1, 0, 0, 1])] * 2)
    fresh.save(tmp_path)                               # read first: saved
    assert StoreRegistry.load(tmp_path, dim=4).get("alice").n_requests == 2


def test_a_refused_save_can_keep_this_registrys_version_when_asked(tmp_path):
    """save(overwrite=...) is the third way out of a refusal (beside load_tenant and drop): the
    named tenants' versions here replace (or, dropped, delete) whatever is there; the others are
    still checked, and a refusal still writes nothing."""
    reg = StoreRegistry(dim=4)
    fill(reg.get("alice"), "a0", [5] * 3, [unit([1, 0, 0, 0])] * 3)
    fill(reg.get("bob"), "b0", [6] * 3, [unit([0, 1, 0, 0])] * 3)
    reg.save(tmp_path)
    a, b = StoreRegistry.load(tmp_path, dim=4), StoreRegistry.load(tmp_path, dim=4)
    for r in (a, b):
        fill(r.get("alice"), f"a-{id(r)}", [7] * 2, [unit([1, 1, 0, 0])] * 2)
    fill(a.get("bob"), "b1", [8] * 2, [unit([0, 1, 1, 0])] * 2)
    a.save(tmp_path)
    fill(b.get("bob"), "b2", [9] * 2, [unit([0, 0, 1, 1])] * 2)
    with pytest.raises(StoreError, match=r"save\(\.\.\., overwrite=\{'alice'\}\) to replace it with this version"):
        b.save(tmp_path)
    before = {f.name: f.read_bytes() for f in tmp_path.glob("*.oilstore")}
    with pytest.raises(StoreError, match="tenant 'bob'"):
        b.save(tmp_path, overwrite="alice")            # bob still conflicts: nothing written
    assert {f.name: f.read_bytes() for f in tmp_path.glob("*.oilstore")} == before
    b.save(tmp_path, overwrite={"alice", "bob"})
    back = StoreRegistry.load(tmp_path, dim=4)
    assert [q for q in back.get("alice").snapshot().request_ids] == ["a0", f"a-{id(b)}"]
    assert back.get("bob").snapshot().request_ids == ["b0", "b2"]
    fresh = StoreRegistry(dim=4)                       # never read the file, then drops the tenant
    fresh.get("bob")
    fresh.drop("bob")
    fresh.save(tmp_path)
    assert "bob" in StoreRegistry.load(tmp_path, dim=4)     # a file never read is not deleted ...
    fresh.get("bob")
    fresh.drop("bob")
    fresh.save(tmp_path, overwrite=["bob"])
    assert StoreRegistry.load(tmp_path, dim=4).tenants() == ["alice"]   # ... unless asked
    # a version here that did not change here wins too, when named
    c, d = StoreRegistry.load(tmp_path, dim=4), StoreRegistry.load(tmp_path, dim=4)
    fill(d.get("alice"), "a9", [3] * 2, [unit([1, 0, 0, 1])] * 2)
    d.save(tmp_path)
    assert c.save(tmp_path) == []                              # nothing changed in c: nothing to save
    with pytest.raises(ValueError, match="overwrite names 'alcie', which this registry neither holds nor dropped"):
        c.save(tmp_path, overwrite="alcie")
    assert c.save(tmp_path, overwrite="alice") == [StoreRegistry.file_for(tmp_path, "alice")]
    assert "a9" not in StoreRegistry.load(tmp_path, dim=4).get("alice").snapshot().request_ids
    # a tenant dropped here and saved again elsewhere since: refused with the way out, then deleted
    e, f = StoreRegistry.load(tmp_path, dim=4), StoreRegistry.load(tmp_path, dim=4)
    fill(f.get("alice"), "a10", [3] * 2, [unit([1, 0, 0, 1])] * 2)
    f.save(tmp_path)
    e.drop("alice")
    with pytest.raises(StoreError, match=r"deleting it would lose that save; save\(\.\.\., overwrite=\{'alice'\}\)"):
        e.save(tmp_path)
    assert "alice" in StoreRegistry.load(tmp_path, dim=4)
    e.save(tmp_path, overwrite={"alice"})
    assert StoreRegistry.load(tmp_path, dim=4).tenants() == []


def test_a_registry_saved_into_another_folder_writes_every_tenant(tmp_path):
    reg = StoreRegistry(dim=4)
    for t in ("alice", "bob"):
        fill(reg.get(t), f"{t}0", [5] * 3, [unit([1, 0, 0, 0])] * 3)
    reg.save(tmp_path / "a")
    back = StoreRegistry.load(tmp_path / "a", dim=4)
    assert back.save(tmp_path / "a") == []                      # nothing changed there
    assert len(back.save(tmp_path / "copy")) == 2                # a copy holds every tenant
    assert StoreRegistry.load(tmp_path / "copy", dim=4).tenants() == ["alice", "bob"]


def test_a_registry_never_undoes_a_drop_nor_sticks_nor_skips_a_store_read_elsewhere(tmp_path):
    """Three paths the review found: a tenant made here and saved is not resurrected after
    another registry drops it; dropping a tenant made here beside a file this registry never
    read lets the rest save (and leaves that file alone); a store read from another file is
    written to the folder even when its counters equal those of the folder's file."""
    d = tmp_path / "d"
    a = StoreRegistry(dim=4)
    fill(a.get("bob"), "b0", [5] * 3, [unit([1, 0, 0, 0])] * 3)
    a.save(d)
    b = StoreRegistry.load(d, dim=4)
    b.drop("bob")
    b.save(d)
    fill(a.get("bob"), "b1", [6] * 2, [unit([0, 1, 0, 0])] * 2)
    with pytest.raises(StoreError, match="was deleted since this registry read it"):
        a.save(d)
    assert StoreRegistry.load(d, dim=4).tenants() == []
    # stuck no more
    reg = StoreRegistry(dim=4)
    fill(reg.get("alice"), "a0", [5] * 3, [unit([1, 0, 0, 0])] * 3)
    reg.save(d)
    f = StoreRegistry(dim=4)
    f.get("alice")
    fill(f.get("carol"), "c0", [7] * 2, [unit([0, 0, 1, 0])] * 2)
    with pytest.raises(StoreError, match="never read by this registry"):
        f.save(d)
    f.drop("alice")
    assert f.save(d) == [StoreRegistry.file_for(d, "carol")]
    assert StoreRegistry.load(d, dim=4).get("alice").n_requests == 1      # not deleted by f
    # read from another file with the same counters: still written
    other = StoreRegistry(dim=4)
    fill(other.get("alice"), "z0", [9] * 3, [unit([0, 0, 0, 1])] * 3)
    other.save(tmp_path / "backup")
    g = StoreRegistry.load(d, dim=4)
    g.load_tenant("alice", StoreRegistry.file_for(tmp_path / "backup", "alice"))
    assert g.save(d) == [StoreRegistry.file_for(d, "alice")]
    assert StoreRegistry.load(d, dim=4).get("alice").record(0).token == 9


def test_a_token_index_that_fails_half_way_is_as_it_was():
    """add_document fails after its stream grew (inside the n-gram runs): it goes back whole, so
    the store that retries saves and loads."""
    s, _ = _busy_store("fp16")
    sx = s.suffix
    before = (sx.end, len(sx.live_tokens()), [len(r[0]) for r in sx._recent])
    real, calls = sx._insert, []

    def failing(run, keys, pos):
        calls.append(1)
        if len(calls) == 2:
            raise MemoryError("no room")
        real(run, keys, pos)
    sx._insert = failing
    for i, t in enumerate([8, 9, 10]):
        s.add("late", i, t, unit(np.arange(s.dim) + i))
    with pytest.raises(MemoryError):
        s.end_request()
    assert (sx.end, len(sx.live_tokens()), [len(r[0]) for r in sx._recent]) == before
    sx._insert = real
    s.end_request()
    assert load_store(save_store(s, Path(tempfile.mkdtemp()) / "s.oilstore")).n_requests == s.n_requests
    # the same inside a merge into the main runs (after the n = 1 run merged): they go back too
    shape = ([len(r[0]) for r in sx._main], [len(r[0]) for r in sx._recent], sx.end)

    def failing_merge(run, keys, pos):
        if run is sx._main[2]:
            raise MemoryError("no room")
        real(run, keys, pos)
    sx._insert = failing_merge
    sx._maybe_merge = lambda force=False: type(sx)._maybe_merge(sx, True)
    for i, t in enumerate([11, 12, 13]):
        s.add("later", i, t, unit(np.arange(s.dim) + i))
    with pytest.raises(MemoryError):
        s.end_request()
    assert ([len(r[0]) for r in sx._main], [len(r[0]) for r in sx._recent], sx.end) == shape
    sx._insert = real
    s.end_request()
    assert sum(len(r[0]) for r in sx._recent) == 0 and load_store(
        save_store(s, Path(tempfile.mkdtemp()) / "s.oilstore")).n_requests == s.n_requests
