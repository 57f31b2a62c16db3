"""The rules of ctxpack ingest (domain/ingest.py), without a database: the formats and their
detection, what a turn becomes (namespace, content, valid_at, external id, key), times as
people write them, and the order of linked turns."""

from __future__ import annotations

import json

import pytest

from service.domain.ingest import (
    Mapping,
    Turn,
    item_of,
    link_phases,
    neighbours,
    parse_time,
    parse_zone,
    read_turns,
    turn_key,
)

JSONL = "\n".join(
    json.dumps(row)
    for row in [
        {"text": "I moved to Lisbon last spring to join a robotics startup.", "speaker": "Ana", "timestamp": "2024-04-02T09:00:00Z", "session": 1},
        {"text": "That sounds exciting, what does the startup build exactly?", "speaker": "Ben", "timestamp": "2024-04-02T09:01:00Z", "session": 1},
        {"text": "We build warehouse robots that sort parcels by weight and size.", "speaker": "Ana", "timestamp": "2024-04-02T09:02:00Z", "session": 1},
        {"text": "My sister adopted a grey kitten called Pixel last weekend.", "speaker": "Ben", "timestamp": "2024-05-10T18:00:00Z", "session": 2},
        {"text": "Pixel already knocked every plant off her kitchen windowsill.", "speaker": "Ben", "timestamp": "2024-05-10T18:01:00Z", "session": 2},
        {"text": 'Traceback (most recent call last):\n  File "a.py", line 3, in <module>\n    main()\n'
                 '  File "a.py", line 2, in main\n    raise ValueError(1)\nValueError: 1',
         "speaker": "Ana", "timestamp": "2024-05-10T18:02:00Z", "session": 2},
    ]
)

LOCOMO = [
    {
        "sample_id": "conv-1",
        "conversation": {
            "speaker_a": "Caroline",
            "speaker_b": "Melanie",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Caroline", "dia_id": "D1:1", "text": "I went to a support group yesterday and it was powerful."},
                {"speaker": "Melanie", "dia_id": "D1:2", "text": "I painted a sunrise over the lake last week.",
                 "img_url": ["x"], "blip_caption": "a painting of a sunrise"},
            ],
            "session_2_date_time": "7:00 pm on 25 May, 2023",
            "session_2": [
                {"speaker": "Caroline", "dia_id": "D2:1", "text": "I am researching adoption agencies for next year."},
            ],
        },
    }
]

OPENAI = [
    {"id": "chat-a", "messages": [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "I prefer tabs over spaces in every Go project I maintain."},
        {"role": "assistant", "content": [{"type": "text", "text": "Noted: gofmt uses tabs anyway, so your Go code will follow that."}]},
    ]},
    {"id": "chat-b", "messages": [
        {"role": "user", "content": "Our deploy window is Tuesday mornings between nine and eleven."},
    ]},
]


def test_formats() -> None:
    fmt, turns = read_turns(JSONL)
    assert fmt == "jsonl" and len(turns) == 6
    assert turns[0].session == "1" and turns[3].position == 0 and turns[4].position == 1
    assert turns[0].external_id == read_turns(JSONL)[1][0].external_id  # stable

    fmt, turns = read_turns(json.dumps(LOCOMO))
    assert fmt == "locomo" and [t.external_id for t in turns] == ["conv-1:D1:1", "conv-1:D1:2", "conv-1:D2:1"]
    assert turns[1].text.endswith("[shares a photo: a painting of a sunrise]")
    item = item_of(turns[0], Mapping("loco-{conversation}"), fmt)
    assert item["namespace"] == "loco-conv-1:s1"
    assert item["content"].startswith("Caroline: I went")
    assert item["valid_at"].startswith("2023-05-08T13:56")
    assert item["source"] == "conv-1:D1:1" and item["metadata"]["external_id"] == "conv-1:D1:1"
    flat = item_of(turns[0], Mapping("loco", sessions="metadata", speaker_in="metadata"), fmt)
    assert flat["namespace"] == "loco" and flat["content"].startswith("I went")
    assert flat["metadata"]["speaker"] == "Caroline" and flat["metadata"]["session"] == "1"

    for text in (json.dumps(OPENAI), "\n".join(json.dumps(c) for c in OPENAI)):
        fmt, turns = read_turns(text)
        assert fmt == "openai" and [t.speaker for t in turns] == ["user", "assistant", "user"]
        assert [t.session for t in turns] == ["chat-a", "chat-a", "chat-b"]
    fmt, turns = read_turns(json.dumps(OPENAI[0]["messages"]))
    assert fmt == "openai" and len(turns) == 2

    from service.errors import InvalidInput

    with pytest.raises(InvalidInput):
        read_turns("not json at all")
    with pytest.raises(InvalidInput):
        item_of(turns[0], Mapping("bad namespace!"), "openai")


def test_turn_key_is_a_valid_key() -> None:
    from service.domain.redaction import REDACTOR
    from service.schemas.memories import KEY_MAX, check_key

    assert turn_key(Turn("conv-26:D1:3", "x")) == "conv-26:D1:3"  # the id itself when valid
    for bad in ("x" * 300, " padded ", "line\nbreak", "sk-live-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6", "+1 415 555 0100"):
        key = turn_key(Turn(bad, "x"))
        assert key.startswith("sha256:") and len(key) <= KEY_MAX
        assert check_key(key) == key and not REDACTOR.redact(key).counts
        assert key == turn_key(Turn(bad, "y"))  # stable: the id's, not the text's
    assert item_of(Turn("t1", "hello there", speaker="Ana"), Mapping("kim"), "jsonl")["key"] == "t1"


@pytest.mark.parametrize(
    ("stamp", "order", "zone", "expected"),
    [
        ("29.12.2023, 00:51:12", "auto", "UTC", "2023-12-29T00:51:12+00:00"),
        ("03.04.2023 10:00", "auto", "UTC", "2023-04-03T10:00:00+00:00"),
        ("03/04/2023 10:00", "auto", "UTC", "2023-03-04T10:00:00+00:00"),
        ("03/04/2023 10:00", "dmy", "UTC", "2023-04-03T10:00:00+00:00"),
        ("03.04.2023 10:00", "mdy", "UTC", "2023-03-04T10:00:00+00:00"),
        ("12/29/2023 12:51 AM", "auto", "UTC", "2023-12-29T00:51:00+00:00"),
        ("Fri, 29 Dec 2023 00:51:12 +0100", "auto", "UTC", "2023-12-29T00:51:12+01:00"),
        ("1:56 pm on 8 May, 2023", "auto", "UTC", "2023-05-08T13:56:00+00:00"),
        ("May 8, 2023 3pm", "auto", "UTC", "2023-05-08T15:00:00+00:00"),
        ("03.04.2023 10:00", "auto", "Europe/Lisbon", "2023-04-03T10:00:00+01:00"),
        ("2023-07-01 09:30", "auto", "+02:00", "2023-07-01T09:30:00+02:00"),
        ("2024-04-02T09:00:00Z", "auto", "Europe/Lisbon", "2024-04-02T09:00:00+00:00"),
        ("1700000000", "auto", "UTC", "2023-11-14T22:13:20+00:00"),
        ("5", "auto", "UTC", None),
        ("10:00", "auto", "UTC", None),
        ("December 2023", "auto", "UTC", None),
        ("yesterday-ish", "auto", "UTC", None),
    ],
)
def test_timestamps_as_people_write_them(stamp: str, order: str, zone: str, expected: str | None) -> None:
    when = parse_time(stamp, order=order, zone=parse_zone(zone))
    assert (when.isoformat() if when else None) == expected


def test_linked_turns_go_even_first_each_knowing_its_neighbours() -> None:
    _, turns = read_turns(JSONL)
    assert link_phases(turns, False) == [turns]
    evens, odds = link_phases(turns, True)
    assert [t.position for t in evens] == [0, 2, 0, 2] and [t.position for t in odds] == [1, 1]
    around = neighbours(turns)
    first, second, third = (t.external_id for t in turns[:3])
    assert around[first] == (None, second) and around[second] == (first, third)
    assert around[turns[3].external_id] == (None, turns[4].external_id)  # sessions apart
