"""LLMConfig: env/secrets resolution, validation, and that the key never leaks."""

from __future__ import annotations

from typing import Any, Iterator, Mapping

import pytest

from services.llm.config import DEFAULT_OPENAI_BASE_URL, LLMConfig, LLMConfigError, redact_url

SECRET = "sk-supersecret-0123456789"


def test_nothing_configured_returns_none() -> None:
    assert LLMConfig.from_env({}) is None
    assert LLMConfig.from_env({}, secrets={}) is None


def test_a_stray_openai_key_alone_does_not_enable_the_llm() -> None:
    assert LLMConfig.from_env({"OPENAI_API_KEY": SECRET, "OPENAI_BASE_URL": "http://x/v1"}) is None


def test_reads_mrag_variables() -> None:
    cfg = LLMConfig.from_env(
        {
            "MRAG_LLM_BASE_URL": "http://localhost:8000/v1",
            "MRAG_LLM_MODEL": " qwen2.5-7b ",
            "MRAG_LLM_API_KEY": SECRET,
            "MRAG_LLM_TIMEOUT": "12.5",
            "MRAG_LLM_CONCURRENCY": "8",
            "MRAG_LLM_MAX_RETRIES": "0",
        }
    )
    assert cfg == LLMConfig(
        base_url="http://localhost:8000/v1",
        model="qwen2.5-7b",
        api_key=SECRET,
        timeout_s=12.5,
        max_retries=0,
        concurrency=8,
    )


def test_openai_fallbacks_fill_url_and_key_and_defaults_apply() -> None:
    cfg = LLMConfig.from_env({"MRAG_LLM_MODEL": "m", "OPENAI_BASE_URL": "http://o/v1", "OPENAI_API_KEY": SECRET})
    assert cfg is not None
    assert (cfg.base_url, cfg.api_key, cfg.timeout_s, cfg.max_retries, cfg.concurrency) == (
        "http://o/v1",
        SECRET,
        60.0,
        4,
        4,
    )


def test_mrag_variables_win_over_openai_fallbacks() -> None:
    cfg = LLMConfig.from_env(
        {
            "MRAG_LLM_MODEL": "m",
            "MRAG_LLM_BASE_URL": "http://mrag/v1",
            "OPENAI_BASE_URL": "http://o/v1",
            "MRAG_LLM_API_KEY": "k1",
            "OPENAI_API_KEY": "k2",
        }
    )
    assert cfg is not None and cfg.base_url == "http://mrag/v1" and cfg.api_key == "k1"


def test_model_without_url_uses_openai_default_when_a_key_exists() -> None:
    cfg = LLMConfig.from_env({"MRAG_LLM_MODEL": "gpt-4o-mini", "OPENAI_API_KEY": SECRET})
    assert cfg is not None and cfg.base_url is None
    assert cfg.effective_base_url == DEFAULT_OPENAI_BASE_URL


def test_nested_secrets_override_env() -> None:
    env = {"MRAG_LLM_MODEL": "env-model", "MRAG_LLM_BASE_URL": "http://env/v1", "MRAG_LLM_CONCURRENCY": "2"}
    secrets = {"llm": {"model": "secret-model", "api_key": SECRET, "concurrency": 6}}
    cfg = LLMConfig.from_env(env, secrets=secrets)
    assert cfg is not None
    assert (cfg.model, cfg.base_url, cfg.api_key, cfg.concurrency) == ("secret-model", "http://env/v1", SECRET, 6)


def test_dotted_and_env_style_flat_secrets() -> None:
    dotted = LLMConfig.from_env({}, secrets={"llm.base_url": "http://s/v1", "llm.model": "m1", "llm.timeout": 3})
    assert dotted is not None and (dotted.base_url, dotted.model, dotted.timeout_s) == ("http://s/v1", "m1", 3.0)
    flat = LLMConfig.from_env({}, secrets={"MRAG_LLM_BASE_URL": "http://f/v1", "MRAG_LLM_MODEL": "m2"})
    assert flat is not None and (flat.base_url, flat.model) == ("http://f/v1", "m2")


class _MissingSecretsFile(Mapping[str, Any]):
    """Behaves like ``st.secrets`` when no secrets.toml exists: every access raises FileNotFoundError."""

    def __getitem__(self, key: str) -> Any:
        raise FileNotFoundError("No secrets found")

    def __iter__(self) -> Iterator[str]:
        raise FileNotFoundError("No secrets found")

    def __len__(self) -> int:
        raise FileNotFoundError("No secrets found")


def test_unreadable_secrets_source_counts_as_empty() -> None:
    assert LLMConfig.from_env({}, secrets=_MissingSecretsFile()) is None
    cfg = LLMConfig.from_env({"MRAG_LLM_MODEL": "m", "MRAG_LLM_BASE_URL": "http://e/v1"}, secrets=_MissingSecretsFile())
    assert cfg is not None and cfg.model == "m"


def test_url_without_model_is_a_clear_error() -> None:
    with pytest.raises(LLMConfigError, match="MRAG_LLM_MODEL"):
        LLMConfig.from_env({"MRAG_LLM_BASE_URL": "http://localhost:8000/v1", "MRAG_LLM_API_KEY": SECRET})


def test_official_endpoint_without_key_is_a_clear_error() -> None:
    with pytest.raises(LLMConfigError, match="API key"):
        LLMConfig.from_env({"MRAG_LLM_MODEL": "gpt-4o-mini"})


@pytest.mark.parametrize(
    ("name", "value", "fragment"),
    [
        ("MRAG_LLM_TIMEOUT", "soon", "MRAG_LLM_TIMEOUT"),
        ("MRAG_LLM_TIMEOUT", "-1", "positive"),
        ("MRAG_LLM_CONCURRENCY", "0", "at least 1"),
        ("MRAG_LLM_CONCURRENCY", "2.5", "whole number"),
        ("MRAG_LLM_MAX_RETRIES", "-1", "at least 0"),
    ],
)
def test_invalid_numbers_name_the_setting(name: str, value: str, fragment: str) -> None:
    env = {"MRAG_LLM_MODEL": "m", "MRAG_LLM_BASE_URL": "http://x/v1", "MRAG_LLM_API_KEY": SECRET, name: value}
    with pytest.raises(LLMConfigError, match=fragment) as info:
        LLMConfig.from_env(env)
    assert SECRET not in str(info.value)


def test_direct_construction_validates() -> None:
    with pytest.raises(LLMConfigError):
        LLMConfig(base_url=None, model=" ")
    with pytest.raises(LLMConfigError):
        LLMConfig(base_url=None, model="m", concurrency=0)


def test_key_never_in_repr_str_or_describe() -> None:
    cfg = LLMConfig(base_url="http://localhost:1/v1", model="m", api_key=SECRET)
    for text in (repr(cfg), str(cfg), cfg.describe(), f"{cfg}", repr([cfg])):
        assert SECRET not in text
    assert "API key set" in cfg.describe()
    assert "'m'" in cfg.describe() and "http://localhost:1/v1" in cfg.describe()
    assert "no API key" in LLMConfig(base_url="http://h/v1", model="m").describe()


def test_credentials_in_the_url_are_masked() -> None:
    cfg = LLMConfig(base_url="https://bob:hunter2@llm.example.com:8443/v1", model="m")
    for text in (repr(cfg), cfg.describe()):
        assert "hunter2" not in text and "bob" not in text
        assert "https://***@llm.example.com:8443/v1" in text
    assert redact_url(None) == DEFAULT_OPENAI_BASE_URL
    assert redact_url("http://plain:9/v1") == "http://plain:9/v1"
