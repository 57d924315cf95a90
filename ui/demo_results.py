"""Home's "Results on the demo queries": the newest demo run's Standard vs MRAG vs the recommended strategy with
95% intervals, where each one loses, or how to get such a run (:mod:`services.workflows.home_summary`)."""

from __future__ import annotations

import streamlit as st

from services.workflows import home_summary
from ui.render import md_plain


def draw_demo_results(store) -> None:
    """The section, read from the store through :func:`home_summary.demo_summary`."""
    st.subheader("Results on the demo queries")
    summary = home_summary.demo_summary(store)
    if summary is None:
        st.info(home_summary.how_to_run())
        return
    names = ", ".join(summary.labels[s] for s in summary.strategies)
    st.caption(f"Run #{summary.run_id} ({md_plain(summary.model)}, layer {summary.layer}): {names} on "
               f"{summary.n_queries} queries, k = 1..{summary.k_max}. Mean weighted "
               "ratio (w·RSR + CSR) / (w + 1) and RSR (exact documents found) on the queries with the most aspects, "
               "each with its 95% bootstrap interval [low, high] over those queries.")
    st.dataframe(summary.table(), hide_index=True, key="home_demo_summary")
    if summary.losses:
        st.markdown("**Where a strategy loses**")
        st.markdown("\n".join(f"- {md_plain(line)}" for line in summary.losses))
    else:
        st.markdown("**Where a strategy loses**: nowhere in this run (no mean below another's at any aspect count "
                    "at k = that count, nor at the middle k).")
    for line in summary.verdicts:
        st.caption(md_plain(line))
    for line in summary.missing:
        st.info(md_plain(line))
