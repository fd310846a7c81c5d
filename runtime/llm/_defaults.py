"""Choosing models nobody named: the default model, the small model, and checking a named one.

Pure functions over a :class:`Catalog` and the set of provider ids that have
credentials; reading the environment or the credential store is the caller's part.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Final

from ._auth import _ENV_REF
from ._catalog import Catalog, CatalogModel, CatalogProvider, _negated_date
from ._errors import CatalogError
from ._schema import ModelRef

__all__ = [
    "DEFAULT_PREFERENCES",
    "PROVIDER_ORDER",
    "choose_default_model",
    "choose_small_model",
    "parse_model",
    "provider_default_model",
    "providers_with_credentials",
    "resolve_model",
    "usable_providers",
]

PROVIDER_ORDER: Final[tuple[str, ...]] = ("anthropic", "openai", "google", "openrouter")
"""Providers tried first, in this order, when several have credentials; the others
follow in catalog order."""

_MINOR: Final = r"(?:[-.]\d{1,2})?"
DEFAULT_PREFERENCES: Final[dict[str, tuple[str, ...]]] = {
    "anthropic": (rf"claude-sonnet-\d+{_MINOR}", rf"claude-opus-\d+{_MINOR}"),
    "openai": (r"gpt-5(?:\.\d+)?", r"gpt-4\.1"),
    "google": (r"gemini-\d+(?:\.\d+)?-pro", r"gemini-\d+(?:\.\d+)?-flash"),
    "github-copilot": (rf"claude-sonnet-\d+{_MINOR}", r"gpt-5(?:\.\d+)?"),
    "openrouter": (
        rf"anthropic/claude-sonnet-\d+{_MINOR}",
        r"openai/gpt-5(?:\.\d+)?",
        r"google/gemini-\d+(?:\.\d+)?-pro",
    ),
    "amazon-bedrock": (rf"(?:global\.|us\.)?anthropic\.claude-sonnet-\d+{_MINOR}",),
}
"""Per provider, model-id patterns (whole-id matches) tried in order; the newest
eligible match of the first pattern with any wins. Without a match, the newest
eligible model of the provider."""

_NOT_SMALL: Final = re.compile(
    r"embed|tts|image|audio|realtime|transcribe|search|research|moderation|-pro\b|:free$"
)


def parse_model(text: str) -> ModelRef:
    """``provider/model`` (the model id may itself contain ``/``) as a :class:`ModelRef`.

    Raises:
        CatalogError: no ``/``, or an empty provider or model id.
    """
    provider, _, model = text.strip().partition("/")
    if not provider or not model:
        raise CatalogError(f"model {text!r} is not of the form provider/model")
    return ModelRef(provider_id=provider, model_id=model)


def providers_with_credentials(
    catalog: Catalog, env: Mapping[str, str], stored: Collection[str]
) -> set[str]:
    """Ids of the providers a credential is found for, as ``Auth`` looks: a configured
    ``options.apiKey`` (a ``{env:NAME}`` reference counts when NAME is set), a credential
    in the store (*stored*: its provider ids), or one of the provider's ``env`` variables."""
    found: set[str] = set()
    for provider in catalog.providers.values():
        key = provider.options.get("apiKey")
        if isinstance(key, str) and key:
            match = _ENV_REF.match(key)
            if match is None or env.get(match.group(1)):
                found.add(provider.id)
                continue
        if provider.id in stored or any(env.get(name) for name in provider.env):
            found.add(provider.id)
    return found


def usable_providers(catalog: Catalog, credentialed: Collection[str]) -> list[CatalogProvider]:
    """Providers a request can be sent to, in the order a default is chosen from.

    First those in *credentialed* (``PROVIDER_ORDER``, then catalog order), then those
    that need no credential (``env: []``, as configured local providers have).
    Providers without a model this runtime can speak to are left out.
    """
    providers = catalog.providers
    rank = {pid: i for i, pid in enumerate(PROVIDER_ORDER)}
    order = sorted(providers, key=lambda pid: rank.get(pid, len(rank)))
    keyed = [providers[p] for p in order if p in credentialed]
    keyless = [providers[p] for p in order if p not in credentialed and not providers[p].env]
    return [p for p in (*keyed, *keyless) if any(m.protocol for m in p.models.values())]


def choose_default_model(catalog: Catalog, credentialed: Collection[str]) -> ModelRef | None:
    """The model to use when neither the user nor the configuration named one.

    The :func:`provider_default_model` of the first usable provider
    (:func:`usable_providers`) that has one. None when no usable provider has an
    eligible model.
    """
    for provider in usable_providers(catalog, credentialed):
        chosen = _provider_default(provider)
        if chosen is not None:
            return _ref(chosen)
    return None


def provider_default_model(catalog: Catalog, provider_id: str) -> ModelRef | None:
    """The model of *provider_id* a session uses when only the provider is chosen.

    Among its eligible models (current, not deprecated or hidden; tool calling; text in
    and only text out; on a protocol this runtime speaks), the newest release matching
    the first of the provider's preference patterns (``DEFAULT_PREFERENCES``) that
    matches any, else the newest. None for an unknown provider or one without an
    eligible model.
    """
    provider = catalog.providers.get(provider_id)
    chosen = None if provider is None else _provider_default(provider)
    return None if chosen is None else _ref(chosen)


def _provider_default(provider: CatalogProvider) -> CatalogModel | None:
    eligible = [m for m in provider.models.values() if _agentic(m)]
    if not eligible:
        return None
    for pattern in DEFAULT_PREFERENCES.get(provider.id, ()):
        matched = [m for m in eligible if re.fullmatch(pattern, m.id)]
        if matched:
            return _newest(matched)
    return _newest(eligible)


def choose_small_model(catalog: Catalog, provider_id: str) -> ModelRef | None:
    """A cheap model of *provider_id* for side work such as session titles.

    The cheapest current text-in, text-only-out model with a known price (input plus
    output per million tokens; ties go to the newest), leaving out embedding, speech,
    image, search and ``-pro`` models and free tiers; it need not call tools. None
    when the provider is unknown or no model qualifies (a local provider without
    prices: the caller falls back to the session's own model).
    """
    provider = catalog.providers.get(provider_id)
    if provider is None:
        return None
    priced = [
        m
        for m in provider.models.values()
        if _current_text(m)
        and m.protocol is not None
        and m.cost is not None
        and not _NOT_SMALL.search(m.id)
    ]
    if not priced:
        return None
    cheapest = min(
        priced,
        key=lambda m: (
            m.cost.input + m.cost.output if m.cost else 0.0,
            _negated_date(m.release_date),
            len(m.id),
            m.id,
        ),
    )
    return _ref(cheapest)


def resolve_model(
    catalog: Catalog, credentialed: Collection[str], wanted: str | None
) -> ModelRef | None:
    """The model *wanted* names (``provider/model``), checked; else the default choice.

    Raises:
        CatalogError: *wanted* is malformed, names an unknown provider or model (the
            message names it and lists the provider's current models, newest first),
            or names a provider
            that has no credentials and needs one.
    """
    if not wanted:
        return choose_default_model(catalog, credentialed)
    ref = parse_model(wanted)
    catalog.model(ref)  # raises, naming the provider's models
    provider = catalog.provider(ref.provider_id)
    if provider.env and provider.id not in credentialed:
        raise CatalogError(
            f"model {wanted!r} needs credentials for provider {provider.id}: "
            f"set {' or '.join(provider.env)}, or store one with `kittiwake auth login`"
        )
    return ref


def _agentic(model: CatalogModel) -> bool:
    return model.tool_call and model.protocol is not None and _current_text(model)


def _current_text(model: CatalogModel) -> bool:
    return (
        model.status == "available"
        and "text" in model.input_modalities
        and set(model.output_modalities) == {"text"}
    )


def _newest(models: Sequence[CatalogModel]) -> CatalogModel:
    """The latest release; on a tie of dates the shorter id (an alias over its dated
    snapshot); without dates (a configured provider) the first listed."""
    ranked = sorted(
        enumerate(models),
        key=lambda im: (
            _negated_date(im[1].release_date),
            len(im[1].id) if im[1].release_date else 0,
            im[0],
        ),
    )
    return ranked[0][1]


def _ref(model: CatalogModel) -> ModelRef:
    return ModelRef(provider_id=model.provider_id, model_id=model.id)
