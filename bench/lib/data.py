"""The benchmark's data: deterministic, clustered, made in memory at any scale.

Layout at ``n`` memories (the layout the figures rely on):

* users hold ``per_user`` memories each (1,000 at full scale, fewer only at toy scales), so
  user-scoped figures see the same per-user work at 10k, 100k and 1M; an organization holds up
  to 1,000 users. Organization ``k`` is named ``mem0:bench{k}``, so the mem0-style face (whose
  collection ``bench{k}`` is that organization) sees the very rows the graph API wrote.
* every user has interactions of 10 messages; memories come 5 per interaction, each sourced
  from one message; memory ``j`` of a user supersedes memory ``j - 1`` unless ``j`` is a multiple
  of 10, so every user holds contradiction chains of depth 10.
* metadata ``{"topic": "t{j % 100}", "role": "user"}``: one topic keeps 1% of a user's rows.
* embeddings are unit vectors around ``clusters`` random centres (each user draws from 8 of
  them), precomputed with numpy: embedding time is excluded from every figure. Query vectors
  sit near one of the user's centres, so their true neighbours have cosine similarity well
  above the package's 0.4 floor and a search that returns fewer than 10 rows has lost some.
* memory texts are distinct lower-case words (no digits, no underscores), so the full-text
  vector PostgreSQL's ``simple`` configuration makes of them is known here, and bulk loads can
  COPY it instead of calling ``to_tsvector`` row by row.
"""

from __future__ import annotations

import hashlib
import math
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import numpy as np
import numpy.typing as npt

DIMENSIONS = 384
USERS_PER_ORG = 1000
MAX_PER_USER = 1000
MESSAGES_PER_INTERACTION = 10
MEMORIES_PER_INTERACTION = 5
CHAIN_DEPTH = 10
TOPICS = 100
CLUSTERS_PER_USER = 8
AGENT_ID = "agent-0"
BASE_TIME = datetime(2025, 1, 1, tzinfo=timezone.utc)
# Relative noise of a memory around its centre (cosine to the centre about 0.8) and of a query.
MEMORY_NOISE = 0.75
QUERY_NOISE = 0.5

Vectors = npt.NDArray[np.float32]

# 64 plain words: four of them spell a memory's number, so every text is distinct.
WORDS = (  # noqa: SIM905 - a sentence of words reads better than 64 quoted strings
    "amber basil cedar delta ember fable garnet harbor indigo jasper kettle lantern meadow nectar "
    "orchid pepper quartz raven saffron timber umber velvet willow yarrow zephyr anchor beacon "
    "canyon dune falcon glacier hollow island juniper kelp lagoon maple nutmeg olive prairie "
    "quill river summit thistle tundra valley walnut aspen birch clover daisy fern grove heath "
    "iris jade lotus moss pine reed sage cobalt marble tulip"
).split()
assert len(set(WORDS)) == 64


def parse_scale(text: str) -> int:
    """``"10k"`` → 10000, ``"1M"`` → 1000000, ``"500"`` → 500."""
    value = text.strip().lower()
    factor = 1
    if value.endswith("k"):
        factor, value = 1000, value[:-1]
    elif value.endswith("m"):
        factor, value = 1_000_000, value[:-1]
    number = int(float(value) * factor)
    if number < 100:
        raise ValueError(f"a scale of at least 100 memories is needed, not {text!r}")
    return number


def scale_label(n: int) -> str:
    if n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n % 1000 == 0:
        return f"{n // 1000}k"
    return str(n)


@dataclass(frozen=True)
class Layout:
    """Who holds how many memories at ``n`` memories in total."""

    n: int
    seed: int = 7
    users: int = field(init=False)
    per_user: int = field(init=False)

    def __post_init__(self) -> None:
        users = max(2, math.ceil(self.n / MAX_PER_USER))
        per_user = self.n // users
        # whole interactions and whole chains
        per_user -= per_user % CHAIN_DEPTH
        object.__setattr__(self, "users", users)
        object.__setattr__(self, "per_user", per_user)

    @property
    def total(self) -> int:
        return self.users * self.per_user

    @property
    def orgs(self) -> int:
        return math.ceil(self.users / USERS_PER_ORG)

    @property
    def clusters(self) -> int:
        return max(16, self.total // 500)

    def org_of(self, user: int) -> str:
        return org_id(user // USERS_PER_ORG)

    def interactions_per_user(self) -> int:
        return self.per_user // MEMORIES_PER_INTERACTION


def org_id(number: int) -> str:
    return f"mem0:{collection(number)}"


def collection(number: int) -> str:
    return f"bench{number}"


def user_id(user: int) -> str:
    return f"user-{user:06d}"


def interaction_id(user: int, number: int) -> str:
    return f"int-{user:06d}-{number:04d}"


def memory_uuid(user: int, j: int) -> uuid.UUID:
    """The id of memory ``j`` of ``user``: the same in every run and in every system measured."""
    digest = hashlib.blake2b(f"memory/{user}/{j}".encode(), digest_size=16).digest()
    return uuid.UUID(bytes=digest, version=4)


def memory_text(user: int, j: int) -> str:
    number = user * MAX_PER_USER + j
    spelled = [WORDS[(number >> (6 * k)) & 63] for k in range(4)]
    return f"remembers {WORDS[j % 64]} note {' '.join(spelled)}"


def message_text(user: int, interaction: int, position: int) -> str:
    return f"message {position} of conversation {interaction} with user {user}: nothing important"


def topic(j: int) -> str:
    return f"t{j % TOPICS}"


def tsvector_of(text: str) -> list[tuple[str, list[int]]]:
    """What ``to_tsvector('simple', text)`` makes of a text of plain lower-case words: lexemes, positions."""
    positions: dict[str, list[int]] = {}
    for position, word in enumerate(text.split(), start=1):
        positions.setdefault(word, []).append(position)
    return sorted(positions.items())


# -- vectors ---------------------------------------------------------------------------------


def _unit(rows: Vectors) -> Vectors:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    unit: Vectors = (rows / norms).astype(np.float32)
    return unit


class VectorSpace:
    """The clustered vectors of a layout, made on demand from the layout's seed."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        rng = np.random.default_rng(layout.seed)
        self.centres = _unit(rng.standard_normal((layout.clusters, DIMENSIONS)).astype(np.float32))
        self.user_clusters = rng.integers(0, layout.clusters, size=(layout.users, CLUSTERS_PER_USER))

    def user_vectors(self, user: int) -> Vectors:
        """The embeddings of every memory of ``user``, in memory order."""
        per_user = self.layout.per_user
        rng = np.random.default_rng((self.layout.seed, 1, user))
        centres = self.centres[self.user_clusters[user][np.arange(per_user) % CLUSTERS_PER_USER]]
        noise = rng.standard_normal((per_user, DIMENSIONS)).astype(np.float32)
        noise *= MEMORY_NOISE / math.sqrt(DIMENSIONS)
        return _unit(centres + noise)

    def all_vectors(self, users: Sequence[int] | None = None) -> Iterator[tuple[int, Vectors]]:
        for user in users if users is not None else range(self.layout.users):
            yield user, self.user_vectors(user)

    def queries(self, user: int, count: int, *, salt: int = 0) -> Vectors:
        """``count`` query vectors near the centres of ``user``'s memories."""
        rng = np.random.default_rng((self.layout.seed, 2, user, salt))
        picks = self.user_clusters[user][rng.integers(0, CLUSTERS_PER_USER, size=count)]
        noise = rng.standard_normal((count, DIMENSIONS)).astype(np.float32) * (QUERY_NOISE / math.sqrt(DIMENSIONS))
        return _unit(self.centres[picks] + noise)

    def fresh(self, key: str, count: int) -> Vectors:
        """Vectors for texts written during the run (saves and adds), clustered like the rest."""
        seed = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "little")
        rng = np.random.default_rng(seed)
        picks = rng.integers(0, self.layout.clusters, size=count)
        noise = rng.standard_normal((count, DIMENSIONS)).astype(np.float32) * (MEMORY_NOISE / math.sqrt(DIMENSIONS))
        return _unit(self.centres[picks] + noise)


def exact_top(vectors: Vectors, query: Vectors, k: int) -> npt.NDArray[np.int64]:
    """Indices of the ``k`` rows nearest ``query`` by cosine distance (vectors are unit length)."""
    similarity = vectors @ query
    k = min(k, len(vectors))
    top = np.argpartition(-similarity, k - 1)[:k]
    return top[np.argsort(-similarity[top], kind="stable")]


# -- rows, in the column order of the COPY statements -----------------------------------------


def user_rows(layout: Layout) -> list[tuple[object, ...]]:
    return [(layout.org_of(u), user_id(u), f"User {u}", BASE_TIME) for u in range(layout.users)]


def interaction_rows(layout: Layout, user: int) -> Iterator[tuple[object, ...]]:
    org = layout.org_of(user)
    for number in range(layout.interactions_per_user()):
        at = BASE_TIME + timedelta(seconds=number * 60)
        yield (org, interaction_id(user, number), user_id(user), AGENT_ID, at, at)


def message_rows(layout: Layout, user: int) -> Iterator[tuple[object, ...]]:
    org = layout.org_of(user)
    for number in range(layout.interactions_per_user()):
        for position in range(MESSAGES_PER_INTERACTION):
            role = "user" if position % 2 == 0 else "assistant"
            yield (org, interaction_id(user, number), position, role, message_text(user, number, position))


def memory_rows(layout: Layout, user: int, vectors: Vectors) -> Iterator[tuple[object, ...]]:
    """(org_id, memory_id, user_id, agent_id, interaction_id, memory, obtained_at, metadata, embedding, search_text)."""
    org = layout.org_of(user)
    for j in range(layout.per_user):
        text = memory_text(user, j)
        yield (
            org,
            memory_uuid(user, j),
            user_id(user),
            AGENT_ID,
            interaction_id(user, j // MEMORIES_PER_INTERACTION),
            text,
            BASE_TIME + timedelta(seconds=j * 12),
            f'{{"topic": "{topic(j)}", "role": "user"}}',
            vectors[j],
            tsvector_of(text),
        )


def source_rows(layout: Layout, user: int) -> Iterator[tuple[object, ...]]:
    org = layout.org_of(user)
    for j in range(layout.per_user):
        position = (j % MEMORIES_PER_INTERACTION) * 2
        yield (org, memory_uuid(user, j), interaction_id(user, j // MEMORIES_PER_INTERACTION), position)


def update_rows(layout: Layout, user: int) -> Iterator[tuple[object, ...]]:
    org = layout.org_of(user)
    for j in range(layout.per_user):
        if j % CHAIN_DEPTH:
            yield (org, memory_uuid(user, j), memory_uuid(user, j - 1))


def chain_roots(layout: Layout, user: int, count: int) -> list[int]:
    """The oldest memory of up to ``count`` chains of ``user`` (each resolves through 9 newer versions)."""
    return list(range(0, layout.per_user, CHAIN_DEPTH))[:count]
