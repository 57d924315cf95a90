"""Optional LLM access: endpoint configuration, retrying client, bounded concurrency.

Everything here works against any OpenAI-compatible chat-completions endpoint.
When no endpoint is configured (:meth:`LLMConfig.from_env` returns ``None``) the
app uses offline fallbacks instead.
"""

from __future__ import annotations

from services.llm.client import LLMCancelled, LLMClient, LLMError, LLMReply
from services.llm.concurrency import Outcome, run_concurrent
from services.llm.config import LLMConfig, LLMConfigError

__all__ = [
    "LLMCancelled", "LLMClient", "LLMConfig", "LLMConfigError", "LLMError", "LLMReply", "Outcome", "run_concurrent",
]
