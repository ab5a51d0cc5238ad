"""The corpus format the field shares (Search-R1's): JSONL, one `{"id", "contents"}` object per
line, contents "Title\\nBody". Reading checks every line and names the first bad one."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolgym.errors import ConfigError


@dataclass(frozen=True)
class Document:
    id: str
    contents: str

    @property
    def title(self) -> str:
        """The first line; wiki-18 (Search-R1's corpus) wraps it in double quotes, dropped here."""
        first = self.contents.split("\n", 1)[0]
        quoted = len(first) >= 2 and first[0] == first[-1] == '"'
        return first[1:-1] if quoted else first

    @property
    def body(self) -> str:
        parts = self.contents.split("\n", 1)
        return parts[1] if len(parts) > 1 else ""

    def to_json(self) -> dict[str, str]:
        return {"id": self.id, "contents": self.contents}

    @classmethod
    def from_served(cls, record: Any) -> Document:
        """A document as retrieval servers send it. Search-R1's dense server sends corpus rows
        (`{"id", "contents"}`); its bm25 server sends `{"title", "text", "contents"}` with no
        id, so a missing id becomes a hash of the contents (stable across calls, so the same
        document is recognised when it comes back); `title` and `text` stand in for missing
        contents. Raises ValueError when there is no text at all."""
        if not isinstance(record, dict):
            raise ValueError(f"a document must be an object, got {type(record).__name__}")
        contents = record.get("contents")
        if not isinstance(contents, str):
            title, text = record.get("title"), record.get("text")
            if not isinstance(title, str) and not isinstance(text, str):
                raise ValueError("a document needs 'contents' (or 'title' and 'text')")
            contents = f"{title or ''}\n{text or ''}"
        doc_id = record.get("id", record.get("docid"))
        if not isinstance(doc_id, str | int) or isinstance(doc_id, bool):
            doc_id = "h" + hashlib.blake2b(contents.encode(), digest_size=6).hexdigest()
        return cls(str(doc_id), contents)


def read_corpus(path: str | Path) -> list[Document]:
    documents = list(iter_corpus(path))
    seen: set[str] = set()
    for d in documents:
        if d.id in seen:
            raise ConfigError(f"{path}: document id {d.id!r} appears more than once")
        seen.add(d.id)
    if not documents:
        raise ConfigError(f"{path}: the corpus has no documents")
    return documents


def iter_corpus(path: str | Path) -> Iterator[Document]:
    with Path(path).open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                yield _parse(line, f"{path}:{number}")


def write_corpus(path: str | Path, documents: Iterable[Document]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for d in documents:
            f.write(json.dumps(d.to_json(), ensure_ascii=False) + "\n")
    return path


def _parse(line: str, where: str) -> Document:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{where}: not valid JSON ({e.msg} at column {e.colno})") from None
    except ValueError as e:  # an integer too long to read
        raise ConfigError(f"{where}: not readable ({str(e).split(';')[0][:200]})") from None
    if not isinstance(record, dict):
        raise ConfigError(f"{where}: expected an object with id and contents")
    doc_id, contents = record.get("id"), record.get("contents")
    if not isinstance(doc_id, str | int) or isinstance(doc_id, bool):
        raise ConfigError(f"{where}: 'id' must be a string or an integer, got {doc_id!r}")
    if not isinstance(contents, str):
        raise ConfigError(f"{where}: 'contents' must be a string (\"Title\\nBody\")")
    return Document(str(doc_id), contents)
