"""Title coverage in scripts written without spaces between words (Chinese, Japanese, Thai; Korean particles
attach to the noun): a title is mentioned where it occurs, not only between spaces."""

from __future__ import annotations

from services.querygen.checks import missing_titles


def test_cjk_titles_inside_a_sentence_are_mentioned() -> None:
    story = "東京と大阪の歴史について教えてください。東京タワーは高い。"
    assert missing_titles(story, ["東京", "大阪", "東京タワー", "京都"]) == ["京都"]


def test_thai_and_korean_titles_with_attached_words_are_mentioned() -> None:
    assert missing_titles("ฉันชอบกรุงเทพมหานครมาก", ["กรุงเทพมหานคร", "เชียงใหม่"]) == ["เชียงใหม่"]
    assert missing_titles("서울은 한국의 수도이고 부산에는 항구가 있다.", ["서울", "부산", "대구"]) == ["대구"]


def test_latin_title_between_cjk_characters_is_mentioned_but_latin_words_still_need_boundaries() -> None:
    assert missing_titles("東京でiPhoneを買った。", ["iPhone"]) == []
    assert missing_titles("A story about Marseille and 東京.", ["Mars", "東京"]) == ["Mars"]
