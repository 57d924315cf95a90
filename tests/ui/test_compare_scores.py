"""Compare's result lists show scores with enough decimals to tell them apart: Reciprocal Rank Fusion scores
(1/(60 + rank) summed over the fused lists) all read 0.016 at three decimals."""

from __future__ import annotations

import json
import os

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from services.workflows.compare import ResultRow  # noqa: E402
from tests.support.compare_pages import compare  # noqa: E402
from ui.compare_layout import LIST_COLUMNS, list_widths, score_decimals  # noqa: E402

RRF_ONE_LIST = [1 / 61, 1 / 62, 1 / 63, 1 / 64, 1 / 65]  # 0.016393, 0.016129, 0.015873, 0.015625, 0.015385


def test_rrf_ranks_of_one_list_need_four_decimals() -> None:
    assert {f"{s:.3f}" for s in RRF_ONE_LIST} == {"0.016", "0.015"}  # what the lists showed
    assert score_decimals(RRF_ONE_LIST) == 4  # 0.0164, 0.0161, 0.0159, 0.0156, 0.0154


def test_fused_scores_closer_than_a_ten_thousandth_need_five() -> None:
    # ranks (1, 3) and (2, 2) in two fused lists: 0.0322664 and 0.0322581, both 0.0323 at four decimals
    assert score_decimals([1 / 61 + 1 / 63, 2 / 62, 1 / 64 + 1 / 70]) == 5


def test_scores_apart_at_three_decimals_ties_and_the_cap() -> None:
    assert score_decimals([0.812, 0.5, 0.216]) == 3
    assert score_decimals([0.5, 0.5, 0.25]) == 3  # a tie stays a tie
    assert score_decimals([1 / 61 + 1 / 63, 1 / 63 + 1 / 61]) == 3  # equal up to rounding in another order
    assert score_decimals([0.1, 0.1 + 1e-10]) == 8  # at most eight
    assert score_decimals([]) == 3


def _rows(scores: list[float]) -> list[ResultRow]:
    return [ResultRow(i + 1, i, i, f"Title {i}", "cat", s, "") for i, s in enumerate(scores)]


def test_a_wider_score_column_takes_its_room_from_title_and_category() -> None:
    plain = list_widths(2, _rows([0.9, 0.5, 0.2]))
    fused = list_widths(2, _rows(RRF_ONE_LIST))
    assert plain[4] == LIST_COLUMNS[2][2] == 48
    assert fused[4] == 48 + 8  # one more decimal, 7.5 px
    assert sum(fused) == sum(plain)  # the list is no wider
    assert fused[:2] == plain[:2] and fused[2] == plain[2]  # short titles keep their least width


@pytest.mark.usefixtures("demo_indexed")
def test_every_result_list_shows_its_different_scores_different() -> None:
    """The demo's 6-aspect query on the demo index: each list's scores, formatted as its column says, differ
    wherever the scores do; the Fusion lists need more than three decimals for that."""
    at = compare()
    lists = [d for d in at.dataframe if {"rank", "title", "score"} <= set(d.value.columns)
             and "heads (rank in head, vote)" not in d.value.columns]
    assert len(lists) == 5
    decimals = []
    for frame in lists:
        fmt = json.loads(frame.proto.columns)["score"]["type_config"]["format"]
        scores = frame.value["score"].tolist()
        shown = [fmt % s for s in scores]
        distinct = {round(s, 12) for s in scores}
        assert len(set(shown)) == len(distinct), (fmt, scores)
        decimals.append(int(fmt.removeprefix("%.").removesuffix("f")))
    assert max(decimals) > 3 and min(decimals) == 3, decimals  # Fusion's RRF scores, the others' as before
