"""Embedders by name: the one list, keyed by `NEXUS_EMBEDDER`. Each entry imports its
provider only when chosen, so a missing optional package fails only the one who asks."""

from __future__ import annotations

from collections.abc import Callable

from nexusai.config import Config
from nexusai.embedders.base import Embedder
from nexusai.errors import ConfigError


def _openai(config: Config) -> Embedder:
    from nexusai.embedders.openai import OpenAIEmbedder

    if not config.embedder_base_url:
        raise ConfigError("NEXUS_EMBEDDER=openai needs NEXUS_EMBEDDER_BASE_URL")
    return OpenAIEmbedder(
        config.embedder_base_url,
        config.embedder_model or "text-embedding-3-small",
        config.embedder_api_key,
        config.embedder_dimension,
        config.embedder_timeout,
    )


def _minilm(config: Config) -> Embedder:
    from nexusai.embedders.minilm import LocalEmbedder

    return LocalEmbedder(config.model_cache_dir)


def _e5(int8: bool) -> Callable[[Config], Embedder]:
    def make(config: Config) -> Embedder:
        from nexusai.embedders.e5 import E5Embedder

        return E5Embedder(config.model_cache_dir, int8=int8)

    return make


def _mpnet(config: Config) -> Embedder:
    from nexusai.embedders.mpnet import MPNetEmbedder

    return MPNetEmbedder(config.model_cache_dir)


def _reference(config: Config) -> Embedder:
    from nexusai.embedders.reference import SentenceTransformersEmbedder

    try:
        return SentenceTransformersEmbedder()
    except ImportError:
        raise ConfigError(
            "NEXUS_EMBEDDER=sentence-transformers needs torch: pip install 'nexusai[reference]'"
        ) from None


EMBEDDERS: dict[str, Callable[[Config], Embedder]] = {
    "local": _minilm,
    "sentence-transformers": _reference,
    "e5": _e5(int8=False),
    "e5-int8": _e5(int8=True),
    "mpnet": _mpnet,
    "openai": _openai,
}
"""Every embedder by its `NEXUS_EMBEDDER` name, the one list. A new entry needs: its module
in `embedders/` (an `Embedder`: `name`, `dimension`, `embed`, `embed_query`; a model
shipped inside a package, since no model hub is reached); an extra in pyproject.toml if
it needs packages, imported inside its factory; `NEXUS_EMBEDDER`'s description in
`config.py` (then `make docs`); the shared embedder tests (`tests/test_embedders.py`);
and, for the learned mode, a ranker trained on its vectors (`nexus ranker train`), or
turns warn that the ranker was trained on another's."""


def create_embedder(config: Config) -> Embedder:
    if config.embedder not in EMBEDDERS:
        names = ", ".join(sorted(EMBEDDERS))
        raise ConfigError(f"NEXUS_EMBEDDER must be one of {names}; got {config.embedder!r}")
    return EMBEDDERS[config.embedder](config)
