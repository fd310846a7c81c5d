"""Choosing the default and small models over the models.dev fixture catalog."""

from __future__ import annotations

import pytest

from runtime.llm import (
    Catalog,
    CatalogError,
    ModelRef,
    choose_default_model,
    choose_small_model,
    parse_model,
    provider_default_model,
    providers_with_credentials,
    resolve_model,
    usable_providers,
)

LOCAL = {
    "provider": {
        "local": {
            "name": "Local vLLM",
            "options": {"baseURL": "http://127.0.0.1:8000/v1"},
            "models": {"qwen-coder": {"name": "Qwen Coder"}, "tiny": {"tool_call": False}},
        }
    }
}


@pytest.fixture
def catalog(models_dev) -> Catalog:
    return Catalog.from_models_dev(models_dev)


def _agentic_and_current(catalog: Catalog, ref: ModelRef) -> None:
    model = catalog.model(ref)
    assert model.status == "available"
    assert model.tool_call is True
    assert model.output_modalities == ["text"]
    assert model.protocol is not None


@pytest.mark.parametrize(
    ("provider", "expected"),
    [
        ("openai", "gpt-5.5"),
        ("anthropic", "claude-sonnet-5"),
        ("google", "gemini-2.5-pro"),
    ],
)
def test_one_key_gives_a_current_tool_calling_model(catalog, provider, expected):
    ref = choose_default_model(catalog, {provider})
    assert ref == ModelRef(provider_id=provider, model_id=expected)
    _agentic_and_current(catalog, ref)


def test_never_an_image_or_deprecated_model_even_when_newest(models_dev):
    # Keep only models the old first-entry rule would pick or that are disqualified.
    data = dict(models_dev)
    openai = dict(data["openai"])
    openai["models"] = {
        k: v
        for k, v in openai["models"].items()
        if k in ("chatgpt-image-latest", "gpt-image-2", "gpt-3.5-turbo", "o3", "gpt-4o")
    }
    data["openai"] = openai
    google = dict(data["google"])
    google["models"] = {
        k: v
        for k, v in google["models"].items()
        if k
        in ("gemini-2.0-flash", "gemini-3-pro-preview", "gemini-2.5-flash-image", "gemma-4-31b-it")
    }
    data["google"] = google
    catalog = Catalog.from_models_dev(data)
    # No preference matches: the newest eligible wins, skipping the newer image models.
    assert choose_default_model(catalog, {"openai"}) == ModelRef(
        provider_id="openai", model_id="o3"
    )
    # The deprecated models and the image model are newer or first; gemma is what is left.
    assert choose_default_model(catalog, {"google"}) == ModelRef(
        provider_id="google", model_id="gemma-4-31b-it"
    )


def test_first_provider_with_credentials_wins_in_a_stable_order(catalog):
    both = choose_default_model(catalog, {"openai", "anthropic"})
    assert both is not None and both.provider_id == "anthropic"
    ordered = [p.id for p in usable_providers(catalog, {"xai", "google", "deepseek"})]
    assert ordered == ["google", "deepseek", "xai"]


def test_providers_without_an_eligible_model_are_skipped(catalog):
    # Bedrock's models speak no protocol this runtime has: the next provider is used.
    ref = choose_default_model(catalog, {"amazon-bedrock", "deepseek"})
    assert ref is not None and ref.provider_id == "deepseek"
    assert choose_default_model(catalog, {"amazon-bedrock"}) is None
    assert choose_default_model(catalog, set()) is None


def test_a_provider_needing_no_credential_is_chosen_when_no_keyed_provider_exists(catalog):
    local = catalog.with_config(LOCAL)
    assert local.provider("local").env == []
    assert choose_default_model(local, set()) == ModelRef(
        provider_id="local", model_id="qwen-coder"
    )
    # A keyed provider still comes first when its key is set.
    keyed = choose_default_model(local, {"openai"})
    assert keyed is not None and keyed.provider_id == "openai"
    assert [p.id for p in usable_providers(local, {"openai"})] == ["openai", "local"]


def test_small_model_is_the_cheapest_current_text_model(catalog):
    assert choose_small_model(catalog, "openai") == ModelRef(
        provider_id="openai", model_id="gpt-5-nano"
    )
    # claude-3-haiku is cheaper but deprecated.
    assert choose_small_model(catalog, "anthropic") == ModelRef(
        provider_id="anthropic", model_id="claude-haiku-4-5"
    )
    google = choose_small_model(catalog, "google")
    assert google is not None and "flash-lite" in google.model_id
    assert catalog.model(google).status == "available"
    assert choose_small_model(catalog, "nope") is None
    assert choose_small_model(catalog, "amazon-bedrock") is None  # no protocol spoken
    assert choose_small_model(catalog.with_config(LOCAL), "local") is None  # no prices


def test_a_wrong_model_is_named_with_the_providers_models(catalog):
    with pytest.raises(CatalogError) as caught:
        resolve_model(catalog, {"openai"}, "openai/gpt-9")
    message = str(caught.value)
    assert message.startswith("unknown model 'openai/gpt-9'; known models of provider openai: ")
    assert message.index("gpt-5.5,") < message.index("gpt-5.4,")  # newest first
    assert "gpt-3.5-turbo" not in message and "and 21 more" in message
    assert "no LLM provider" not in message
    with pytest.raises(CatalogError, match="unknown model 'nope/x': no provider 'nope'"):
        resolve_model(catalog, {"openai"}, "nope/x")
    with pytest.raises(CatalogError, match="not of the form provider/model"):
        resolve_model(catalog, {"openai"}, "gpt-5")
    with pytest.raises(CatalogError, match="needs credentials for provider anthropic"):
        resolve_model(catalog, {"openai"}, "anthropic/claude-sonnet-5")


def test_a_named_model_is_used_as_named(catalog):
    # Named models are not second-guessed: an old one is the user's choice.
    assert resolve_model(catalog, {"openai"}, "openai/gpt-4o") == ModelRef(
        provider_id="openai", model_id="gpt-4o"
    )
    assert resolve_model(catalog, {"openrouter"}, "openrouter/openai/gpt-5") == ModelRef(
        provider_id="openrouter", model_id="openai/gpt-5"
    )
    local = catalog.with_config(LOCAL)
    assert resolve_model(local, set(), "local/tiny") == ModelRef(
        provider_id="local", model_id="tiny"
    )
    assert resolve_model(catalog, {"google"}, None) == ModelRef(
        provider_id="google", model_id="gemini-2.5-pro"
    )
    assert parse_model(" a/b/c ") == ModelRef(provider_id="a", model_id="b/c")


def test_providers_with_credentials_look_where_auth_looks(catalog):
    configured = catalog.with_config(
        {
            "provider": {
                "proxy": {"options": {"baseURL": "http://p/v1", "apiKey": "{env:PROXY_KEY}"}},
                "literal": {"options": {"baseURL": "http://l/v1", "apiKey": "sk-inline"}},
                **LOCAL["provider"],
            }
        }
    )
    env = {"OPENAI_API_KEY": "sk-x", "GEMINI_API_KEY": "", "UNRELATED": "1"}
    found = providers_with_credentials(configured, env, {"xai"})
    assert found == {"openai", "xai", "literal"}
    with_proxy = providers_with_credentials(configured, {**env, "PROXY_KEY": "k"}, ())
    assert with_proxy == {"openai", "literal", "proxy"}
    # The keyless local provider needs none, so it is usable without being credentialed.
    assert "local" in [p.id for p in usable_providers(configured, found)]


def test_each_providers_default_model(catalog):
    defaults = {pid: provider_default_model(catalog, pid) for pid in catalog.providers}
    assert defaults["openai"] == ModelRef(provider_id="openai", model_id="gpt-5.5")
    assert defaults["github-copilot"] == ModelRef(
        provider_id="github-copilot", model_id="claude-sonnet-5"
    )
    assert defaults["amazon-bedrock"] is None  # no protocol spoken
    for ref in filter(None, defaults.values()):
        _agentic_and_current(catalog, ref)
    assert provider_default_model(catalog, "nope") is None


def test_a_configured_provider_without_dates_defaults_to_its_first_listed_model(catalog):
    local = catalog.with_config(
        {
            "provider": {
                "local": {
                    "options": {"baseURL": "http://x/v1"},
                    "models": {"coder-1": {}, "tiny": {}},
                }
            }
        }
    )
    assert provider_default_model(local, "local") == ModelRef(
        provider_id="local", model_id="coder-1"
    )
