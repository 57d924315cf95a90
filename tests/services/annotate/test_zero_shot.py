"""Zero-shot annotation with hand-made embeddings and hand-computed cosine/softmax values."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest

from services.annotate.types import AnnotationDoc, CategorySpec
from services.annotate.zero_shot import (
    category_text,
    cosine_similarities,
    describe_choice,
    document_text,
    l2_normalise,
    softmax,
    zero_shot_annotate,
    zero_shot_identity,
)

CATEGORIES = [
    CategorySpec("Sports", "games"),
    CategorySpec("Politics", "government"),
    CategorySpec("Science", "  "),
]
VECTORS = {
    "Sports: games": [1.0, 0.0, 0.0],
    "Politics: government": [0.0, 1.0, 0.0],
    "Science": [0.0, 0.0, 2.0],  # not unit length on purpose
    "Final\nthe cup match": [3.0, 1.0, 0.0],  # cos = (3, 1, 0)/sqrt(10)
    "Tie\nhalf and half": [1.0, 1.0, 0.0],  # cos = (1, 1, 0)/sqrt(2)
    "Lab\nexperiment": [0.0, 0.6, 0.8],  # unit: cos = (0, 0.6, 0.8)
    "Empty\n": [0.0, 0.0, 0.0],
}


class FixedEmbedder:
    """Embed function returning the fixed vectors above; records every call."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return np.array([VECTORS[t] for t in texts])


def _docs() -> list[AnnotationDoc]:
    return [
        AnnotationDoc("a", "Final", "the cup match"),
        AnnotationDoc("b", "Tie", "half and half"),
        AnnotationDoc("c", "Lab", "experiment"),
    ]


def test_texts_sent_to_the_embedder() -> None:
    assert [category_text(c) for c in CATEGORIES] == ["Sports: games", "Politics: government", "Science"]
    assert document_text(AnnotationDoc(1, "T", "abcdef"), char_budget=3) == "T\nabc"
    assert document_text(AnnotationDoc(1, " ", "body")) == "body"


def test_l2_normalise_and_cosine() -> None:
    normalised, valid = l2_normalise(np.array([[3.0, 4.0], [0.0, 0.0], [np.inf, 1.0]]))
    assert normalised[0] == pytest.approx([0.6, 0.8])
    assert normalised[1:].tolist() == [[0.0, 0.0], [0.0, 0.0]]
    assert valid.tolist() == [True, False, False]
    sims = cosine_similarities(np.array([[3.0, 1.0, 0.0]]), np.array([[2.0, 0.0, 0.0], [0.0, 0.0, 5.0]]))
    assert sims[0] == pytest.approx([3 / math.sqrt(10), 0.0])


def test_softmax_matches_hand_computation() -> None:
    s = [0.9, 0.6, 0.5]
    t = 0.1
    expected = [math.exp(x / t) / sum(math.exp(y / t) for y in s) for x in s]
    assert softmax(np.array(s), t)[0] == pytest.approx(expected)
    # shift invariance and a huge 1/T do not overflow
    assert softmax(np.array([[1000.0, 999.0]]), 0.001)[0] == pytest.approx([1.0, 0.0])
    with pytest.raises(ValueError):
        softmax(np.array(s), 0.0)


def test_describe_choice() -> None:
    sims = np.array([0.31, 0.43, 0.1])
    expected = "closest category by embedding similarity (cos=0.43; runner-up 'x' 0.31)"
    assert describe_choice(sims, ["x", "y", "z"]) == expected
    assert describe_choice(np.array([0.5]), ["only"]) == "closest category by embedding similarity (cos=0.50)"


def test_zero_shot_labels_scores_and_reasons() -> None:
    embed = FixedEmbedder()
    result = zero_shot_annotate(embed, _docs(), CATEGORIES, model_name="mini", temperature=0.5)
    agent, version = zero_shot_identity("mini", 0.5)
    assert (agent, version) == ("zero-shot:mini", "mini/zs-v1/T=0.5")
    assert [(s.document_key, s.label, s.status) for s in result] == [
        ("a", "Sports", "ok"),
        ("b", "Sports", "ok"),  # tie -> first category in list order
        ("c", "Science", "ok"),
    ]
    assert all(s.agent == agent and s.model_version == version and s.error == "" for s in result)

    # doc a: cos = (0.94868, 0.31623, 0); T = 0.5
    ca = [3 / math.sqrt(10), 1 / math.sqrt(10), 0.0]
    pa = math.exp(ca[0] / 0.5) / sum(math.exp(c / 0.5) for c in ca)
    assert result[0].score == pytest.approx(pa)
    assert result[0].score == pytest.approx(0.69822, abs=1e-5)
    assert result[0].reason == "closest category by embedding similarity (cos=0.95; runner-up 'Politics' 0.32)"
    # doc b: tie 0.7071 / 0.7071 / 0 -> 1 / (2 + e^(-0.7071/0.5))
    assert result[1].score == pytest.approx(1 / (2 + math.exp(-(1 / math.sqrt(2)) / 0.5)))
    # doc c: cos = (0, 0.6, 0.8)
    pc = math.exp(0.8 / 0.5) / (math.exp(0) + math.exp(0.6 / 0.5) + math.exp(0.8 / 0.5))
    assert result[2].score == pytest.approx(pc)
    assert result[2].reason == "closest category by embedding similarity (cos=0.80; runner-up 'Politics' 0.60)"
    assert embed.calls[0] == ["Sports: games", "Politics: government", "Science"]


def test_default_temperature_sharpens() -> None:
    (a,) = zero_shot_annotate(FixedEmbedder(), _docs()[:1], CATEGORIES, model_name="mini")
    ca = [3 / math.sqrt(10), 1 / math.sqrt(10), 0.0]
    expected = 1 / sum(math.exp((c - ca[0]) / 0.05) for c in ca)
    assert a.score == pytest.approx(expected) and a.score > 0.99999
    assert a.model_version == "mini/zs-v1/T=0.05"


def test_zero_document_embedding_fails_without_label() -> None:
    docs = [AnnotationDoc(9, "Empty", ""), AnnotationDoc(1, "Lab", "experiment")]
    failed, ok = zero_shot_annotate(FixedEmbedder(), docs, CATEGORIES, model_name="mini")
    assert (failed.status, failed.label, failed.score) == ("failed", None, None) and "zeros" in failed.error
    assert (ok.status, ok.label) == ("ok", "Science")


def test_skip_batches_progress_and_cancel() -> None:
    embed = FixedEmbedder()
    ticks: list[tuple[int, int]] = []
    result = zero_shot_annotate(
        embed, _docs(), CATEGORIES, model_name="m", skip={"b"}, batch_size=1, progress=lambda d, t: ticks.append((d, t))
    )
    assert [s.document_key for s in result] == ["a", "c"]
    assert ticks == [(1, 2), (2, 2)]
    assert embed.calls[1:] == [["Final\nthe cup match"], ["Lab\nexperiment"]]

    cancel = threading.Event()

    def progress(done: int, total: int) -> None:
        cancel.set()

    stopped = zero_shot_annotate(
        FixedEmbedder(), _docs(), CATEGORIES, model_name="m", batch_size=2, progress=progress, cancel=cancel
    )
    assert [s.document_key for s in stopped] == ["a", "b"]


def test_bad_embedder_output_and_categories_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="one vector per text"):
        zero_shot_annotate(lambda texts: np.zeros((1, 3)), _docs(), CATEGORIES, model_name="m")
    zero_cat = {**VECTORS, "Sports: games": [0.0, 0.0, 0.0]}
    with pytest.raises(ValueError, match="'Sports'"):
        zero_shot_annotate(lambda texts: np.array([zero_cat[t] for t in texts]), _docs(), CATEGORIES, model_name="m")

    def wrong_dim(texts: list[str]) -> np.ndarray:
        return np.ones((len(texts), 3 if texts[0] in VECTORS and ":" in texts[0] else 4))

    with pytest.raises(ValueError, match="4-dimensional"):
        zero_shot_annotate(wrong_dim, _docs(), CATEGORIES, model_name="m")
    with pytest.raises(ValueError, match="no categories"):
        zero_shot_annotate(FixedEmbedder(), _docs(), [], model_name="m")
