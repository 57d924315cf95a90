"""Tests for services.querygen.story_prompt (paper wording, layout, truncation)."""

from __future__ import annotations

import pytest

from services.querygen.story_prompt import Article, fusion_messages, story_messages, story_prompt, truncate_text

PAPER_BODY = (
    "It is very important that each of the attached articles is relevant to the story, in a way that "
    "references the content of the article, not just its title. But please also mention each title at "
    "least once. Please make sure that all of the attached articles are relevant to your story, and that "
    "each article is referenced in at least two sentences! They do not necessarily have to be referenced "
    "in the same order, but make sure no article is forgotten. Important: Output only the story, no "
    "additional text. And do not use bullet points, or paragraphs."
)


def test_story_prompt_is_the_paper_prompt_followed_by_articles() -> None:
    prompt = story_prompt([Article("Mercury (planet)", "Small and hot."), Article("Jazz", " Swing.\n")])
    assert prompt == (
        "Please create a story about the attached 2 articles on the topics Mercury (planet), Jazz. "
        + PAPER_BODY
        + "\n\nArticle 1: Mercury (planet)\nSmall and hot.\n\nArticle 2: Jazz\nSwing."
    )


def test_story_messages_single_user_turn_and_singular() -> None:
    messages = story_messages([Article("Jazz", "Swing.")])
    assert [m["role"] for m in messages] == ["user"]
    assert messages[0]["content"].startswith("Please create a story about the attached 1 article on the topics Jazz. ")


def test_story_prompt_truncates_articles() -> None:
    text = "First sentence here. Second sentence is longer than the limit allows."
    prompt = story_prompt([Article("T", text)], max_article_chars=30)
    assert prompt.endswith("Article 1: T\nFirst sentence here.")


def test_truncate_text_rules() -> None:
    assert truncate_text("short", None) == "short"
    assert truncate_text("short", 10) == "short"
    # no ". " in the second half of the window -> cut at the last space, mark with an ellipsis
    assert truncate_text("alpha beta gamma delta", 12) == "alpha beta ..."
    assert truncate_text("abcdefghij", 4) == "abcd ..."


def test_empty_article_list_is_rejected() -> None:
    with pytest.raises(ValueError, match="at least one article"):
        story_prompt([])


def test_fusion_messages_ask_for_n_lines() -> None:
    content = fusion_messages("  A story.  ", 3)[0]["content"]
    assert "Write exactly 3 short" in content and "one query per line" in content
    assert content.endswith("Text:\nA story.")
    with pytest.raises(ValueError, match="at least 1"):
        fusion_messages("x", 0)
