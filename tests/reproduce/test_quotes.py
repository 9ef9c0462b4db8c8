"""Every word a spec attributes to the article is in the article.

Convention (docs/reproduce.md, "Quotes"): `article.zh` is a verbatim passage; in `margin.reason` the
article's words stand inside 「」 and nothing else in it is Chinese, so any text outside 「」 reads as
the spec's own reading (a paraphrase), and a reason that quotes nothing starts with "paraphrase:".
Whitespace and punctuation are ignored and full / half width folded (NFKC): the article's own
punctuation was stripped in places when it was saved.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SPECS = sorted((REPO / "conf" / "reproduce").glob("c*.yaml"))
ARTICLE = REPO.parent / "shared" / "seed" / "000_6b85a621c01d7587.txt"
QUOTE = re.compile(r"「([^」]*)」")
CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")


def normalised(text: str) -> str:
    """NFKC (full width -> half width), then no whitespace and no punctuation."""
    text = unicodedata.normalize("NFKC", text)
    return "".join(ch for ch in text if not ch.isspace() and not unicodedata.category(ch).startswith("P"))


def test_normalised_folds_width_whitespace_and_punctuation():
    assert normalised("低于 ３２，每个 head！") == normalised("低于32每个head")
    assert normalised("「前几百步」") == "前几百步"


@pytest.fixture(scope="module")
def article() -> str:
    if not ARTICLE.is_file():
        pytest.skip(f"the founding article is not beside the checkout ({ARTICLE})")
    return normalised(ARTICLE.read_text(encoding="utf-8"))


def _spec(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def test_every_spec_is_read():
    assert len(SPECS) == 18


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_article_zh_is_verbatim(path, article):
    zh = _spec(path)["article"]["zh"]
    assert normalised(zh) in article, f"{path.name}: article.zh is not a passage of the article"


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_margin_reason_quotes_only_the_article(path, article):
    margin = _spec(path).get("margin")
    if margin is None:
        pytest.skip("no margin")
    reason = margin["reason"]
    quotes = QUOTE.findall(reason)
    outside = QUOTE.sub("", reason)
    assert not CJK.search(outside), f"{path.name}: Chinese outside 「」 reads as a quote: {outside!r}"
    assert quotes or reason.startswith("paraphrase:"), f"{path.name}: quotes nothing and is not marked a paraphrase"
    for quote in quotes:
        assert normalised(quote) in article, f"{path.name}: 「{quote}」 is not in the article"


def test_the_issue_31_misquotes_are_gone(article):
    """The words issue 31 found in no article passage stay out of the specs."""
    for misquote in ("前几百步就基本定型", "提升约4个点", "有些head", "换个seed分工就不一样"):
        assert misquote not in article
        for path in SPECS:
            assert misquote not in normalised(_spec(path)["margin"]["reason"]), path.name
