"""Store files: one store saved to (and loaded from) one file, and one store per tenant.

* :func:`save_store` / :func:`load_store`: a zip with a versioned JSON header (format, version,
  the store's options, its counters) with its own sha256, and a sha256 per member. ``save``
  writes a temporary file beside the target, fsyncs it, renames it over the target and fsyncs
  the folder, so a crash (or ``kill -9``) leaves the old file or the new one, never half of
  one; on any failure (full disk included) the temporary file is removed. ``load`` builds a new
  store and returns it only when every check passed: any bytes at all that are not a store file
  (flipped, truncated, another format or version, another tenant) raise one
  :class:`~oilbird.store.StoreError` naming the file.
* :class:`StoreRegistry`: tenant -> store, saved as one file per tenant in a folder. A save
  never replaces (nor a drop deletes) a tenant's file that changed since this registry last
  read or wrote it, or that it never read: another registry's work is refused, not lost.

Knows the file format, not how a store searches: the store gives and takes its parts as a
:class:`~oilbird.store.Snapshot`.
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
import tempfile
import time
import weakref
import zipfile
from pathlib import Path
from typing import Callable

import faiss
import numpy as np

from .errors import InputError, shown
from .jsonio import loads
from .store import Snapshot, Store, StoreError, check_bounds
from .store_snapshot import check_dim, check_snapshot, key_mismatch

FORMAT = "oilbird-store"
FORMAT_VERSION = 1
# the members of a file besides the header: the snapshot's arrays, the request ids, the index
ARRAYS = ("positions", "row_rec", "tokens", "q_first", "q_n", "q_stream", "q_time")
MEMBERS = tuple(f"{a}.npy" for a in ARRAYS) + ("request_ids.json", "index.faiss")


def _path(path) -> Path:
    """A store file's path, or StoreError for what is none (None, a number)."""
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise StoreError(path, "a store file's path must be a non-empty str or Path")
    return Path(path)


def save_store(store: Store, path) -> Path:
    """Write ``store``'s committed records to ``path`` (see the module docstring); the request
    being decoded is not saved. Raises :class:`StoreError` when the file cannot be written."""
    path = _path(path)
    snap = store.snapshot()
    try:
        check_snapshot(snap)             # what load_store will check: never write a file it refuses
    except ValueError as exc:
        raise StoreError(path, f"not saved: the store is inconsistent ({str(exc)[:200]})") from exc
    members: dict[str, bytes] = {}
    for name in ARRAYS:
        buf = io.BytesIO()
        np.save(buf, np.ascontiguousarray(snap.arrays[name]), allow_pickle=False)
        members[f"{name}.npy"] = buf.getvalue()
    members["request_ids.json"] = json.dumps(snap.request_ids).encode()
    members["index.faiss"] = faiss.serialize_index(snap.index).tobytes()
    header = {"format": FORMAT, "version": FORMAT_VERSION, "config": snap.config, "state": snap.state,
              "payload": {k: {"sha256": hashlib.sha256(v).hexdigest(), "bytes": len(v)}
                          for k, v in members.items()}}
    try:                                 # strict JSON, as load_store reads it (no NaN, no Infinity)
        hb = json.dumps(header, indent=1, sort_keys=True, allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        raise StoreError(path, f"not saved: its options are not plain JSON numbers ({exc})") from exc
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as z:
                z.writestr("header.json", hb)
                z.writestr("header.sha256", hashlib.sha256(hb).hexdigest())
                for k, v in members.items():
                    z.writestr(k, v)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
        _fsync_folder(path.parent)
    except BaseException as exc:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        if isinstance(exc, OSError):
            raise StoreError(path, f"cannot write ({exc.strerror or exc})") from exc
        raise
    return path


def _fsync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable. A file system that cannot sync a folder (EINVAL,
    ENOTSUP: some network and FUSE file systems) is left as it is."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
            raise
    finally:
        os.close(fd)


def load_store(path, tenant: str | None = None, clock: Callable[[], float] = time.time) -> Store:
    """Read a file written by :func:`save_store` into a new store, verified end to end.

    Raises :class:`StoreError` (with the path and the reason) for a missing, truncated,
    corrupt, foreign or newer-version file, or one holding another ``tenant`` than asked
    for; nothing is returned (or changed) unless every check passed."""
    path = _path(path)
    try:
        return _load(path, tenant, clock)
    except StoreError:
        raise
    except Exception as exc:   # anything unexpected in a damaged file is still one error
        raise StoreError(path, f"unreadable ({type(exc).__name__}: {str(exc)[:200]})") from exc


def _load(path: Path, tenant: str | None, clock) -> Store:
    def fail(reason):
        raise StoreError(path, reason)

    if path.is_dir():
        fail("is a folder, not a store file (a StoreRegistry folder loads with StoreRegistry.load)")
    if not path.is_file():
        fail("no such file")
    try:
        z = zipfile.ZipFile(path, "r")
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise StoreError(path, f"not a store file, or truncated ({exc})") from exc
    with z:
        def read(name):
            try:
                return z.read(name)
            except KeyError:
                fail(f"member '{name}' missing")
            except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
                raise StoreError(path, f"member '{name}' is damaged ({exc})") from exc

        hb = read("header.json")
        if read("header.sha256").decode(errors="replace").strip() != hashlib.sha256(hb).hexdigest():
            fail("header checksum mismatch (corrupt file)")
        header = _json(hb, path, "header")
        if not isinstance(header, dict):
            fail("header is not a JSON object")
        if header.get("format") != FORMAT:
            fail(f"not an {FORMAT} file (format {shown(header.get('format'))})")
        if header.get("version") != FORMAT_VERSION:
            fail(f"format version {shown(header.get('version'))} is not supported "
                 f"(this code reads version {FORMAT_VERSION})")
        cfg, st, payload = header.get("config"), header.get("state"), header.get("payload")
        if not (isinstance(cfg, dict) and isinstance(st, dict) and isinstance(payload, dict)):
            fail("header lacks its config, state or payload")
        if tenant is not None and cfg.get("tenant") != tenant:
            fail(f"holds tenant {shown(cfg.get('tenant'))}, not {tenant!r}")
        if sorted(payload) != sorted(MEMBERS):
            fail(f"members {sorted(payload)} are not a store's {sorted(MEMBERS)}")
        blobs = {}
        for name, meta in payload.items():
            b = read(name)
            if len(b) != meta["bytes"] or hashlib.sha256(b).hexdigest() != meta["sha256"]:
                fail(f"checksum mismatch in '{name}' (corrupt file)")
            blobs[name] = b
    arrays = {a: np.load(io.BytesIO(blobs[f"{a}.npy"]), allow_pickle=False) for a in ARRAYS}
    q_id = _json(blobs["request_ids.json"], path, "request_ids.json")
    if not (isinstance(q_id, list) and all(isinstance(r, str) for r in q_id)):
        fail("request_ids.json is not a list of request ids")
    index = faiss.deserialize_index(np.frombuffer(blobs["index.faiss"], dtype=np.uint8))
    try:
        return Store.from_snapshot(Snapshot(cfg, st, arrays, q_id, index), clock)
    except ValueError as exc:          # the tables do not fit together
        raise StoreError(path, str(exc)[:200]) from exc
    except (TypeError, KeyError) as exc:   # the header's options or counters are not a store's
        raise StoreError(path, f"header does not describe a store ({type(exc).__name__}: {str(exc)[:160]})") from exc


def _json(data: bytes, path: Path, member: str):
    """A JSON member of a store file, or StoreError."""
    try:
        return loads(data.decode("utf-8"))
    except (UnicodeDecodeError, InputError) as exc:
        raise StoreError(path, f"{member} is not JSON ({exc})") from None


_TENANT_FILE = "tenant-{}.oilstore"
# the options of a Store that only bound it, so a loaded store may take new values for them
BOUNDS = ("max_records", "max_bytes", "max_requests", "max_age_s")
# options that only tune upkeep and search (a loaded store takes new values too), and the ones
# that fix what a saved file holds (a loaded store keeps them)
TUNING = ("compact_slack", "ivf_nprobe")
FORMAT_OPTIONS = ("gram", "state_dtype", "pq_m", "pq_nbits", "pq_train_size", "index_type", "ivf_nlist",
                  "ivf_train_size")


class StoreRegistry:
    """Tenant -> :class:`Store`. The only way to reach a store is to name its tenant, a store
    only ever searches itself, and a saved store only loads back under its own tenant, so no
    call path retrieves one tenant's records for another.

    ``store_kwargs`` (e.g. ``max_records``, ``state_dtype``) apply to every store it creates;
    to stores it loads, the bounds and tuning among them apply (:data:`BOUNDS`, :data:`TUNING`),
    and a different format (:data:`FORMAT_OPTIONS`) is refused (a saved store keeps the format it was
    written in).
    """

    def __init__(self, dim: int, **store_kwargs):
        self.dim = check_dim(dim)
        self.store_kwargs = store_kwargs
        self._stores: dict[str, Store] = {}
        self._dropped: set[str] = set()       # whose files the next save deletes
        self._seen: dict[Path, tuple | None] = {}   # a file as this registry last read or wrote it
        self._clean: dict[Path, tuple] = {}         # which version of its store a file holds
        self._fresh: set[str] = set()               # tenants made here, not read from a file

    def get(self, tenant: str) -> Store:
        """The tenant's store (created empty on first use)."""
        if not isinstance(tenant, str) or not tenant:
            raise ValueError(f"tenant must be a non-empty string, not {shown(tenant)}")
        if tenant not in self._stores:
            self._stores[tenant] = Store(self.dim, tenant=tenant, **self.store_kwargs)
            self._dropped.discard(tenant)
            self._fresh.add(tenant)
        return self._stores[tenant]

    def __contains__(self, tenant) -> bool:
        return tenant in self._stores

    def tenants(self) -> list[str]:
        return sorted(self._stores)

    def drop(self, tenant: str) -> None:
        """Forget a tenant's store entirely (e.g. on account deletion); the next :meth:`save`
        into a directory also deletes the tenant's file there."""
        if self._stores.pop(tenant, None) is not None:
            self._dropped.add(tenant)

    def expire(self, now: float | None = None) -> int:
        """Apply every store's retention policy; returns records evicted."""
        return sum(s.expire(now) for s in self._stores.values())

    @staticmethod
    def file_for(directory, tenant: str) -> Path:
        return Path(directory) / _TENANT_FILE.format(tenant.encode().hex())

    def save(self, directory, overwrite=()) -> list[Path]:
        """One file per tenant under ``directory`` for every store that changed since this
        registry read or wrote it (new records, evictions, other options); then the files of
        tenants dropped since the last save are deleted, so a dropped tenant never loads back.
        Other files there (other tenants, another registry's) are left alone. Returns the
        files written.

        Nothing is written (StoreError, saying how to resolve it) when a file to be replaced or
        deleted changed since this registry last read or wrote it (another registry saved it),
        or exists and was never read by it (e.g. the tenant was made afresh here), or when a
        store read from a file is to be written after that file was deleted (another registry
        dropped the tenant: drop it here too, or get it afresh). Two versions are never merged.
        ``overwrite`` names tenants whose version here wins anyway: their files are replaced (or,
        dropped, deleted) whatever changed there, and the other version is lost, as asked; a
        name this registry neither holds nor dropped is refused (ValueError) before anything.
        The check and the writes hold a lock on the folder (``.oilbird-registry.lock``), so two
        registries saving at once take turns."""
        directory = Path(directory)
        if isinstance(overwrite, str):
            overwrite = (overwrite,)
        if not isinstance(overwrite, (list, tuple, set, frozenset)) or not all(isinstance(t, str) for t in overwrite):
            raise ValueError(f"overwrite takes tenant names (a name, or a list or set of them), not {shown(overwrite)}")
        overwrite = set(overwrite)
        unknown = sorted(overwrite - set(self._stores) - self._dropped)
        if unknown:
            raise ValueError(f"overwrite names {', '.join(map(repr, unknown))}, which this registry neither holds "
                             f"nor dropped (it holds {', '.join(map(repr, self.tenants())) or 'no tenant'})")
        with _folder_lock(directory):
            def stale(t, s):      # the file does not hold this store as it is (or, overwritten, changed there)
                path = self.file_for(directory, t)
                return not _holds(self._clean.get(path.resolve()), s) or (
                    t in overwrite and _fingerprint(path) != self._seen.get(path.resolve(), _NEVER))
            changed = [t for t, s in sorted(self._stores.items()) if stale(t, s)]
            paths = {t: self.file_for(directory, t) for t in changed + sorted(self._dropped)}
            for t, path in paths.items():
                why = "" if t in overwrite else self._conflict(t, path)
                if why:
                    raise StoreError(path, f"nothing saved: tenant {t!r}'s file {why}")
            written = []
            for t in changed:
                written.append(save_store(self._stores[t], paths[t]))
                key = paths[t].resolve()
                self._seen[key], self._clean[key] = _fingerprint(paths[t]), _held(self._stores[t])
                self._fresh.discard(t)        # written: from now on it is a store of that file
            for t in sorted(self._dropped):
                key = paths[t].resolve()
                # a file never read is not ours to delete, unless overwrite says so
                if self._seen.get(key, _NEVER) is not _NEVER or t in overwrite:
                    paths[t].unlink(missing_ok=True)
                    self._seen[key] = None
                self._clean.pop(key, None)
            self._dropped.clear()
        return written

    def _conflict(self, t: str, path: Path) -> str:
        """Why ``path`` must not be replaced (or deleted) for tenant ``t`` now; "" when it may."""
        now, seen = _fingerprint(path), self._seen.get(path.resolve(), _NEVER)
        if now == seen or (t in self._dropped and seen is _NEVER):   # (a file never read is not deleted)
            return ""
        if now is None:      # gone: fine to delete, or to write a store that was not read from it
            if t in self._dropped or t in self._fresh or seen is _NEVER:
                return ""
            return ("was deleted since this registry read it (another registry dropped the tenant): drop() it "
                    "here too (then get() makes it afresh, if wanted) and save again")
        if seen is _NEVER:
            return ("exists and was never read by this registry: load_tenant() it first (the store here is "
                    f"then replaced by it), drop the tenant here, or save(..., overwrite={{{t!r}}}) to replace it")
        if t in self._dropped:
            return ("changed since this registry read it (another registry saved it): deleting it would lose "
                    f"that save; save(..., overwrite={{{t!r}}}) deletes it anyway")
        return ("changed since this registry read or wrote it (another registry saved it): load_tenant() it "
                "to keep that version (this registry's changes to the tenant are then lost), drop the tenant "
                f"here, or save(..., overwrite={{{t!r}}}) to replace it with this version (that one is then "
                "lost); two versions are never merged")

    def load_tenant(self, tenant: str, path) -> Store:
        """Replace the tenant's store by the one in ``path``, only if it loads and verifies
        and holds that tenant (and, when the registry has a ``state_key``, another model's or key
        layer's states are refused; an unlabelled store takes the label); on any error the
        current store stays as it was."""
        seen = _fingerprint(Path(path))
        s = load_store(path, tenant=tenant)
        if s.dim != self.dim:
            raise StoreError(path, f"dim {s.dim} != registry dim {self.dim}")
        held = _held(s)                      # what the file holds (before a label is added)
        _label(s, self.store_kwargs.get("state_key"), path)
        self._stores[tenant] = s
        self._dropped.discard(tenant)
        self._fresh.discard(tenant)
        key = Path(path).resolve()
        self._seen[key], self._clean[key] = seen, held
        return s

    @classmethod
    def load(cls, directory, dim: int, **store_kwargs) -> "StoreRegistry":
        """Every ``tenant-*.oilstore`` under ``directory``; all must verify or none is used.
        Bounds and tuning in ``store_kwargs`` (e.g. a new ``max_records``) apply to the loaded
        stores at once; a format option that differs from a saved store's raises StoreError."""
        check_bounds(**{k: v for k, v in store_kwargs.items() if k in BOUNDS})
        if not Path(directory).is_dir():
            raise StoreError(directory, "no such folder" if not Path(directory).exists() else
                             "is a file, not a registry's folder (one store file loads with load_store)")
        reg = cls(dim, **store_kwargs)
        loaded = {}
        # the options as a store built with them holds them (pq_train_size is raised to 2**pq_nbits,
        # pq_m is 0 unless pq, ...): compared with the saved store's own config
        normal = Store(dim, **store_kwargs).config()
        asked = {k: normal[k] for k in store_kwargs if k in FORMAT_OPTIONS}
        for f in sorted(Path(directory).glob(_TENANT_FILE.format("*"))):
            hexname = f.name[len("tenant-"):-len(".oilstore")]
            try:
                tenant = bytes.fromhex(hexname).decode()
            except ValueError as exc:
                raise StoreError(f, "file name does not encode a tenant") from exc
            reg._seen[f.resolve()] = _fingerprint(f)
            s = load_store(f, tenant=tenant)
            if s.dim != dim:
                raise StoreError(f, f"dim {s.dim} != registry dim {dim}")
            saved = s.config()
            other = next((k for k, v in asked.items() if saved.get(k) != v), None)
            if other:
                raise StoreError(f, f"saved with {other}={saved[other]!r}, asked for {store_kwargs[other]!r} (which "
                                    f"a store made with the options given holds as {normal[other]!r}); a saved "
                                    f"store keeps its format (bounds such as max_records may change)")
            reg._clean[f.resolve()] = _held(s)
            _label(s, normal["state_key"] if "state_key" in store_kwargs else None, f)
            loaded[tenant] = s
        for s in loaded.values():
            for k in BOUNDS + TUNING:
                if k in store_kwargs:
                    setattr(s, k, normal[k])
            s.expire()               # new bounds or tuning: the store differs from its file, saved next time
        reg._stores = loaded
        return reg


_NEVER = object()      # a file this registry never read nor wrote


def _label(s: Store, key: dict | None, path) -> None:
    """A loaded store checked against the registry's ``state_key`` (StoreError when its states
    are another model's or key layer's; the name alone may differ) and, unlabelled, labelled
    with it: it then differs from its file and is saved with the label next time."""
    why = key_mismatch(s.state_key, key)
    if why:
        raise StoreError(path, why)
    if s.state_key is None and key is not None:
        s.state_key = dict(key)


def _version(s: Store) -> tuple:
    """What a store holds, as far as its file goes: records in and out, requests, options."""
    return (s.first_record, s.next_record, s.requests_seen, tuple(sorted(s.config().items())))


def _held(s: Store) -> tuple:
    """What a file is known to hold: this store object (weakly) at this version."""
    return (weakref.ref(s), _version(s))


def _holds(held: tuple | None, s: Store) -> bool:
    """``held`` (from :func:`_held`) is ``s`` as it is now: another store object with equal
    counters (one loaded from another file) is not."""
    return held is not None and held[0]() is s and held[1] == _version(s)


def _fingerprint(path: Path) -> tuple | None:
    """Which version of a file is there (None: no file): its inode, size and time, and the
    checksum its header carries (so a reused inode or a copied time does not pass for it)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    try:
        with zipfile.ZipFile(path) as z:
            header = z.read("header.sha256")
    except (OSError, KeyError, zipfile.BadZipFile, EOFError, ValueError):
        header = b""
    return (st.st_ino, st.st_size, st.st_mtime_ns, header)


@contextlib.contextmanager
def _folder_lock(folder: Path):
    """An exclusive lock on ``folder`` between processes (``fcntl.flock`` on a lock file there;
    where fcntl is missing, no lock: the version checks still refuse what they see)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
        f = open(folder / ".oilbird-registry.lock", "a")
    except OSError as exc:
        raise StoreError(folder, f"cannot write ({exc.strerror or exc})") from exc
    with f:                                # closing the file releases the lock
        fcntl.flock(f, fcntl.LOCK_EX)
        yield
