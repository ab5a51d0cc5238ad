"""The JSONL corpus: round trip, title/body split, and one clear line for each bad input."""

from __future__ import annotations

import pytest

from toolgym.errors import ConfigError
from toolgym.tools.search.corpus import Document, read_corpus, write_corpus


def test_round_trip_and_title_body(tmp_path):
    docs = [Document("0", "Ada Lovelace\nWrote the first program."), Document("7", "No body")]
    path = write_corpus(tmp_path / "corpus.jsonl", docs)
    assert read_corpus(path) == docs
    assert (docs[0].title, docs[0].body) == ("Ada Lovelace", "Wrote the first program.")
    assert (docs[1].title, docs[1].body) == ("No body", "")


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"id": "1", "contents": "A\\nB"}', "{oops"], r"corpus.jsonl:2: not valid JSON"),
        (['["a"]'], r"corpus.jsonl:1: expected an object with id and contents"),
        (['{"id": null, "contents": "x"}'], r"'id' must be a string or an integer, got None"),
        (['{"id": "1", "text": "x"}'], r"corpus.jsonl:1: 'contents' must be a string"),
        (['{"id": 1, "contents": "a"}', '{"id": "1", "contents": "b"}'], r"id '1' appears more"),
        ([""], r"the corpus has no documents"),
    ],
)
def test_bad_corpora_name_the_line(tmp_path, lines, message):
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match=message):
        read_corpus(path)
