"""Tests for mrag_core.textio.decode_bytes on real byte encodings."""

from __future__ import annotations

import codecs

import pytest

from mrag_core.textio import decode_bytes, looks_binary

TEXT = "Crème brûlée — naïve café, 10 €\nline two"


@pytest.mark.parametrize(
    "data,encoding",
    [
        (TEXT.encode("utf-8"), "utf-8"),
        (codecs.BOM_UTF8 + TEXT.encode("utf-8"), "utf-8-sig"),
        (codecs.BOM_UTF16_LE + TEXT.encode("utf-16-le"), "utf-16-le"),
        (codecs.BOM_UTF16_BE + TEXT.encode("utf-16-be"), "utf-16-be"),
        (TEXT.encode("utf-16"), "utf-16-le"),  # Python writes LE with BOM on this platform
        (codecs.BOM_UTF32_LE + TEXT.encode("utf-32-le"), "utf-32-le"),
    ],
)
def test_unicode_encodings_decode_without_issues(data: bytes, encoding: str) -> None:
    text, enc, issues = decode_bytes(data, "a.txt")
    assert text == TEXT
    assert enc == encoding
    assert issues == []
    assert not text.startswith("\ufeff")


def test_cp1252_fallback_warns() -> None:
    data = TEXT.encode("cp1252")  # '€' is 0x80 and '—' 0x97 in cp1252: invalid UTF-8
    text, enc, issues = decode_bytes(data, "notes/old.txt")
    assert text == TEXT and enc == "cp1252"
    assert len(issues) == 1
    issue = issues[0]
    assert issue.severity == "warning" and issue.location == "notes/old.txt"
    assert "Windows-1252" in issue.message and "not valid UTF-8" in issue.message


def test_latin1_fallback_when_cp1252_cannot_decode() -> None:
    data = "façade ".encode("latin-1") + b"\x81"  # 0x81 is undefined in cp1252
    text, enc, issues = decode_bytes(data, "x.txt")
    assert enc == "latin-1" and text == "façade \x81"
    assert issues[0].severity == "warning" and "Latin-1" in issues[0].message


def test_utf16_without_bom_is_guessed_with_warning() -> None:
    text, enc, issues = decode_bytes("Plain ASCII text, long enough.".encode("utf-16-le"), "w.txt")
    assert text == "Plain ASCII text, long enough." and enc == "utf-16-le"
    assert issues[0].severity == "warning" and "guessed" in issues[0].message


@pytest.mark.parametrize(
    "data,fragment",
    [
        (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj", "PDF"),
        (b"PK\x03\x04\x14\x00\x00\x00", "ZIP"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "PNG"),
        (b"abc\x00def\x00\x01\x02\x03ghi", "NUL bytes"),
        (bytes(range(1, 32)) * 10, "control characters"),
    ],
)
def test_binary_is_an_error(data: bytes, fragment: str) -> None:
    text, enc, issues = decode_bytes(data, "blob.bin")
    assert text is None and enc == ""
    assert len(issues) == 1 and issues[0].severity == "error"
    assert fragment in issues[0].message and issues[0].location == "blob.bin"


def test_bad_bytes_after_bom_is_error() -> None:
    text, _, issues = decode_bytes(codecs.BOM_UTF8 + b"ok \xff\xfe bad", "b.txt")
    assert text is None and "byte-order mark" in issues[0].message


def test_empty_and_plain_text_are_not_binary() -> None:
    assert looks_binary(b"") is None
    assert looks_binary("tab\tand\r\nnewlines\f".encode()) is None
    assert decode_bytes(b"", "e.txt") == ("", "utf-8", [])


JAPANESE = ("title,text,label\n東京,東京は日本の首都で、大きな都市です。,地理\n"
            "物理,量子力学は小さな粒子の振る舞いを説明する理論です。,科学\n")


@pytest.mark.parametrize("text,codec,shown", [
    (JAPANESE, "shift_jis", "Shift_JIS (cp932)"),
    ("title,text,label\nTokyo,The capital of Japan, a large city.,地理\nKyoto,An old city.,地理\n", "shift_jis",
     "Shift_JIS (cp932)"),  # mostly ASCII: two labels in Japanese
    ("物理", "shift_jis", "Shift_JIS (cp932)"),
    ("日本語のテキストです。東京と大阪。", "euc_jp", "EUC-JP"),
    ("量子力学是描述微观粒子行为的理论。", "gb18030", "GB18030 (GBK)"),
    ("量子力學是描述微觀粒子行為的理論。", "big5", "Big5"),
    ("양자역학은 미시 세계를 설명한다.", "cp949", "EUC-KR (cp949)"),
], ids=["shift_jis table", "shift_jis labels", "shift_jis word", "euc_jp", "gb18030", "big5", "cp949"])
def test_cjk_text_is_read_in_its_encoding_with_a_warning(text: str, codec: str, shown: str) -> None:
    data = text.encode(codec)
    decoded, enc, issues = decode_bytes(data, "cjk.csv")
    assert decoded == text
    assert [(i.severity, i.location) for i in issues] == [("warning", "cjk.csv")]
    assert f"; read as {shown}, detected from its bytes. Check the text, or save the file as UTF-8" in issues[0].message


@pytest.mark.parametrize("text", [
    "résumé", "Le résumé du café est très intéressant.", "Ärger über Öl", "naïve", "São Paulo é ótimo",
    "Jürgen’s “quote” – dash…", "Señor Muñoz año", "Ça été dû à l'âge", "Ýù Þó ÐØ", "£5 for 3 ½ kg",
    "title,text,label\nÉté,L'été à Paris.,saisons\nHiver,Il neige.,saisons\n",
])
def test_western_text_whose_bytes_could_pass_for_cjk_stays_windows_1252(text: str) -> None:
    """Each of these is valid in at least one CJK encoding or was guessed as one by charset-normalizer's full list
    ('£5 for 3 ½ kg' as Shift_JIS half-width katakana, 'Ýù Þó ÐØ' as Big5, most as cp1250 or cp1006)."""
    decoded, enc, issues = decode_bytes(text.encode("cp1252"), "w.txt")
    assert (decoded, enc) == (text, "cp1252")
    assert "Windows-1252" in issues[0].message
