"""Short personal-event dialogues, and goals that are the last turns of a new dialogue.

Each user (``group``, one namespace) chats with a friend in short sessions; in each the
user tells one event of their life (a pet, a trip, a new job, an injury...) and a detail
of it, between greetings and reactions. A goal is the end of a later chat, 3 to 6 turns:
small talk, sometimes a turn about another of the user's events (the chat has moved on
since), and last the turns that need the event, paraphrased. Gold: the event's turn and
its detail's turn. One user has several events of a kind (two trips, two pets), so the
kind's words alone do not find the right one.

    python -m bench.corpora.personal         # writes bench/corpora/personal.json
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.corpora import write

SEED = 30
USERS = 18
EVENTS_PER_USER = 14

NAMES = [
    "Maya", "Leo", "Aisha", "Tomas", "Ingrid", "Kenji", "Fatima", "Oscar", "Nadia", "Ravi",
    "Clara", "Mateo", "Yuki", "Samir", "Elena", "Jonah", "Priya", "Lucas", "Hana", "Diego",
]  # fmt: skip
FRIENDS = ["Sam", "Alex", "Jordan", "Robin", "Casey", "Morgan"]
PETS = [("puppy", "dog"), ("kitten", "cat"), ("rabbit", "bunny"), ("parrot", "bird")]
PET_NAMES = [
    "Biscuit",
    "Pepper",
    "Miso",
    "Luna",
    "Ziggy",
    "Olive",
    "Mango",
    "Nacho",
    "Pixel",
    "Juno",
]
CITIES = [
    "Lisbon",
    "Kyoto",
    "Oaxaca",
    "Reykjavik",
    "Marrakesh",
    "Vancouver",
    "Hanoi",
    "Edinburgh",
    "Cape Town",
]
SIGHTS = [
    "the old castle walls",
    "a volcano crater",
    "the night market",
    "a glacier lagoon",
    "the coastal cliffs",
]
FOODS = ["grilled sardines", "street tacos", "fresh ramen", "a lamb tagine", "pho from a cart"]
ROLES = [
    "team lead",
    "senior designer",
    "head nurse",
    "staff engineer",
    "store manager",
    "lab coordinator",
]
COMPANIES = [
    "the hospital",
    "a small agency",
    "the bakery chain",
    "a logistics startup",
    "the city library",
]
INSTRUMENTS = ["guitar", "piano", "cello", "drums", "violin", "ukulele"]
SONGS = ["a Beatles song", "a Chopin nocturne", "a jazz standard", "an old folk tune"]
BODY = ["ankle", "wrist", "knee", "shoulder"]
SPORTS = ["soccer", "basketball", "tennis", "climbing", "volleyball"]
RELATIVES = ["sister", "brother", "cousin", "best friend"]
DESSERTS = ["a lemon tart", "a chocolate layer cake", "cinnamon rolls", "a cheesecake"]
ROOMS = ["kitchen", "bedroom", "living room", "hallway"]
COLORS = ["sage green", "navy blue", "warm yellow", "terracotta"]
RACES = ["half marathon", "10k", "trail race", "triathlon"]
COURSES = ["pottery", "Spanish", "photography", "first aid", "woodworking"]
MONTHS = ["March", "April", "June", "August", "September", "October"]


def _event(rng: random.Random, kind: str, me: str) -> tuple[str, str, list[str]]:
    """(event turn, detail turn, closing goal turns that need it) for one event."""
    if kind == "pet":
        young, adult = rng.choice(PETS)
        name = rng.choice(PET_NAMES)
        trick = rng.choice(["sit", "fetch a ball", "come when called", "use the litter box"])
        return (
            f"We adopted a {young} named {name} from the shelter on Saturday!",
            f"{name} is four months old and already learned to {trick}.",
            [
                f"and how is {name} doing? settling in okay?",
                f"is your little {adult} still chewing everything in the house?",
            ],
        )
    if kind == "trip":
        city, sight, food = rng.choice(CITIES), rng.choice(SIGHTS), rng.choice(FOODS)
        return (
            f"I just got back from a week in {city}, we hiked up to {sight}.",
            f"The best thing I ate the whole trip was {food} near the harbour.",
            [
                f"wait, you never told me properly how {city} was",
                f"what was the food like on that vacation of yours in {city}?",
            ],
        )
    if kind == "job":
        role, company = rng.choice(ROLES), rng.choice(COMPANIES)
        n = rng.choice([4, 6, 8, 12])
        return (
            f"Big news: I got promoted to {role} at {company}.",
            f"I will be managing a group of {n} people starting next month.",
            [
                "so how is it going with the new position?",
                f"are you enjoying being in charge of {n} people?",
            ],
        )
    if kind == "music":
        instrument, teacher, song = (
            rng.choice(INSTRUMENTS),
            rng.choice(FRIENDS + NAMES),
            rng.choice(SONGS),
        )
        return (
            f"I finally started {instrument} lessons, my teacher is called {teacher}.",
            f"For the spring recital I'm practicing {song}.",
            [
                f"are you still practising the {instrument} every evening?",
                "how did the recital go in the end?",
            ],
        )
    if kind == "injury":
        part, sport = rng.choice(BODY), rng.choice(SPORTS)
        weeks = rng.choice([2, 3, 6])
        return (
            f"Ugh, I sprained my {part} playing {sport} last weekend.",
            f"The doctor told me to rest it for {weeks} weeks and no {sport} until then.",
            [f"how is your {part} healing?", f"are you allowed back on the {sport} court yet?"],
        )
    if kind == "wedding":
        relative, city, month = rng.choice(RELATIVES), rng.choice(CITIES), rng.choice(MONTHS)
        return (
            f"My {relative} is getting married in {month}, in {city}!",
            f"I'm giving the speech at the reception in {city} and I'm already nervous.",
            [
                "have you finished writing your speech for the wedding?",
                f"is everything ready for the big day in {month}?",
            ],
        )
    if kind == "baking":
        dessert, relative = rng.choice(DESSERTS), rng.choice(RELATIVES)
        return (
            f"I baked {dessert} from scratch for my {relative}'s birthday.",
            f"The {dessert.split()[-1]} collapsed a bit in the middle but my {relative} ate two pieces.",
            [
                "have you tried baking again since the birthday?",
                f"did your {relative} like the dessert you made?",
            ],
        )
    if kind == "home":
        room, color = rng.choice(ROOMS), rng.choice(COLORS)
        return (
            f"We're repainting the {room} {color} this month.",
            f"We had to move all the {room} furniture into the garage for the {color} paint.",
            [
                f"did the paint job in the {room} ever get finished?",
                f"so do you like the {color} walls now that they're done?",
            ],
        )
    if kind == "race":
        race, minutes = rng.choice(RACES), rng.choice([58, 75, 112, 134])
        return (
            f"I ran my first {race} on Sunday and finished in {minutes} minutes!",
            f"After the {race} my legs were so sore I took the stairs backwards for two days.",
            ["are you training for another race?", f"how are your legs after the {race}?"],
        )
    course = rng.choice(COURSES)
    return (
        f"I signed up for a {course} class at the community college.",
        f"The {course} class is every Tuesday night and the instructor is really patient.",
        [f"how is the {course} class going?", "do you still go to that Tuesday night class?"],
    )


KINDS = ["pet", "trip", "job", "music", "injury", "wedding", "baking", "home", "race", "course"]
OPENERS = [
    "hey! long time no see", "hi, how have you been?", "morning! did you sleep well?",
    "hey, got a minute to chat?", "hi there, how was your week?",
]  # fmt: skip
REPLIES = [
    "I know, it's been a crazy few weeks.", "pretty good, just tired from work.",
    "not bad at all, thanks for asking!", "busy as always, but fine.",
]  # fmt: skip
REACTIONS = [
    "That's amazing!",
    "Oh no, really?",
    "Wow, tell me more!",
    "Haha, I love that.",
    "No way!",
]
CLOSERS = ["Anyway, talk soon!", "Gotta run, bye!", "Let's catch up again next week."]


def _user(rng: random.Random, u: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    group = f"user-{u:02d}"
    me, friend = NAMES[u % len(NAMES)], rng.choice(FRIENDS)
    # Several events of the same kind per user: the kind alone is ambiguous.
    kinds = rng.sample(KINDS, 7)
    kinds = kinds + rng.choices(kinds, k=EVENTS_PER_USER - len(kinds))
    rng.shuffle(kinds)
    start = datetime(2023, 1, 9, 19, 0, tzinfo=UTC) + timedelta(days=u)
    memories: list[dict[str, Any]] = []
    events: list[tuple[list[str], list[str], str]] = []  # gold ids, goal turns, event turn
    n = 0
    told: set[str] = set()

    def turn(session: int, speaker: str, text: str, when: datetime) -> str:
        nonlocal n
        n += 1
        mid = f"{group}:D{session}:{n}"
        memories.append({
            "id": mid, "group": group, "session": session, "timestamp": when.isoformat(),
            "content": f"{speaker}: {text}", "type": "episode",
        })  # fmt: skip
        return mid

    for s, kind in enumerate(kinds, start=1):
        when = start + timedelta(days=9 * s)
        # Two events of a kind differ (a user has two trips, not the same trip twice).
        while True:
            event, detail, closing = _event(rng, kind, me)
            if event not in told and detail not in told:
                break
        told.update((event, detail))
        turn(s, friend, rng.choice(OPENERS), when)
        turn(s, me, rng.choice(REPLIES), when)
        a = turn(s, me, event, when)
        turn(s, friend, rng.choice(REACTIONS), when)
        b = turn(s, me, detail, when)
        if rng.random() < 0.5:
            turn(s, friend, rng.choice(CLOSERS), when)
        events.append(([a, b], closing, event))

    queries: list[dict[str, Any]] = []
    for i, (gold, closing, _event_text) in enumerate(events):
        if rng.random() < 0.3:
            continue
        lines = [f"{friend}: {rng.choice(OPENERS)}", f"{me}: {rng.choice(REPLIES)}"]
        if rng.random() < 0.6:
            other = events[rng.choice([j for j in range(len(events)) if j != i])]
            lines += [f"{friend}: {other[1][0]}", f"{me}: yes, all good on that front, thanks."]
        lines.append(f"{friend}: {rng.choice(closing)}")
        queries.append({
            "qid": f"{group}:q{len(queries)}", "group": group, "query": "\n".join(lines),
            "gold_ids": gold, "category_name": "dialogue",
        })  # fmt: skip
    return memories, queries


def generate(seed: int = SEED, users: int = USERS) -> dict[str, Any]:
    """The corpus: ``{"memories": [...], "queries": [...]}``, the same for the same seed."""
    rng = random.Random(seed)
    memories: list[dict[str, Any]] = []
    queries: list[dict[str, Any]] = []
    for u in range(users):
        m, q = _user(rng, u)
        memories += m
        queries += q
    return {"memories": memories, "queries": queries}


def main() -> int:
    corpus = generate()
    path = write("personal", corpus)
    print(f"{path}: {len(corpus['memories'])} memories, {len(corpus['queries'])} goals")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
