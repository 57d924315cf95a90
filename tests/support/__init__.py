"""Shared test helpers (fake OpenAI-compatible server, ...)."""
