"""The offline composer on documents whose sentences it could not split: Japanese / Chinese text (sentences end
in '。' with no space after) and a long text without any sentence end. Each extract stays a few sentences
long instead of the whole document becoming the query."""

from __future__ import annotations

from services.querygen.checks import missing_titles
from services.querygen.offline import MAX_SENTENCE_CHARS, compose_story, split_sentences
from services.querygen.story_prompt import Article

TOKYO = ("東京は日本の首都である。" + "人口が多い大都市で、多くの企業が集まっている。" * 2000
         + "「東京タワー」は有名だ！本当？")


def test_japanese_sentences_are_split_at_their_full_stops() -> None:
    assert split_sentences("東京は日本の首都である。人口が多い。「東京タワー」は有名だ！本当？") == [
        "東京は日本の首都である。", "人口が多い。", "「東京タワー」は有名だ！", "本当？"]
    assert split_sentences("彼は「行く。」と言った。次の文。") == ["彼は「行く。」と言った。", "次の文。"]


def test_a_long_japanese_document_gives_a_short_extract_naming_its_title() -> None:
    story = compose_story([Article("東京", TOKYO), Article("Mercury", "Mercury is a small planet. It is hot.")])
    assert len(TOKYO) > 46_000
    assert len(story.extracts[0]) <= 2 * MAX_SENTENCE_CHARS  # it was the whole 46,000-character document
    assert missing_titles(story.text, ["東京", "Mercury"]) == []


def test_a_long_text_without_sentence_ends_is_cut_to_a_sentence_length() -> None:
    text = "the Lost Glacier " + "ice moves slowly down the valley and grinds the rock below " * 2000
    story = compose_story([Article("Lost Glacier", text)])
    assert len(text) > 100_000
    assert len(story.text) <= MAX_SENTENCE_CHARS + len("About Lost Glacier: ")
    assert story.text.startswith("the Lost Glacier ice moves") and story.text.endswith(" ...")
