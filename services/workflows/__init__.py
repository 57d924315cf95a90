"""Workflows that join the engine and the store (used by the UI and the CLI alike; no Streamlit)."""
