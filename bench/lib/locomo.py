"""A LoCoMo-format conversation file, read: each conversation's turns (dated by their session) and its
questions of categories 1-4 with the evidence turns that answer them.

Evidence ids are cleaned as written (``"D8:6; D9:17"`` is two ids, ``"D:11:26"`` is ``D11:26``); ids that
name no turn are dropped, and a question left with none is skipped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


@dataclass
class Turn:
    dia_id: str
    session: int
    date: datetime
    text: str


@dataclass
class Question:
    text: str
    category: int
    evidence: list[str]


@dataclass
class Conversation:
    sample_id: str
    turns: list[Turn]
    questions: list[Question]


def _date(value: str | None) -> datetime:
    try:
        return datetime.strptime(value or "", "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)
    except ValueError:
        return datetime(2023, 1, 1, tzinfo=timezone.utc)


def load(path: Path) -> list[Conversation]:
    found = []
    for sample in json.loads(path.read_text()):
        conversation = sample["conversation"]
        turns: list[Turn] = []
        session = 1
        while f"session_{session}" in conversation:
            at = _date(conversation.get(f"session_{session}_date_time"))
            turns += [
                Turn(t["dia_id"], session, at, f"{t['speaker']}: {t['text']}")
                for t in conversation[f"session_{session}"]
            ]
            session += 1
        known = {turn.dia_id for turn in turns}
        questions = []
        for qa in sample.get("qa", []):
            evidence = _evidence(qa.get("evidence") or [], known)
            if qa.get("category") in CATEGORIES and evidence:
                questions.append(Question(qa["question"], qa["category"], evidence))
        found.append(Conversation(sample["sample_id"], turns, questions))
    return found


def _evidence(given: Sequence[str], known: set[str]) -> list[str]:
    ids: list[str] = []
    for entry in given:
        for part in re.split(r"[;,\s]+", entry):
            match = re.match(r"^D:?(\d+):(\d+)$", part)
            if match and f"D{int(match[1])}:{int(match[2])}" in known:
                ids.append(f"D{int(match[1])}:{int(match[2])}")
    return list(dict.fromkeys(ids))
