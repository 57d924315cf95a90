"""MRAG Studio's application services: the workflows that join the engine (:mod:`mrag_core`) and the
store (:mod:`db`), the LLM client and its cache, imports, query generation, annotators, the reader,
the exports and the command line (``mrag-studio``). No Streamlit: the pages and ``ui`` call in.
"""
