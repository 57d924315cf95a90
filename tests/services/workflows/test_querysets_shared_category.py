"""A hand-written or edited query whose ground truth has two documents of one category is flagged with the reason:
a multi-aspect query's aspects each come from their own category (its Category Success Ratio would count that
category once, so the query is not the n-aspect query it is filed under). Documents of a legal / accident topic
layout, whose ground truth is every document of a topic, are not held to it."""

from __future__ import annotations

import db
from services.ingest.benchmarks import topic_source
from services.workflows import querysets as qw


def _corpus(store: db.Store) -> dict[str, int]:
    corpus = db.create_corpus(store, "Mix")
    db.add_documents(store, corpus.id, [
        {"title": "Venus", "text": "Venus is wrapped in thick clouds of acid.", "label": "space"},
        {"title": "Comets", "text": "A comet grows a bright tail near the sun.", "label": "space"},
        {"title": "Curry", "text": "A curry simmers with cumin and coriander.", "label": "food"},
        {"title": "Theft case", "text": "The court heard the theft case in May.", "label": "criminal",
         "source": topic_source("cases.zip", "theft")},
        {"title": "Theft appeal", "text": "The appeal of the theft case failed.", "label": "criminal",
         "source": topic_source("cases.zip", "theft")},
    ])
    return {d.title: d.id for d in db.list_documents(store, corpus.id, limit=None).items}


def test_two_documents_of_one_category_flag_the_query_with_the_reason(store: db.Store) -> None:
    ids = _corpus(store)
    qs = db.create_query_set(store, db.get_corpus_by_name(store, "Mix").id, "Hand")
    row = qw.add_manual_query(store, qs.id, text="Venus, Comets and Curry on one night.",
                              ground_truth=[ids["Venus"], ids["Comets"], ids["Curry"]])
    assert row.status == "flagged" and row.n_aspects == 3
    assert row.error == ("ground-truth documents 'Venus' and 'Comets' share the category 'space' (each aspect "
                         "should come from its own category)")
    fixed = qw.edit_query(store, row.id, text="Venus and Curry on one night.",
                          ground_truth=[ids["Venus"], ids["Curry"]])
    assert (fixed.status, fixed.error, fixed.n_aspects) == ("ok", "", 2)
    again = qw.edit_query(store, row.id, text="Venus or Comets?", ground_truth=[ids["Venus"], ids["Comets"]])
    assert again.status == "flagged" and "share the category 'space'" in again.error


def test_topic_layout_documents_of_one_category_stay_ok(store: db.Store) -> None:
    ids = _corpus(store)
    qs = db.create_query_set(store, db.get_corpus_by_name(store, "Mix").id, "Topics")
    row = qw.add_manual_query(store, qs.id, text="Theft case and Theft appeal, with Curry.",
                              ground_truth=[ids["Theft case"], ids["Theft appeal"], ids["Curry"]])
    assert (row.status, row.error) == ("ok", "")
