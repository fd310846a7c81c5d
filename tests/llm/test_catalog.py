"""Catalog: models.dev mapping, config merge, option partition, status, sources, cost."""

import json
import os

import httpx
import pytest

from runtime.llm import (
    BUNDLED_SNAPSHOT,
    Catalog,
    CatalogError,
    GenerationControls,
    ModelCost,
    ModelRef,
    Usage,
    load_catalog,
    load_models_dev,
    partition_options,
    step_cost,
)


def ref(p, m, v=None):
    return ModelRef(provider_id=p, model_id=m, variant=v)


class TestModelsDev:
    def test_protocol_follows_npm(self, models_dev):
        catalog = Catalog.from_models_dev(models_dev)
        protocols = {
            pid: {m.protocol for m in p.models.values()} for pid, p in catalog.providers.items()
        }
        assert protocols["openai"] == {"openai-responses"}
        assert protocols["anthropic"] == {"anthropic-messages"}
        assert protocols["google"] == {"gemini"}
        assert protocols["deepseek"] == {"openai-chat"}
        assert protocols["openrouter"] == {"openai-chat"}
        assert protocols["amazon-bedrock"] == {None}

    def test_fields_limits_costs_modalities(self, models_dev):
        catalog = Catalog.from_models_dev(models_dev)
        m = catalog.model(ref("anthropic", "claude-sonnet-4-5"))
        raw = models_dev["anthropic"]["models"]["claude-sonnet-4-5"]
        assert (
            m.limit.context == raw["limit"]["context"] and m.limit.output == raw["limit"]["output"]
        )
        assert (
            m.cost.input == raw["cost"]["input"]
            and m.cost.cache_write == raw["cost"]["cache_write"]
        )
        assert m.input_modalities == raw["modalities"]["input"]
        assert m.reasoning is True and m.tool_call is True
        ds = catalog.model(ref("deepseek", "deepseek-reasoner"))
        assert ds.interleaved_field == "reasoning_content"
        assert catalog.model(ref("openai", "gpt-5.5")).cost.over_200k is not None

    def test_status(self, models_dev):
        catalog = Catalog.from_models_dev(models_dev)
        assert catalog.model(ref("anthropic", "claude-3-5-sonnet-20240620")).status == "deprecated"
        assert catalog.model(ref("anthropic", "claude-sonnet-4-5")).status == "available"
        data = json.loads(json.dumps(models_dev))
        data["anthropic"]["models"]["claude-sonnet-4-5"]["status"] = "alpha"
        hidden = Catalog.from_models_dev(data)
        assert hidden.model(ref("anthropic", "claude-sonnet-4-5")).status == "hidden"
        assert all(
            m.id != "claude-sonnet-4-5" or m.provider_id != "anthropic" for m in hidden.models()
        )
        assert len(hidden.models(include_hidden=True)) == len(hidden.models()) + 1

    def test_a_new_provider_needs_only_data(self, models_dev):
        data = dict(models_dev)
        data["newlab"] = {
            "id": "newlab",
            "env": ["NEWLAB_API_KEY"],
            "npm": "@ai-sdk/openai-compatible",
            "api": "https://api.newlab.example/v1",
            "name": "New Lab",
            "models": {
                "nl-1": {"id": "nl-1", "name": "NL 1", "limit": {"context": 1000, "output": 100}}
            },
        }
        m = Catalog.from_models_dev(data).model(ref("newlab", "nl-1"))
        assert (m.protocol, m.api) == ("openai-chat", "https://api.newlab.example/v1")

    def test_unknown_lookups(self, models_dev):
        catalog = Catalog.from_models_dev(models_dev)
        with pytest.raises(CatalogError, match="unknown model 'nope/x': no provider 'nope'"):
            catalog.model(ref("nope", "x"))
        with pytest.raises(CatalogError, match="unknown provider"):
            catalog.provider("nope")
        with pytest.raises(CatalogError, match="no variant"):
            catalog.resolve(ref("openai", "gpt-5", "turbo"))


class TestConfig:
    def test_partition_three_domains(self):
        request, generation, body, headers = partition_options(
            {
                "temperature": 0.1,
                "topP": 0.9,
                "maxOutputTokens": 500,
                "reasoningEffort": "high",
                "thinking": {"type": "enabled", "budgetTokens": 8000},
                "store": True,
                "body": {"repetition_penalty": 1.1},
                "headers": {"X-Tenant": "t1"},
            }
        )
        assert request == {"reasoning_effort": "high", "thinking_budget": 8000, "store": True}
        assert generation == GenerationControls(temperature=0.1, top_p=0.9, max_output_tokens=500)
        assert body == {"repetition_penalty": 1.1}
        assert headers == {"X-Tenant": "t1"}

    def test_overlay_existing_provider_and_variants(self, models_dev):
        config = {
            "provider": {
                "openai": {
                    "options": {"baseURL": "https://proxy.example/v1"},
                    "models": {
                        "gpt-5": {
                            "options": {"reasoningEffort": "medium"},
                            "variants": {
                                "high": {"reasoningEffort": "high", "maxOutputTokens": 32000}
                            },
                        }
                    },
                }
            }
        }
        catalog = Catalog.from_models_dev(models_dev).with_config(config)
        assert catalog.provider("openai").options["baseURL"] == "https://proxy.example/v1"
        plain = catalog.resolve(ref("openai", "gpt-5"))
        assert plain.request_options == {"reasoning_effort": "medium"}
        high = catalog.resolve(ref("openai", "gpt-5", "high"))
        assert high.request_options == {"reasoning_effort": "high"}
        assert high.generation.max_output_tokens == 32000
        assert catalog.model(ref("openai", "gpt-5")).limit.context > 0  # models.dev data kept

    def test_disabled_providers(self, models_dev):
        catalog = Catalog.from_models_dev(models_dev).with_config({"disabled_providers": ["xai"]})
        assert "xai" not in catalog.providers

    def test_enabled_providers_keep_only_those(self, models_dev):
        config = {
            "enabled_providers": ["openai", "local"],
            "disabled_providers": ["openai"],
            "provider": {"local": {"options": {"baseURL": "http://127.0.0.1:1/v1"}}},
        }
        catalog = Catalog.from_models_dev(models_dev).with_config(config)
        assert list(catalog.providers) == ["local"]


class TestSources:
    async def test_fresh_cache_is_used_without_network(self, tmp_path):
        cache = tmp_path / "models.json"
        cache.write_text(
            json.dumps({"p": {"id": "p", "npm": "@ai-sdk/openai-compatible", "models": {}}})
        )

        def fail(request):
            raise AssertionError("no fetch expected")

        async with httpx.AsyncClient(transport=httpx.MockTransport(fail)) as http:
            data, source = await load_models_dev(
                cache_path=cache, client=http, allow_fetch=True, max_age=300, fetch_timeout=5
            )
        assert (list(data), source) == (["p"], "cache")

    async def test_stale_cache_refreshes_and_is_written_atomically(self, tmp_path):
        cache = tmp_path / "models.json"
        cache.write_text("{}")
        os.utime(cache, (0, 0))
        fresh = {"q": {"id": "q", "npm": "@ai-sdk/anthropic", "models": {}}}
        async with httpx.AsyncClient(
            transport=httpx.MockTransport(lambda r: httpx.Response(200, json=fresh))
        ) as http:
            data, source = await load_models_dev(
                cache_path=cache, client=http, allow_fetch=True, max_age=300, fetch_timeout=5
            )
        assert (data, source) == (fresh, "network")
        assert json.loads(cache.read_text()) == fresh
        assert [p.name for p in tmp_path.iterdir()] == ["models.json"]

    async def test_failed_fetch_falls_back_to_stale_cache_then_bundle(self, tmp_path):
        cache = tmp_path / "models.json"
        cache.write_text('{"stale": {"id": "stale", "models": {}}}')
        os.utime(cache, (0, 0))
        async with httpx.AsyncClient(
            transport=httpx.MockTransport(lambda r: httpx.Response(503))
        ) as http:
            _, source = await load_models_dev(
                cache_path=cache, client=http, allow_fetch=True, max_age=300, fetch_timeout=5
            )
            assert source == "stale-cache"
            data, source = await load_models_dev(
                cache_path=tmp_path / "absent.json",
                client=http,
                allow_fetch=True,
                max_age=300,
                fetch_timeout=5,
            )
        assert source == "bundled" and "anthropic" in data
        assert BUNDLED_SNAPSHOT.exists()

    async def test_offline_catalog_with_config(self, tmp_path):
        catalog = await load_catalog(
            cache_path=tmp_path / "none.json",
            config={
                "provider": {
                    "local": {"options": {"baseURL": "http://127.0.0.1:1/v1"}, "models": {"m": {}}}
                }
            },
        )
        assert catalog.model(ref("local", "m")).protocol == "openai-chat"
        assert catalog.model(ref("anthropic", "claude-sonnet-4-5")).name


class TestCost:
    def test_plain_prices(self):
        cost = ModelCost(input=3, output=15, cache_read=0.3, cache_write=3.75)
        usage = Usage(
            input_tokens=1_000_000,
            output_tokens=100_000,
            cache_read_tokens=2_000_000,
            cache_write_tokens=10_000,
        )
        assert step_cost(usage, cost) == pytest.approx(3 + 1.5 + 0.6 + 0.0375)

    def test_long_context_tier_and_reasoning_price(self):
        tier = ModelCost(input=10, output=40)
        cost = ModelCost(input=5, output=20, reasoning=30, over_200k=tier)
        small = Usage(input_tokens=100_000, output_tokens=1_000, reasoning_tokens=400)
        assert step_cost(small, cost) == pytest.approx((100_000 * 5 + 600 * 20 + 400 * 30) / 1e6)
        big = Usage(input_tokens=150_000, cache_read_tokens=60_000, output_tokens=1_000)
        assert step_cost(big, cost) == pytest.approx(
            (150_000 * 10 + 60_000 * 10 + 1_000 * 40) / 1e6
        )

    def test_no_prices(self):
        assert step_cost(Usage(input_tokens=5), None) == 0.0
