"""Page names in user-facing text are the sidebar's titles (``ui.page_list.PAGES``) or Home.

Every "the <Name> page" and "the <Name>, <Name> and <Name> pages" in the raw text of every ``.py`` file under
``pages/``, ``ui/``, ``mrag_core/`` and ``db/``, of ``app.py`` and of ``README.md`` (strings, docstrings, CLI help
and comments alike, a name wrapped over two lines included) is checked; no file and no phrase is left out. The
README's page list and every page's heading are checked against the same titles.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A capitalised word, "&" or "and"/"," (inside titles and lists of titles), then "page" or "pages".
_WORD = r"(?:[A-Z]\w*|&|and|,)"
_NAMED = re.compile(r"\bthe\s+((?:" + _WORD + r"\s+)*?[A-Z]\w*)\s+(pages?)\b")


def _titles() -> set[str]:
    from ui.page_list import PAGES, page_title

    return {page_title(path) for path, _ in PAGES} | {"Home"}


def _named_pages(text: str) -> list[tuple[str, bool]]:
    """Each page name phrase of ``text`` as (name with its whitespace collapsed, plural?); a ``#`` that continues a
    comment on the next line is read as a line break."""
    text = re.sub(r"\n[ \t]*#", "\n", text)
    return [(" ".join(m.group(1).split()), m.group(2) == "pages") for m in _NAMED.finditer(text)]


def _is_title_list(name: str, titles: set[str]) -> bool:
    """True when ``name`` is one or more titles joined by ", ", " and " or ", and "."""
    title = "|".join(re.escape(t) for t in sorted(titles, key=len, reverse=True))
    return re.fullmatch(rf"(?:{title})(?:(?:, and |, | and )(?:{title}))*", name) is not None


def _wrong_names(text: str, titles: set[str]) -> list[str]:
    return [name for name, plural in _named_pages(text)
            if not (_is_title_list(name, titles) if plural else name in titles)]


def _scanned_files() -> list[Path]:
    folders = ("pages", "ui", "mrag_core", "services", "db")
    files = [p for folder in folders for p in sorted((ROOT / folder).rglob("*.py"))]
    return files + [ROOT / "app.py", ROOT / "README.md"]


def test_the_scan_reads_wrapped_names_lists_and_flags_names_that_are_not_titles() -> None:
    titles = _titles()
    assert _named_pages("as the Annotate &\n    Review page does") == [("Annotate & Review", False)]
    assert _wrong_names("as the Annotate &\nReview page does", titles) == ["Annotate & Review"]
    assert _wrong_names("corpus name (as on the Corpus Studio page)", titles) == ["Corpus Studio"]
    assert _wrong_names("compare the annotator with the labels on the Agreement page", titles) == ["Agreement"]
    assert _wrong_names("# see the Index\n    # page", titles) == []
    assert _wrong_names("so the Index\nand Evaluation Runs pages show it", titles) == []
    assert _wrong_names("as the Agreement and Export and Query Builder pages do", titles) == []
    assert _wrong_names("as the Agreement & Export and Query Builder pages do", titles) == ["Agreement & Export and "
                                                                                             "Query Builder"]
    assert _wrong_names("the Home page's button, the corpus pages, the page", titles) == []


def test_every_page_named_in_the_code_and_the_readme_is_a_sidebar_title_or_home() -> None:
    titles = _titles()
    files = _scanned_files()
    assert {p.relative_to(ROOT).parts[0] for p in files} >= {"pages", "ui", "mrag_core", "services", "db", "app.py",
                                                             "README.md"}
    wrong = {str(p.relative_to(ROOT)): bad for p in files if (bad := _wrong_names(p.read_text(), titles))}
    assert wrong == {}
    named = {name for p in files for name, plural in _named_pages(p.read_text()) if not plural}
    assert {"Corpus Import", "Annotate and Review", "Agreement and Export", "Index", "Home"} <= named


def test_the_readme_page_list_names_every_page_once_by_its_title() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## The pages\n", 1)[1].split("\n## ", 1)[0]
    heads = re.findall(r"^[-*] \*\*(.+?):?\*\*", section, flags=re.MULTILINE)
    listed = [name for head in heads for name in head.split(" / ")]
    assert sorted(listed) == sorted(_titles())


def test_every_page_heading_is_its_sidebar_title() -> None:
    from ui.page_list import PAGES, page_title

    for path, _ in PAGES:
        headings = [node.args[0].value for node in ast.walk(ast.parse((ROOT / path).read_text()))
                    if isinstance(node, ast.Call) and ast.unparse(node.func) == "st.title"]
        assert headings == [page_title(path)], path
