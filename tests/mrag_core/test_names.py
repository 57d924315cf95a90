"""The label key (mrag_core.names): names a reader cannot tell apart fold alike, case, spacing, compatibility forms
and invisible characters included; names that differ visibly do not."""

from __future__ import annotations

import pytest

from mrag_core.names import drop_invisible, fold_name, fold_topic, is_invisible
from services.annotate.types import CategorySpec, validate_categories
from services.annotate.types import fold_name as annotators_fold_name


@pytest.mark.parametrize("name", [
    "physics", "Physics", " PHYSICS ", "phys\u200bics", "\ufeffphysics", "phy\u00adsics", "physics\u200d",
    "ph\u2060ysics", "\u200ephysics\u200f", "ｐｈｙｓｉｃｓ", "phys\ufe0fics", "phys\u034fics",
])
def test_names_a_reader_cannot_tell_from_physics_fold_to_physics(name: str) -> None:
    assert fold_name(name) == "physics"


def test_spacing_case_and_compatibility_forms() -> None:
    assert fold_name("Big \u00a0 \u2003Cats") == "big cats"  # a no-break space and an em space are spaces
    assert fold_name("Straße") == "strasse" and fold_name("ﬁsh") == "fish"
    assert fold_name("\u200b") == "" and fold_name(" \u200b ") == ""  # nothing visible: an empty key


@pytest.mark.parametrize("a,b", [("physics", "physic"), ("résumé", "resume"), ("Ökonomie", "Oekonomie"),
                                 ("big cats", "bigcats"), ("a_b", "a b")])
def test_names_that_look_different_keep_different_keys(a: str, b: str) -> None:
    assert fold_name(a) != fold_name(b)


def test_topics_read_an_underscore_as_a_space() -> None:
    assert fold_topic("contract_breach") == fold_topic("Contract \u200bBreach") == "contract breach"


def test_invisible_characters() -> None:
    assert [is_invisible(c) for c in "a\u200b\u00ad\ufe0f \u00a0"] == [False, True, True, True, False, False]
    assert drop_invisible("e\u0301te\u200b\u2064") == "e\u0301te"  # a combining accent is visible: kept


def test_the_annotators_use_the_same_key() -> None:
    assert annotators_fold_name is fold_name
    with pytest.raises(ValueError, match=r"Categories 'physics' and 'phys\\u200bics' differ only"):
        validate_categories([CategorySpec("physics"), CategorySpec("phys\u200bics")])
