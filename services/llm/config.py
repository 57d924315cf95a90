"""Configuration of the OpenAI-compatible chat endpoint used by MRAG Studio.

The endpoint is optional: when nothing is configured :meth:`LLMConfig.from_env`
returns ``None`` and the app falls back to its offline defaults (zero-shot
annotation, template queries).

Sources, later ones overriding earlier ones field by field:

1. environment variables
   ``MRAG_LLM_BASE_URL`` (fallback ``OPENAI_BASE_URL``), ``MRAG_LLM_MODEL``,
   ``MRAG_LLM_API_KEY`` (fallback ``OPENAI_API_KEY``), ``MRAG_LLM_TIMEOUT``,
   ``MRAG_LLM_CONCURRENCY``, ``MRAG_LLM_MAX_RETRIES``;
2. a secrets mapping (``st.secrets``-like), in any of three spellings:
   a nested table ``[llm]`` with keys ``base_url``/``model``/``api_key``/
   ``timeout``/``concurrency``/``max_retries``, flat dotted keys
   ``"llm.base_url"`` ..., or flat environment-style keys
   ``"MRAG_LLM_MODEL"`` ... (also ``OPENAI_API_KEY``/``OPENAI_BASE_URL``).

Configuration is *triggered* only by a model or by our own base URL
(``MRAG_LLM_BASE_URL`` / secrets): an ``OPENAI_API_KEY`` that merely sits in the
shell does not switch the app to an LLM.

Security: the API key is never part of ``repr``/``str``/:meth:`describe` or any
error message, and credentials embedded in the base URL
(``https://user:pass@host``) are masked in those too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping
from urllib.parse import urlsplit, urlunsplit

__all__ = ["DEFAULT_OPENAI_BASE_URL", "LLMConfig", "LLMConfigError", "redact_url"]

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"

_FIELDS = ("base_url", "model", "api_key", "timeout", "concurrency", "max_retries")
_ENV_NAMES: dict[str, tuple[str, ...]] = {
    "base_url": ("MRAG_LLM_BASE_URL",),
    "model": ("MRAG_LLM_MODEL",),
    "api_key": ("MRAG_LLM_API_KEY",),
    "timeout": ("MRAG_LLM_TIMEOUT",),
    "concurrency": ("MRAG_LLM_CONCURRENCY",),
    "max_retries": ("MRAG_LLM_MAX_RETRIES",),
}
# Fallbacks that fill a field but never, on their own, enable the LLM.
_FALLBACK_ENV_NAMES: dict[str, str] = {"base_url": "OPENAI_BASE_URL", "api_key": "OPENAI_API_KEY"}


def no_endpoint_message(needs: str) -> str:
    """What to say when ``needs`` (e.g. ``"hyde needs"``) an endpoint and none is configured: the settings to set."""
    return (f"{needs} an OpenAI-compatible LLM endpoint, and none is configured: set MRAG_LLM_BASE_URL and "
            "MRAG_LLM_MODEL (and MRAG_LLM_API_KEY if it needs one)")


class LLMConfigError(ValueError):
    """The LLM configuration is incomplete or has an invalid value (message names the setting)."""


def redact_url(url: str | None) -> str:
    """Return ``url`` with any ``user:password@`` part replaced by ``***@``; ``None`` -> OpenAI default."""
    if url is None:
        return DEFAULT_OPENAI_BASE_URL
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, f"***@{host}", parts.path, parts.query, parts.fragment))


def _clean(value: Any) -> str | None:
    """Normalise a raw setting: ``None``/blank -> ``None``, otherwise the stripped string."""
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _secrets_get(secrets: Mapping[str, Any], key: str) -> Any:
    """``secrets.get(key)`` that treats a missing/unreadable secrets source as empty.

    ``st.secrets`` raises ``FileNotFoundError`` (``StreamlitSecretNotFoundError``)
    when no ``secrets.toml`` exists; that simply means "no secrets".
    """
    try:
        return secrets.get(key)
    except (FileNotFoundError, KeyError):
        return None


def _from_secrets(secrets: Mapping[str, Any] | None) -> dict[str, str]:
    """Collect settings from a secrets mapping (nested ``llm`` table, dotted or env-style keys)."""
    found: dict[str, str] = {}
    if secrets is None:
        return found
    for name in _FIELDS:  # env-style flat keys, lowest priority among secrets
        for key in (*_ENV_NAMES[name], _FALLBACK_ENV_NAMES.get(name)):
            if key is None or name in found:
                continue
            value = _clean(_secrets_get(secrets, key))
            if value is not None:
                found[name] = value
    table = _secrets_get(secrets, "llm")
    for name in _FIELDS:
        dotted = _clean(_secrets_get(secrets, f"llm.{name}"))
        if dotted is not None:
            found[name] = dotted
        if isinstance(table, Mapping):
            nested = _clean(_secrets_get(table, name))
            if nested is not None:
                found[name] = nested
    return found


def _from_env(env: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Return (primary settings, fallback-only settings) read from ``env``."""
    primary: dict[str, str] = {}
    for name, keys in _ENV_NAMES.items():
        for key in keys:
            value = _clean(env.get(key))
            if value is not None:
                primary[name] = value
                break
    fallback: dict[str, str] = {}
    for name, key in _FALLBACK_ENV_NAMES.items():
        value = _clean(env.get(key))
        if value is not None:
            fallback[name] = value
    return primary, fallback


def _parse_positive_float(raw: str, setting: str) -> float:
    """Parse a strictly positive float or raise :class:`LLMConfigError` naming ``setting``."""
    try:
        value = float(raw)
    except ValueError:
        raise LLMConfigError(f"{setting} must be a number of seconds, got {raw!r}.") from None
    if not value > 0 or value == float("inf"):
        raise LLMConfigError(f"{setting} must be a positive number of seconds, got {raw!r}.")
    return value


def _parse_int(raw: str, setting: str, minimum: int) -> int:
    """Parse an integer ``>= minimum`` or raise :class:`LLMConfigError` naming ``setting``."""
    try:
        value = int(raw)
    except ValueError:
        raise LLMConfigError(f"{setting} must be a whole number, got {raw!r}.") from None
    if value < minimum:
        raise LLMConfigError(f"{setting} must be at least {minimum}, got {value}.")
    return value


@dataclass(frozen=True)
class LLMConfig:
    """Where and how to call an OpenAI-compatible chat-completions endpoint.

    ``base_url=None`` means the official OpenAI endpoint
    (:data:`DEFAULT_OPENAI_BASE_URL`). ``max_retries`` counts *our* retries
    (the openai client itself is built with ``max_retries=0``), so one call makes
    at most ``1 + max_retries`` HTTP requests. ``concurrency`` is the default
    number of requests in flight for batch jobs.
    """

    base_url: str | None
    model: str
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 60.0
    max_retries: int = 4
    concurrency: int = 4

    def __post_init__(self) -> None:
        if not self.model or not self.model.strip():
            raise LLMConfigError("The LLM model name must not be empty.")
        if not self.timeout_s > 0:
            raise LLMConfigError(f"timeout_s must be positive, got {self.timeout_s}.")
        if self.max_retries < 0:
            raise LLMConfigError(f"max_retries must be >= 0, got {self.max_retries}.")
        if self.concurrency < 1:
            raise LLMConfigError(f"concurrency must be >= 1, got {self.concurrency}.")

    def __repr__(self) -> str:
        """Like the dataclass repr, but without the key and with URL credentials masked."""
        url = None if self.base_url is None else redact_url(self.base_url)
        return (
            f"LLMConfig(base_url={url!r}, model={self.model!r}, timeout_s={self.timeout_s!r}, "
            f"max_retries={self.max_retries!r}, concurrency={self.concurrency!r})"
        )

    __str__ = __repr__

    @property
    def effective_base_url(self) -> str:
        """The URL actually called: ``base_url`` or the OpenAI default."""
        return self.base_url if self.base_url is not None else DEFAULT_OPENAI_BASE_URL

    @property
    def has_api_key(self) -> bool:
        """Whether a (non-empty) API key is configured."""
        return bool(self.api_key)

    def describe(self) -> str:
        """Safe one-line summary for the UI/logs, e.g.
        ``model 'gpt-4o-mini' at https://api.openai.com/v1 (API key set, timeout 60s, 4 parallel, up to 4 retries,
        1 after a timeout)``: the retries a request really gets (a timed-out one is sent again once only, however
        many retries are configured). Never contains the key."""
        key = "API key set" if self.has_api_key else "no API key"
        retries = (f"up to {self.max_retries} retries, 1 after a timeout" if self.max_retries > 1 else
                   "1 retry" if self.max_retries == 1 else "no retries")
        return (
            f"model {self.model!r} at {redact_url(self.base_url)} "
            f"({key}, timeout {self.timeout_s:g}s, {self.concurrency} parallel, {retries})"
        )

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, secrets: Mapping[str, Any] | None = None
    ) -> LLMConfig | None:
        """Build the config from ``env`` (default ``os.environ``) and ``secrets`` (overrides env).

        Returns ``None`` when neither a model nor an MRAG/secrets base URL is
        configured (the app then uses offline defaults). Raises
        :class:`LLMConfigError` when the configuration is started but unusable:
        a base URL without a model, a model for the official OpenAI endpoint
        without an API key, or a malformed timeout/concurrency/retry value.
        """
        primary, fallback = _from_env(os.environ if env is None else env)
        from_secrets = _from_secrets(secrets)
        settings = {**fallback, **primary, **from_secrets}
        triggered = "model" in settings or "base_url" in primary or "base_url" in from_secrets
        if not triggered:
            return None
        model = settings.get("model")
        base_url = settings.get("base_url")
        if model is None:
            raise LLMConfigError(
                f"An LLM endpoint is configured ({redact_url(base_url)}) but no model: "
                "set MRAG_LLM_MODEL (or llm.model in secrets)."
            )
        api_key = settings.get("api_key")
        if base_url is None and api_key is None:
            raise LLMConfigError(
                f"Model {model!r} would use the official OpenAI endpoint, which needs an API key: "
                "set MRAG_LLM_API_KEY / OPENAI_API_KEY, or MRAG_LLM_BASE_URL for a local server."
            )
        timeout = settings.get("timeout")
        concurrency = settings.get("concurrency")
        retries = settings.get("max_retries")
        return cls(
            base_url=base_url,
            model=model,
            api_key=api_key,
            timeout_s=60.0 if timeout is None else _parse_positive_float(timeout, "MRAG_LLM_TIMEOUT"),
            max_retries=4 if retries is None else _parse_int(retries, "MRAG_LLM_MAX_RETRIES", 0),
            concurrency=4 if concurrency is None else _parse_int(concurrency, "MRAG_LLM_CONCURRENCY", 1),
        )
