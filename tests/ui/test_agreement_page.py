"""AppTest runs of the team features: the Agreement and Export page (team set-up and assignment, kappa and alpha
with the documents they rest on, disagreements and adjudication) and the blind review queue of Annotate and
Review (a team member sees their documents, their own labels and the suggestion, never a colleague's label)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sklearn.metrics import cohen_kappa_score
from streamlit.testing.v1 import AppTest

import db
from tests.support.apptest import no_exceptions, page_store
from tests.ui.conftest import ON_EVERY_BACKEND

ROOT = Path(__file__).resolve().parents[2]
REVIEW_PAGE = str(ROOT / "pages" / "2_Annotate_and_Review.py")
AGREEMENT_PAGE = str(ROOT / "pages" / "3_Agreement_and_Export.py")
TEAM_FORM = "FormSubmitter:ag_team_form-Save team and assign documents"

pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


def _corpus(store: db.Store, n: int = 6) -> tuple[int, list[int], dict[str, int]]:
    c = db.create_corpus(store, "Team work")
    db.add_categories(store, c.id, ["sport", "politics", "science"])
    ids = db.add_documents(store, c.id, [{"title": f"Doc {i}", "text": f"text number {i}"} for i in range(n)]
                           ).document_ids
    return c.id, ids, {x.name: x.id for x in db.list_categories(store, c.id)}


def _page(path: str, corpus_id: int, name: str | None = None) -> AppTest:
    at = AppTest.from_file(path, default_timeout=60)
    at.session_state["corpus_id"] = corpus_id
    at.run()
    if name is not None:
        at.text_input(key="_reviewer_input").input(name).run()
    no_exceptions(at)
    return at


def _plain(markdown: str) -> str:
    """A message as read on the page: without the backslashes that escape data in Streamlit's Markdown."""
    return markdown.replace("\\", "")


def _blind(store: db.Store, who: str, doc: int, cat_id: int) -> None:
    db.decide_label(store, doc, cat_id, who, db.get_document(store, doc).version, blind=True)


@ON_EVERY_BACKEND
def test_team_form_deals_the_documents_with_the_overlap() -> None:
    store = page_store()
    corpus_id, ids, _ = _corpus(store, 10)
    at = _page(AGREEMENT_PAGE, corpus_id, "lead")
    assert any("Agreement needs two annotators" in i.value for i in at.info)
    at.text_area(key="ag_team_names").input("alice\nbob")
    at.number_input(key="ag_team_overlap").set_value(40.0)
    at.button(key=TEAM_FORM).click().run()
    no_exceptions(at)
    assert "Saved the team (alice, bob). Assigned 10 documents (4 to 2 annotators each)" in _plain(at.success[0].value)
    team = db.get_team(store, corpus_id)
    assert (team.names, team.n_assigned, team.n_shared, team.updated_by) == (["alice", "bob"], 10, 4, "lead")
    members = next(d.value for d in at.dataframe if "assigned" in d.value)
    assert members.set_index("annotator")["assigned"].to_dict() == {"alice": 7, "bob": 7}

    db.add_documents(store, corpus_id, [{"text": "a late document"}])
    at.run()
    at.button(key="ag_assign").click().run()
    no_exceptions(at)
    assert "Assigned 1 document (0 to 2 annotators each)" in _plain(at.success[0].value)
    assert db.get_team(store, corpus_id).n_assigned == 11

    at.text_area(key="ag_team_names").input("alice\nAlice")
    at.button(key=TEAM_FORM).click().run()
    assert "The team was not saved: Line 2: 'Alice' is named twice" in _plain(at.error[0].value)
    assert db.get_team(store, corpus_id).names == ["alice", "bob"]


def test_kappa_and_alpha_with_what_they_rest_on() -> None:
    store = page_store()
    corpus_id, ids, cats = _corpus(store, 6)
    alice = ["sport", "sport", "politics", "politics", "science", "science"]
    bob = ["sport", "politics", "politics", "politics", "science", "sport"]
    for doc, a, b in zip(ids, alice, bob):
        _blind(store, "alice", doc, cats[a])
        _blind(store, "bob", doc, cats[b])
    at = _page(AGREEMENT_PAGE, corpus_id)
    metrics = {m.label: m.value for m in at.metric}
    kappa = cohen_kappa_score(alice, bob)  # 0.5 by hand (tests/services/annotate/test_agreement_stats.py)
    assert metrics["Cohen's κ"] == f"{kappa:.3f}" == "0.500"
    assert metrics["Documents compared"] == "6"
    assert {"Fleiss' κ", "Krippendorff's α"} <= set(metrics)
    caption = next(c.value for c in at.caption if c.value.startswith("Cohen's κ"))
    assert "over 6 documents both labelled" in caption and "raw agreement 67%" in caption
    pairs = next(d.value for d in at.dataframe if "with" in d.value)
    assert pairs.iloc[0][["annotator", "with", "documents"]].tolist() == ["alice", "bob", 6]
    assert pairs.iloc[0]["Cohen's κ"] == pytest.approx(0.5)
    per = next(d.value for d in at.dataframe if "Cohen's kappa" in d.value).set_index("category")
    assert per.loc["sport", "Cohen's kappa"] == pytest.approx(0.25)  # by hand in the stats tests


def test_one_label_only_shows_na_with_the_reason_not_nan() -> None:
    store = page_store()
    corpus_id, ids, cats = _corpus(store, 2)
    for doc in ids:
        for who in ("alice", "bob"):
            _blind(store, who, doc, cats["sport"])
    at = _page(AGREEMENT_PAGE, corpus_id)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Cohen's κ"] == metrics["Fleiss' κ"] == metrics["Krippendorff's α"] == "n/a"
    caption = next(c.value for c in at.caption if c.value.startswith("Cohen's κ"))
    assert "chance agreement is 100%" in caption and "nan" not in caption.lower()


def test_disagreement_is_adjudicated_by_the_named_adjudicator() -> None:
    store = page_store()
    corpus_id, ids, cats = _corpus(store, 3)
    _blind(store, "alice", ids[0], cats["sport"])
    _blind(store, "bob", ids[0], cats["politics"])
    _blind(store, "alice", ids[1], cats["science"])
    _blind(store, "bob", ids[1], cats["science"])
    at = _page(AGREEMENT_PAGE, corpus_id, "Judge")
    table = next(d.value for d in at.dataframe if "label now" in d.value)
    assert table["id"].tolist() == [ids[0]] and table["labels"].iloc[0] == "alice: sport · bob: politics"
    assert at.selectbox(key="ag_adj_doc").value == ids[0]
    assert at.selectbox(key=f"ag_adj_label_{ids[0]}").value in ("sport", "politics")
    at.selectbox(key=f"ag_adj_label_{ids[0]}").set_value("sport")
    at.text_input(key=f"ag_adj_note_{ids[0]}").input("the match report wins")
    at.button(key="ag_adjudicate").click().run()
    no_exceptions(at)
    assert "Adjudicated 'Doc 0': its label is 'sport' now (by 'Judge')" in _plain(at.success[0].value)
    last = db.list_decisions(store, ids[0])[-1]
    assert (last.annotator, last.method, last.blind, last.category, last.note) == (
        "Judge", "adjudication", False, "sport", "the match report wins")
    assert db.get_document(store, ids[0]).label == "sport"
    assert any("No document to adjudicate" in c.value for c in at.caption)
    at.checkbox(key="ag_dis_all").check().run()
    table = next(d.value for d in at.dataframe if "label now" in d.value)
    assert table["adjudicated"].iloc[0].startswith("sport by Judge, ")


def test_suggestions_accepted_in_bulk_are_counted_apart() -> None:
    store = page_store()
    corpus_id, ids, cats = _corpus(store, 3)
    sugs = db.add_suggestions(store, [{"document_id": d, "category": "sport", "agent": "llm"} for d in ids])
    db.accept_suggestions(store, [(sugs[0], 1), (sugs[1], 1)], "ann")
    db.decide_label(store, ids[2], cats["politics"], "ann", 1)
    at = _page(AGREEMENT_PAGE, corpus_id)
    metrics = {m.label: m.value for m in at.metric}
    assert (metrics["Documents compared"], metrics["Agreement"], metrics["Bulk-accepted (apart)"]) == (
        "1", "0.0%", "2")
    assert any("2 documents labelled by accepting the suggestion in bulk" in c.value for c in at.caption)


def test_blind_review_queue_shows_only_the_annotator_s_own_work() -> None:
    store = page_store()
    corpus_id, ids, cats = _corpus(store, 4)
    db.save_team(store, corpus_id, ["alice", "bob"], overlap_percent=50.0, per_shared=2)
    db.add_assignments(store, corpus_id, {ids[0]: ["alice", "bob"], ids[1]: ["alice"], ids[2]: ["bob"],
                                          ids[3]: ["bob"]})
    db.add_suggestions(store, [{"document_id": ids[0], "category": "science", "agent": "llm", "score": 0.8}])
    _blind(store, "bob", ids[0], cats["politics"])
    at = _page(REVIEW_PAGE, corpus_id, " ALICE ")  # up to case and spacing: the team's 'alice'
    at.radio(key="ar_view").set_value("Review queue").run()
    no_exceptions(at)
    assert "Blind annotation: you are 'alice'" in at.info[0].value and "2 documents assigned to you" in at.info[0].value
    assert "Document 1 of 2" in at.caption[0].value and at.subheader[0].value == "Doc 0"
    shown = " ".join(m.value for m in [*at.markdown, *at.caption, *at.info])
    assert "politics" not in shown and "bob" not in shown  # bob's label and name appear nowhere
    assert any(m.value == "**Your label:** none yet" for m in at.markdown)
    assert at.selectbox(key=f"rv_label_{ids[0]}").value == "science"  # the suggestion
    at.selectbox(key=f"rv_label_{ids[0]}").set_value("sport")
    next(b for b in at.button if b.label == "Save & Next").click().run()
    no_exceptions(at)
    last = db.list_decisions(store, ids[0])[-1]
    assert (last.annotator, last.category, last.blind, last.method) == ("alice", "sport", True, "review")
    assert at.subheader[0].value == "Doc 1"

    bulk = _page(REVIEW_PAGE, corpus_id, "alice")
    bulk.radio(key="ar_view").set_value("Bulk accept").run()
    bulk.checkbox(key="bk_unrev").uncheck().run()
    no_exceptions(bulk)
    frame = bulk.data_editor[0].value
    assert list(frame["id"]) == ids[:2]  # her documents only
    assert frame["your label"].tolist() == ["sport", ""] and "politics" not in frame.to_string()

    lead = _page(REVIEW_PAGE, corpus_id, "lead")
    lead.radio(key="ar_view").set_value("Review queue").run()
    assert any("This corpus is labelled by a team ('alice', 'bob')" in c.value for c in lead.caption)
    assert any("Document 1 of 4 in the queue" in c.value for c in lead.caption)  # the shared view: every document
    assert any("**Current label:** sport (decided by alice)" in m.value for m in lead.markdown)


def test_a_bad_sidebar_name_is_refused_and_the_last_good_one_kept() -> None:
    store = page_store()
    corpus_id, ids, cats = _corpus(store, 1)
    at = _page(REVIEW_PAGE, corpus_id, "carol")
    at.text_input(key="_reviewer_input").input("import").run()
    assert any("reserved" in e.value and "stored under 'carol'" in e.value for e in at.sidebar.error)
    assert at.session_state["reviewer"] == "carol"


def test_annotator_names_are_shown_as_text() -> None:
    store = page_store()
    corpus_id, ids, cats = _corpus(store, 2)
    name = "**<img src=x onerror=alert(1)>** [me](http://127.0.0.1:9/)"
    db.save_team(store, corpus_id, [name, "bob"], overlap_percent=100.0, per_shared=2)
    db.add_assignments(store, corpus_id, {ids[0]: [name, "bob"]})
    at = _page(REVIEW_PAGE, corpus_id, name)
    at.radio(key="ar_view").set_value("Review queue").run()
    no_exceptions(at)
    info = at.info[0].value
    assert "\\*\\*\\<img src=x onerror=alert\\(1\\)\\>\\*\\* \\[me\\]\\(http\u2060\\:" in info  # escaped Markdown
    lead = _page(AGREEMENT_PAGE, corpus_id, "lead")
    members = next(d.value for d in lead.dataframe if "assigned" in d.value)
    assert members["annotator"].tolist() == [name, "bob"]  # a table cell shows text as it is
    assert not any("<img" in m.value for m in [*lead.markdown, *lead.caption, *lead.info])
