"""A synthetic multi-hop world: a fictional knowledge base rendered into documents, with 1- to
k-hop questions whose answers no model knows without retrieval (made-up names). They can
still be guessed by their frequency: chains often end in one of the world's few countries,
so in the small world the most common answer is right on 14% of the default training
questions (10% of eval), the floor a blind policy reaches by exact match.

Countries, cities, people, organisations and events get made-up names (syllables drawn from a
seeded generator, all distinct), attributes (years, professions, industries) and relations
(born in, works for, founded by, headquartered in, held in, organised by, lies in). Each entity
is one document, "Name\\nSentences", stating its own facts. A k-hop question follows k relations
from a start entity, e.g. "In which country is the city where Ilna Varos was born?", so the
answer sits in the k-th document along the chain; `Question.hops` names the documents and the
entity to look up at each hop (what an oracle agent follows).

Everything is a pure function of (seed, size): the same call gives the same corpus and questions.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from toolgym.tools.search.corpus import Document

SIZES = {"small": 60, "medium": 2_000, "large": 60_000}
"""People per world; cities, organisations, events and countries scale with it. "large" gives
about 100k documents (for benchmarks)."""

# Syllable parts of made-up names (the pretraining corpus draws from them too).
ONSETS = [
    "b",
    "c",
    "d",
    "f",
    "g",
    "h",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "t",
    "v",
    "z",
    "br",
    "dr",
    "fr",
    "gr",
    "kr",
    "pr",
    "tr",
    "st",
    "th",
    "sh",
    "ch",
]
VOWELS = ["a", "e", "i", "o", "u", "ae", "ai", "ei", "ou", "ia"]
CODAS = [""] * 6 + ["n", "r", "s", "l", "th", "x", "m", "k"]
_PROFESSIONS = "cartographer glassblower astronomer archivist shipwright botanist luthier "
_PROFESSIONS += "mapmaker clockmaker engraver surveyor chemist weaver translator"
_INDUSTRIES = "shipping textiles optics printing mining brewing ceramics rail salt timber"


@dataclass(frozen=True)
class Relation:
    kind: str
    """The subject's kind."""
    target: str
    """The kind of entity it points to (or "literal")."""
    question: str
    """Asks for the object, given the subject as {s}."""
    phrase: str
    """Names the object, given the subject as {s} (to nest inside a longer question)."""
    sentence: str
    """States the fact in the subject's document: {s} subject, {o} object."""


RELATIONS = {
    "lies_in": Relation("city", "country", "In which country is {s}?", "the country {s} lies in", "{s} lies in {o}."),
    "founded": Relation("city", "literal", "In what year was {s} founded?", "", "{s} was founded in {o}."),
    "born_in": Relation("person", "city", "In which city was {s} born?", "the city where {s} was born", "{s} was born in {o}."),
    "works_for": Relation("person", "organisation", "Which organisation does {s} work for?", "the organisation {s} works for", "{s} works for {o}."),
    "profession": Relation("person", "literal", "What is the profession of {s}?", "", "{s} is a {o} by profession."),
    "based_in": Relation("organisation", "city", "In which city is {s} headquartered?", "the city where {s} is headquartered", "{s} is headquartered in {o}."),
    "founded_by": Relation("organisation", "person", "Who founded {s}?", "the founder of {s}", "{s} was founded by {o}."),
    "industry": Relation("organisation", "literal", "Which industry is {s} in?", "", "{s} works in the {o} industry."),
    "held_in": Relation("event", "city", "In which city was {s} held?", "the city where {s} was held", "{s} was held in {o}."),
    "organised_by": Relation("event", "organisation", "Which organisation organised {s}?", "the organisation that organised {s}", "{s} was organised by {o}."),
    "year": Relation("event", "literal", "In what year did {s} take place?", "", "{s} took place in {o}."),
}  # fmt: skip


GUESSABLE = {"profession", "industry"}
"""Drawn from a dozen values each: stated in documents, never asked for."""


@dataclass
class Entity:
    id: str
    kind: str
    name: str
    facts: dict[str, str] = field(default_factory=dict)
    """Relation name -> an entity id, or the literal value itself."""


@dataclass(frozen=True)
class Hop:
    doc_id: str
    """The document to read at this hop."""
    entity: str
    """Its title: the name to search for."""


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    answers: list[str]
    hops: list[Hop]
    """The gold path: read these documents in order; the answer is in the last one."""
    relations: list[str] = field(default_factory=list)
    """The relation followed out of each hop's document (keys of RELATIONS)."""

    def to_task(self) -> dict[str, object]:
        """The task dict the search envs take (JSON-ready)."""
        return {
            "id": self.id, "question": self.question, "answers": list(self.answers),
            "hops": [dataclasses.asdict(h) for h in self.hops], "relations": list(self.relations),
        }  # fmt: skip


DRY_WALKS = 100_000
"""Walks in a row that find no new question: the world has no more to give (a request for
more than it holds is refused in a fraction of a second, not after n x 50 walks)."""


class World:
    def __init__(self, seed: int = 0, size: str | int = "small") -> None:
        people = SIZES[size] if isinstance(size, str) else int(size)
        self.seed = seed
        self.rng = random.Random(f"toolgym-world-{seed}")
        self._names: set[str] = set()
        self.entities: dict[str, Entity] = {}
        counts = {
            "country": max(3, people // 20), "city": max(6, people // 4),
            "organisation": max(5, people // 5), "person": people, "event": max(4, people // 5),
        }  # fmt: skip
        ids = {kind: [self._add(kind) for _ in range(n)] for kind, n in counts.items()}
        professions, industries = _PROFESSIONS.split(), _INDUSTRIES.split()
        pick = self.rng.choice
        for e in self._of("city"):
            e.facts |= {
                "lies_in": pick(ids["country"]),
                "founded": str(self.rng.randint(900, 1899)),
            }
        for e in self._of("person"):
            e.facts |= {"born_in": pick(ids["city"]), "works_for": pick(ids["organisation"]),
                        "profession": pick(professions)}  # fmt: skip
        for e in self._of("organisation"):
            e.facts |= {"based_in": pick(ids["city"]), "founded_by": pick(ids["person"]),
                        "industry": pick(industries)}  # fmt: skip
        for e in self._of("event"):
            e.facts |= {"held_in": pick(ids["city"]), "organised_by": pick(ids["organisation"]),
                        "year": str(self.rng.randint(1900, 2020))}  # fmt: skip

    # ----- documents ------------------------------------------------------------------------
    def documents(self) -> list[Document]:
        cities: dict[str, list[str]] = {}
        for c in self._of("city"):
            cities.setdefault(c.facts["lies_in"], []).append(c.name)
        return [self._document(e, cities.get(e.id, [])[:5]) for e in self.entities.values()]

    def _document(self, entity: Entity, cities: list[str]) -> Document:
        sentences = [
            RELATIONS[r].sentence.format(s=entity.name, o=self._value(v, r))
            for r, v in entity.facts.items()
        ]
        if entity.kind == "country":
            sentences.append(
                f"{entity.name} is a country"
                + (f"; its cities include {', '.join(cities)}." if cities else ".")
            )
        return Document(entity.id, f"{entity.name}\n{' '.join(sentences)}")

    # ----- questions ------------------------------------------------------------------------
    def questions(self, n: int, hops: int = 2, seed: int = 0) -> list[Question]:
        """`n` distinct questions, each following exactly `hops` relations."""
        if hops < 1:
            raise ValueError("hops must be at least 1")
        rng = random.Random(f"toolgym-questions-{self.seed}-{seed}-{hops}")
        starts = [e for e in self.entities.values() if e.kind != "country"]
        out: dict[str, Question] = {}
        misses = 0
        for _ in range(n * 50):
            if len(out) == n or misses == DRY_WALKS:
                break
            q = self._walk(rng.choice(starts), hops, rng)
            if q is not None and q.question not in out:
                out[q.question], misses = q, 0
            else:
                misses += 1
        if len(out) < n:
            raise ValueError(f"this world has only {len(out)} distinct {hops}-hop questions")
        return [
            dataclasses.replace(q, id=f"{self.seed}-{hops}-{seed}-{i}")
            for i, q in enumerate(out.values())
        ]

    def _walk(self, start: Entity, hops: int, rng: random.Random) -> Question | None:
        path, entity, chain = [Hop(start.id, start.name)], start, []
        for step in range(hops):
            last = step == hops - 1
            options = [
                r
                for r in sorted(entity.facts)
                if ((r not in GUESSABLE) if last else RELATIONS[r].target != "literal")
            ]
            if not options:
                return None  # a country: nothing leads on from it
            relation = rng.choice(options)
            chain.append(relation)
            if not last:
                entity = self.entities[entity.facts[relation]]
                path.append(Hop(entity.id, entity.name))
        subject = start.name
        for relation in chain[:-1]:
            subject = RELATIONS[relation].phrase.format(s=subject)
        final = chain[-1]
        answer = self._value(entity.facts[final], final)
        return Question("", RELATIONS[final].question.format(s=subject), [answer], path, chain)

    # ----- helpers --------------------------------------------------------------------------
    def _add(self, kind: str) -> str:
        entity = Entity(f"{kind[:3]}-{len(self.entities)}", kind, self._name(kind))
        self.entities[entity.id] = entity
        return entity.id

    def _of(self, kind: str) -> Iterator[Entity]:
        return (e for e in self.entities.values() if e.kind == kind)

    def _value(self, value: str, relation: str) -> str:
        return value if RELATIONS[relation].target == "literal" else self.entities[value].name

    def _name(self, kind: str) -> str:
        while True:
            if kind == "person":
                name = f"{self._word(2)} {self._word(self.rng.choice((2, 3)))}"
            elif kind == "organisation":
                name = f"{self._word(2)} {self.rng.choice(('Institute', 'Company', 'Guild', 'Society', 'Works'))}"
            elif kind == "event":
                name = f"{self._word(2)} {self.rng.choice(('Fair', 'Congress', 'Regatta', 'Festival', 'Summit'))}"
            else:
                name = self._word(self.rng.choice((2, 3)))
            if name not in self._names:
                self._names.add(name)
                return name

    def _word(self, syllables: int) -> str:
        pick = self.rng.choice
        word = "".join(pick(ONSETS) + pick(VOWELS) for _ in range(syllables)) + pick(CODAS)
        return word.capitalize()
