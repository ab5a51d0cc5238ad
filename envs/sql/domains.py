"""The generated databases' domains. Every domain has the same shape under its own names, so
one set of question templates covers them all:

    people  (id, name, place, number)            e.g. customers (id, name, city, age)
    items   (id, title, kind, measure)           e.g. products (id, name, category, price)
    events  (id, person_id -> people, item_id -> items, day, amount, state)
                                                 e.g. orders (..., order_date, quantity, status)

`nouns` give the question text its words: the singular and plural of each table's rows and
the verb an event stands for.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Domain:
    name: str
    people: str
    items: str
    events: str
    columns: dict[str, str]
    """Role (name, place, number, title, kind, measure, day, amount, state) -> column name."""
    nouns: dict[str, str]
    """person, persons, item, items, event, events, verb (past tense), measure, amount,
    number, place: the words the questions use."""
    places: tuple[str, ...]
    kinds: tuple[str, ...]
    states: tuple[str, ...]
    title_words: tuple[tuple[str, ...], tuple[str, ...]]
    number_range: tuple[int, int]
    measure_range: tuple[float, float]
    amount_range: tuple[int, int]
    measure_is_money: bool = True


CITIES = (
    "Lisbon",
    "Porto",
    "Madrid",
    "Lyon",
    "Turin",
    "Ghent",
    "Krakow",
    "Tartu",
    "Cork",
    "Bergen",
)

DOMAINS: dict[str, Domain] = {
    d.name: d
    for d in (
        Domain(
            "shop", "customers", "products", "orders",
            {"name": "name", "place": "city", "number": "age", "title": "name",
             "kind": "category", "measure": "price", "day": "order_date", "amount": "quantity",
             "state": "status"},
            {"person": "customer", "persons": "customers", "item": "product",
             "items": "products", "event": "order", "events": "orders", "verb": "ordered",
             "measure": "price", "amount": "quantity", "number": "age", "place": "city"},
            CITIES, ("books", "garden", "kitchen", "toys", "sports", "music"),
            ("shipped", "pending", "cancelled"),
            (("Red", "Quiet", "Swift", "Tiny", "Grand", "Bright", "Solid", "Smart"),
             ("Lamp", "Kettle", "Ball", "Chair", "Drum", "Atlas", "Rake", "Clock")),
            (18, 80), (2.0, 400.0), (1, 9),
        ),
        Domain(
            "school", "students", "courses", "enrollments",
            {"name": "name", "place": "hometown", "number": "age", "title": "title",
             "kind": "department", "measure": "fee", "day": "enrolled_on", "amount": "grade",
             "state": "status"},
            {"person": "student", "persons": "students", "item": "course", "items": "courses",
             "event": "enrollment", "events": "enrollments", "verb": "enrolled in",
             "measure": "fee", "amount": "grade", "number": "age", "place": "hometown"},
            CITIES, ("physics", "history", "biology", "art", "law", "economics"),
            ("active", "completed", "dropped"),
            (("Modern", "Applied", "Early", "Advanced", "Basic", "Global", "Urban", "Visual"),
             ("Optics", "Ethics", "Cells", "Drawing", "Contracts", "Markets", "Empires", "Waves")),
            (17, 45), (50.0, 900.0), (1, 10),
        ),
        Domain(
            "library", "members", "books", "loans",
            {"name": "name", "place": "district", "number": "birth_year", "title": "title",
             "kind": "genre", "measure": "price", "day": "loan_date", "amount": "days",
             "state": "status"},
            {"person": "member", "persons": "members", "item": "book", "items": "books",
             "event": "loan", "events": "loans", "verb": "borrowed",
             "measure": "price", "amount": "days", "number": "birth year",
             "place": "district"},
            ("North", "South", "East", "West", "Harbour", "Old Town", "Riverside", "Hill"),
            ("poetry", "mystery", "travel", "science", "cooking", "fantasy"),
            ("returned", "open", "overdue"),
            (("Silent", "Lost", "Golden", "Hidden", "Last", "Northern", "Paper", "Winter"),
             ("River", "Garden", "Letters", "Voyage", "Island", "Kitchen", "Code", "Stars")),
            (1940, 2008), (5.0, 80.0), (1, 60),
        ),
        Domain(
            "clinic", "patients", "doctors", "visits",
            {"name": "name", "place": "city", "number": "age", "title": "name",
             "kind": "specialty", "measure": "fee", "day": "visit_date", "amount": "minutes",
             "state": "status"},
            {"person": "patient", "persons": "patients", "item": "doctor", "items": "doctors",
             "event": "visit", "events": "visits", "verb": "visited",
             "measure": "fee", "amount": "minutes", "number": "age", "place": "city"},
            CITIES, ("cardiology", "dermatology", "pediatrics", "neurology", "oncology", "surgery"),
            ("done", "booked", "missed"),
            (("Dr. Alma", "Dr. Bruno", "Dr. Chen", "Dr. Dana", "Dr. Emil", "Dr. Farah",
              "Dr. Goran", "Dr. Hana"),
             ("Ito", "Jensen", "Kowal", "Lindqvist", "Moreau", "Novak", "Okafor", "Petrov")),
            (1, 95), (40.0, 300.0), (10, 90),
        ),
    )
}  # fmt: skip

FIRST_NAMES = (
    "Ana", "Ben", "Carla", "Dmitri", "Elif", "Farid", "Greta", "Hugo", "Ines", "Jonas", "Kira",
    "Luca", "Mira", "Nils", "Olga", "Pavel", "Rosa", "Sami", "Tomas", "Uma", "Vera", "Wim",
    "Yara", "Zoe",
)  # fmt: skip
LAST_NAMES = (
    "Almeida", "Berg", "Costa", "Dahl", "Esposito", "Fischer", "Garcia", "Horvat", "Ivanova",
    "Jansen", "Keller", "Larsen", "Moretti", "Nowak", "Olsen", "Pereira", "Quinn", "Rossi",
    "Silva", "Tanaka",
)  # fmt: skip
