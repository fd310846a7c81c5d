"""The Catalog: models.dev providers and models, plus config-defined ones.

Model metadata enters through one ingestion step that partitions options into
three domains: Model Request Options (provider-semantic, e.g. ``reasoning_effort``),
Generation Controls (provider-neutral sampling), and compatibility wire fields
(raw ``body``/``headers`` merged by the transport).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal, TypeAlias

import msgspec

from ._errors import CatalogError
from ._route import ProtocolName
from ._schema import GenerationControls, ModelRef

__all__ = [
    "DEFAULT_BASE_URLS",
    "NPM_PROTOCOLS",
    "Catalog",
    "CatalogModel",
    "CatalogProvider",
    "ModelCost",
    "ModelLimit",
    "ModelStatus",
    "ModelVariant",
    "ResolvedModel",
    "partition_options",
]

ModelStatus: TypeAlias = Literal["available", "deprecated", "hidden"]
_KNOWN_SHOWN: Final = 30
"""Most names an unknown-model message lists."""

NPM_PROTOCOLS: dict[str, ProtocolName] = {
    "@ai-sdk/openai": "openai-responses",
    "@ai-sdk/anthropic": "anthropic-messages",
    "@ai-sdk/google": "gemini",
    "@ai-sdk/openai-compatible": "openai-chat",
    "@openrouter/ai-sdk-provider": "openai-chat",
    "@ai-sdk/github-copilot": "openai-chat",
    "@ai-sdk/xai": "openai-chat",
    "@ai-sdk/groq": "openai-chat",
    "@ai-sdk/deepseek": "openai-chat",
    "@ai-sdk/mistral": "openai-chat",
    "@ai-sdk/togetherai": "openai-chat",
    "@ai-sdk/cerebras": "openai-chat",
    "@ai-sdk/fireworks": "openai-chat",
    "@ai-sdk/deepinfra": "openai-chat",
    "@ai-sdk/perplexity": "openai-chat",
}
DEFAULT_BASE_URLS: dict[str, str] = {
    "@ai-sdk/openai": "https://api.openai.com/v1",
    "@ai-sdk/anthropic": "https://api.anthropic.com/v1",
    "@ai-sdk/google": "https://generativelanguage.googleapis.com/v1beta",
    "@ai-sdk/xai": "https://api.x.ai/v1",
    "@ai-sdk/groq": "https://api.groq.com/openai/v1",
    "@ai-sdk/deepseek": "https://api.deepseek.com/v1",
    "@ai-sdk/mistral": "https://api.mistral.ai/v1",
    "@ai-sdk/togetherai": "https://api.together.xyz/v1",
    "@ai-sdk/cerebras": "https://api.cerebras.ai/v1",
    "@ai-sdk/fireworks": "https://api.fireworks.ai/inference/v1",
    "@ai-sdk/deepinfra": "https://api.deepinfra.com/v1/openai",
    "@ai-sdk/perplexity": "https://api.perplexity.ai",
    "@ai-sdk/github-copilot": "https://api.githubcopilot.com",
}
_DEFAULT_NPM = "@ai-sdk/openai-compatible"
_NATIVE_SYSTEM = re.compile(r"claude-opus-4[-.]8")
_GENERATION_KEYS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "max_tokens": "max_output_tokens",
    "max_output_tokens": "max_output_tokens",
    "stop": "stop",
    "stop_sequences": "stop",
}
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


class ModelCost(msgspec.Struct, frozen=True, kw_only=True):
    """USD per million tokens; ``over_200k`` applies when the prompt exceeds 200k tokens."""

    input: float = 0.0
    output: float = 0.0
    reasoning: float | None = None
    cache_read: float | None = None
    cache_write: float | None = None
    over_200k: ModelCost | None = None


class ModelLimit(msgspec.Struct, frozen=True, kw_only=True):
    """Token limits."""

    context: int = 0
    output: int = 0
    input: int | None = None


class ModelVariant(msgspec.Struct, frozen=True, kw_only=True):
    """A named preset (e.g. ``high``) overlaying request options and generation controls."""

    request_options: dict[str, Any] = {}
    generation: GenerationControls = msgspec.field(default_factory=GenerationControls)


class CatalogModel(msgspec.Struct, frozen=True, kw_only=True):
    """One model of one provider, with its three option domains."""

    provider_id: str
    id: str
    name: str
    npm: str
    api: str | None = None
    shape: str | None = None
    status: ModelStatus = "available"
    limit: ModelLimit = msgspec.field(default_factory=ModelLimit)
    cost: ModelCost | None = None
    input_modalities: list[str] = msgspec.field(default_factory=lambda: ["text"])
    output_modalities: list[str] = msgspec.field(default_factory=lambda: ["text"])
    reasoning: bool = False
    tool_call: bool = True
    attachment: bool = False
    temperature: bool = True
    interleaved_field: str | None = None
    native_system_messages: bool = False
    request_options: dict[str, Any] = {}
    generation: GenerationControls = msgspec.field(default_factory=GenerationControls)
    compat_body: dict[str, Any] = {}
    compat_headers: dict[str, str] = {}
    variants: dict[str, ModelVariant] = {}
    wire_id: str | None = None
    release_date: str | None = None

    @property
    def protocol(self) -> ProtocolName | None:
        """The wire protocol, from the ``npm`` package (and ``shape`` for OpenAI)."""
        if self.npm == "@ai-sdk/openai" and self.shape == "completions":
            return "openai-chat"
        return NPM_PROTOCOLS.get(self.npm)


class CatalogProvider(msgspec.Struct, frozen=True, kw_only=True):
    """A provider: credentials env vars, default package and endpoint, models."""

    id: str
    name: str
    npm: str
    env: list[str] = []
    api: str | None = None
    options: dict[str, Any] = {}
    models: dict[str, CatalogModel] = {}


class ResolvedModel(msgspec.Struct, frozen=True, kw_only=True):
    """A model with its variant applied: the inputs to routing and encoding."""

    provider: CatalogProvider
    model: CatalogModel
    request_options: dict[str, Any]
    generation: GenerationControls


class Catalog:
    """An immutable set of providers; ``with_config`` returns an extended copy."""

    def __init__(self, providers: Mapping[str, CatalogProvider]) -> None:
        self._providers = dict(providers)

    @classmethod
    def from_models_dev(cls, data: Mapping[str, Any]) -> Catalog:
        """Build from a models.dev ``api.json`` document.

        Raises:
            CatalogError: the document is not a provider mapping.
        """
        if not isinstance(data, Mapping):
            raise CatalogError("models.dev data must map provider ids to providers")
        return cls(
            {pid: _provider(pid, raw) for pid, raw in data.items() if isinstance(raw, Mapping)}
        )

    def with_config(self, config: Mapping[str, Any]) -> Catalog:
        """Merge an ``opencode.json``-shaped config's ``provider`` section.

        New providers are added (``npm`` defaults to the OpenAI-compatible package);
        existing ones get their ``options``, endpoint and models overlaid. When
        ``enabled_providers`` is given only those remain; ``disabled_providers`` are
        removed either way.
        """
        providers = dict(self._providers)
        for pid, raw in (config.get("provider") or {}).items():
            providers[pid] = _merge_provider(providers.get(pid), pid, raw)
        enabled = config.get("enabled_providers")
        if enabled is not None:
            providers = {pid: p for pid, p in providers.items() if pid in enabled}
        for pid in config.get("disabled_providers") or ():
            providers.pop(pid, None)
        return Catalog(providers)

    @property
    def providers(self) -> dict[str, CatalogProvider]:
        """Providers by id."""
        return dict(self._providers)

    def provider(self, provider_id: str) -> CatalogProvider:
        """Look up a provider; raises ``CatalogError`` when unknown."""
        try:
            return self._providers[provider_id]
        except KeyError:
            raise CatalogError(f"unknown provider {provider_id!r}") from None

    def model(self, ref: ModelRef) -> CatalogModel:
        """Look up a model.

        Raises:
            CatalogError: unknown provider or model; the message lists the known providers,
                or the provider's current models (newest first).
        """
        name = f"{ref.provider_id}/{ref.model_id}"
        provider = self._providers.get(ref.provider_id)
        if provider is None:
            raise CatalogError(
                f"unknown model {name!r}: no provider {ref.provider_id!r}; "
                f"known providers: {_listing(sorted(self._providers))}"
            )
        model = provider.models.get(ref.model_id)
        if model is None:
            current = [m for m in provider.models.values() if m.status == "available"]
            known = sorted(current, key=lambda m: (_negated_date(m.release_date), m.id))
            raise CatalogError(
                f"unknown model {name!r}; known models of provider {provider.id}: "
                f"{_listing([m.id for m in known])}"
            )
        return model

    def models(self, *, include_hidden: bool = False) -> list[CatalogModel]:
        """All models sorted by provider and id; hidden ones only on request."""
        return [
            m
            for pid in sorted(self._providers)
            for _, m in sorted(self._providers[pid].models.items())
            if include_hidden or m.status != "hidden"
        ]

    def resolve(self, ref: ModelRef) -> ResolvedModel:
        """Apply ``ref.variant`` to the model's request options and generation controls.

        Raises:
            CatalogError: unknown provider, model or variant.
        """
        provider = self.provider(ref.provider_id)
        model = self.model(ref)
        options = dict(model.request_options)
        generation = model.generation
        if ref.variant is not None:
            variant = model.variants.get(ref.variant)
            if variant is None:
                raise CatalogError(
                    f"model {ref.provider_id}/{ref.model_id} has no variant {ref.variant!r}"
                )
            options.update(variant.request_options)
            generation = overlay_generation(generation, variant.generation)
        return ResolvedModel(
            provider=provider, model=model, request_options=options, generation=generation
        )


_NO_CONTROLS: Final = GenerationControls()


def overlay_generation(base: GenerationControls, top: GenerationControls) -> GenerationControls:
    """Fields set in *top* win over *base*."""
    if top == _NO_CONTROLS:  # the common case: a request that sets none
        return base
    fields = {f: getattr(top, f) for f in top.__struct_fields__ if getattr(top, f) is not None}
    return msgspec.structs.replace(base, **fields)


def partition_options(
    options: Mapping[str, Any],
) -> tuple[dict[str, Any], GenerationControls, dict[str, Any], dict[str, str]]:
    """Split AI-SDK-shaped model options into (request options, generation, body, headers).

    camelCase keys become snake_case; ``thinking.budgetTokens`` and
    ``thinkingConfig`` fold into ``thinking_budget``/``include_thoughts``.
    """
    request: dict[str, Any] = {}
    generation: dict[str, Any] = {}
    body: dict[str, Any] = {}
    headers: dict[str, str] = {}
    for key, value in options.items():
        name = _CAMEL.sub("_", key).lower()
        if name == "max_output_tokens" or name in _GENERATION_KEYS:
            generation[_GENERATION_KEYS.get(name, name)] = value
        elif name == "body" and isinstance(value, Mapping):
            body.update(value)
        elif name == "headers" and isinstance(value, Mapping):
            headers.update({str(k): str(v) for k, v in value.items()})
        elif name == "thinking" and isinstance(value, Mapping):
            if value.get("budgetTokens") or value.get("budget_tokens"):
                request["thinking_budget"] = value.get("budgetTokens") or value.get("budget_tokens")
        elif name == "thinking_config" and isinstance(value, Mapping):
            if value.get("thinkingBudget") is not None:
                request["thinking_budget"] = value["thinkingBudget"]
            if value.get("includeThoughts") is not None:
                request["include_thoughts"] = value["includeThoughts"]
        else:
            request[name] = value
    return request, msgspec.convert(generation, GenerationControls), body, headers


def _status(raw: Any) -> ModelStatus:
    if raw in ("available", "deprecated", "hidden"):
        return raw
    return "hidden" if raw == "alpha" else "available"


def _cost(raw: Any) -> ModelCost | None:
    if not isinstance(raw, Mapping):
        return None
    over = raw.get("context_over_200k")
    return ModelCost(
        input=float(raw.get("input") or 0),
        output=float(raw.get("output") or 0),
        reasoning=_float(raw.get("reasoning")),
        cache_read=_float(raw.get("cache_read")),
        cache_write=_float(raw.get("cache_write")),
        over_200k=_cost(over) if isinstance(over, Mapping) else None,
    )


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _model(
    provider_id: str, npm: str, api: str | None, model_id: str, raw: Mapping[str, Any]
) -> CatalogModel:
    override = raw.get("provider") or {}
    options = dict(raw.get("options") or {})
    request, generation, body, headers = partition_options(options)
    body = {**(override.get("body") or {}), **body}
    headers = {**(override.get("headers") or {}), **headers}
    interleaved = raw.get("interleaved")
    limit = raw.get("limit") or {}
    modalities = raw.get("modalities") or {}
    variants = {
        name: _variant(v)
        for name, v in (raw.get("variants") or {}).items()
        if isinstance(v, Mapping)
    }
    return CatalogModel(
        provider_id=provider_id,
        id=model_id,
        name=str(raw.get("name") or model_id),
        npm=str(override.get("npm") or npm),
        api=override.get("api") or api,
        shape=override.get("shape"),
        status=_status(raw.get("status")),
        limit=ModelLimit(
            context=int(limit.get("context") or 0),
            output=int(limit.get("output") or 0),
            input=limit.get("input"),
        ),
        cost=_cost(raw.get("cost")),
        input_modalities=list(modalities.get("input") or ["text"]),
        output_modalities=list(modalities.get("output") or ["text"]),
        reasoning=bool(raw.get("reasoning", False)),
        tool_call=bool(raw.get("tool_call", True)),
        attachment=bool(raw.get("attachment", False)),
        temperature=bool(raw.get("temperature", True)),
        interleaved_field=interleaved.get("field") if isinstance(interleaved, Mapping) else None,
        native_system_messages=bool(
            request.pop("native_system_messages", None) or _NATIVE_SYSTEM.search(model_id)
        ),
        request_options=request,
        generation=generation,
        compat_body=body,
        compat_headers=headers,
        variants=variants,
        wire_id=raw.get("id") if raw.get("id") not in (None, model_id) else None,
        release_date=raw.get("release_date"),
    )


def _variant(raw: Mapping[str, Any]) -> ModelVariant:
    request, generation, _, _ = partition_options(raw)
    return ModelVariant(request_options=request, generation=generation)


def _provider(provider_id: str, raw: Mapping[str, Any]) -> CatalogProvider:
    npm = str(raw.get("npm") or _DEFAULT_NPM)
    api = raw.get("api")
    models = {
        mid: _model(provider_id, npm, api, mid, m)
        for mid, m in (raw.get("models") or {}).items()
        if isinstance(m, Mapping)
    }
    return CatalogProvider(
        id=provider_id,
        name=str(raw.get("name") or provider_id),
        npm=npm,
        env=list(raw.get("env") or []),
        api=api,
        models=models,
    )


def _merge_provider(
    base: CatalogProvider | None, pid: str, raw: Mapping[str, Any]
) -> CatalogProvider:
    options = dict(raw.get("options") or {})
    npm = str(raw.get("npm") or (base.npm if base else _DEFAULT_NPM))
    api = options.get("baseURL") or raw.get("api") or (base.api if base else None)
    models = dict(base.models) if base else {}
    if base is not None and (npm != base.npm or api != base.api):
        models = {k: msgspec.structs.replace(m, npm=npm, api=api) for k, m in models.items()}
    for mid, mraw in (raw.get("models") or {}).items():
        merged = dict(mraw or {})
        if mid in models:
            models[mid] = _merge_model(models[mid], merged, npm, api)
        else:
            models[mid] = _model(pid, npm, api, mid, merged)
    return CatalogProvider(
        id=pid,
        name=str(raw.get("name") or (base.name if base else pid)),
        npm=npm,
        env=list(raw.get("env") or (base.env if base else [])),
        api=api,
        options={**(base.options if base else {}), **options},
        models=models,
    )


def _merge_model(
    base: CatalogModel, raw: Mapping[str, Any], npm: str, api: str | None
) -> CatalogModel:
    request, generation, body, headers = partition_options(raw.get("options") or {})
    variants = dict(base.variants)
    variants.update(
        {n: _variant(v) for n, v in (raw.get("variants") or {}).items() if isinstance(v, Mapping)}
    )
    changes: dict[str, Any] = {
        "request_options": {**base.request_options, **request},
        "generation": overlay_generation(base.generation, generation),
        "compat_body": {**base.compat_body, **body},
        "compat_headers": {**base.compat_headers, **headers},
        "variants": variants,
    }
    if raw.get("name"):
        changes["name"] = str(raw["name"])
    if raw.get("status"):
        changes["status"] = _status(raw["status"])
    if raw.get("id"):
        changes["wire_id"] = str(raw["id"])
    if isinstance(raw.get("limit"), Mapping):
        changes["limit"] = msgspec.structs.replace(base.limit, **raw["limit"])
    return msgspec.structs.replace(base, **changes)


def _negated_date(date: str | None) -> tuple[int, ...]:
    """Sort key putting later ``YYYY-MM-DD`` (or ``YYYY-MM``) dates first, unknown last."""
    if not date:
        return (1,)
    parts = [int(p) for p in re.findall(r"\d+", date)[:3]]
    return (0, *(-p for p in parts), *([0] * (3 - len(parts))))


def _listing(names: Sequence[str]) -> str:
    """*names* joined, the first ``_KNOWN_SHOWN`` of them, then how many more."""
    if not names:
        return "(none)"
    shown = ", ".join(names[:_KNOWN_SHOWN])
    more = len(names) - _KNOWN_SHOWN
    return f"{shown}, and {more} more" if more > 0 else shown
