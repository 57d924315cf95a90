"""Streamlit-side helpers shared by ``app.py`` and ``pages/``: cached resources, safe rendering."""
