"""Where unrelated text lands for a query: the level a related memory must rise above.

Embedders place texts on different scales. multilingual-e5 puts almost any two texts at a cosine
similarity near 0.75-0.80, so a query can land as close to "The weather is cold" as to its answer;
OpenAI's text-embedding-3 models put unrelated texts near 0.1. And within one model, short or
generic queries ("ok", "Noted!") sit closer to everything than specific ones. No one constant
tells related from unrelated, so the level is measured for each query: its mean cosine similarity
to BACKGROUND, a fixed set of everyday memories and chat lines about no one in particular,
embedded once per embedder as documents. Cosine similarity is linear in the unit query vector,
so the mean over the set is one dot product with the set's centroid.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from memora_pg.embeddings.base import Embedder, embed_checked

# Everyday facts and chat lines of the kind memories hold, on no common subject.
BACKGROUND: tuple[str, ...] = (
    "Likes to listen to jazz in the evening",
    "The meeting was moved to Friday afternoon",
    "Has a brother who lives abroad",
    "Bought a new laptop last month",
    "Enjoys cooking Italian food on weekends",
    "Is worried about an upcoming exam",
    "Went to the dentist on Tuesday",
    "Prefers the window seat on flights",
    "The garden needs watering every other day",
    "Started a new job at a bank",
    "Watches football with friends on Sundays",
    "Is allergic to pollen in the spring",
    "Plans to repaint the living room",
    "Reads the news on the train every morning",
    "Adopted a kitten from the shelter",
    "Takes piano lessons once a week",
    "Lost her keys at the supermarket",
    "Visited her grandparents over the holidays",
    "Is trying to drink less coffee",
    "Signed up for a pottery class",
    "The car broke down on the motorway",
    "Likes to go camping in the mountains",
    "Has been feeling tired lately",
    "Is saving money for a new bike",
    "Celebrated his birthday with a small party",
    "Volunteers at the animal shelter",
    "Moved into a flat near the river",
    "Prefers email to phone calls",
    "Is learning to code in JavaScript",
    "Her daughter started school this year",
    "Goes swimming before work",
    "Doesn't like spicy food",
    "Is reading a biography of a famous scientist",
    "Had an argument with a neighbour about parking",
    "Plays video games with his son",
    "Is thinking about changing careers",
    "Booked a hotel for the conference",
    "Grows tomatoes on the balcony",
    "Usually wakes up around seven",
    "Is a fan of science fiction films",
    "Gave a presentation to the board",
    "Has a fear of heights",
    "Ordered a pizza for dinner",
    "Is planning a surprise for her partner",
    "Keeps a journal every night",
    "Works from home on Mondays",
    "Ran into an old friend downtown",
    "Is nervous about public speaking",
    "Just finished painting a portrait",
    "Wants to travel around South America",
    "The rent went up this year",
    "Enjoys long walks with the dog",
    "Has a collection of old coins",
    "Is recovering from a knee injury",
    "Likes to bake cakes for her colleagues",
    "Got a promotion at work",
    "Is studying history at university",
    "Often forgets to reply to messages",
    "Is looking for a new apartment",
    "Spent the weekend at the beach",
    "Thank you, that was helpful",
    "What time is it now?",
    "Sure, sounds good",
    "I'll think about it and get back to you",
)

# The centroid of each embedder's unit background vectors, computed on its first search (two first
# searches at once both compute it, and agree). An embedder that cannot be a weak key (unhashable)
# is kept by its id, with a strong reference so that the id is not reused.
_centroids: weakref.WeakKeyDictionary[Embedder, npt.NDArray[np.float64]] = weakref.WeakKeyDictionary()
_by_id: dict[int, tuple[Embedder, npt.NDArray[np.float64]]] = {}


async def _centroid(embedder: Embedder) -> npt.NDArray[np.float64]:
    try:
        known = _centroids.get(embedder)
    except TypeError:
        kept = _by_id.get(id(embedder))
        known = kept[1] if kept else None
    if known is not None:
        return known
    vectors = np.asarray(await embed_checked(embedder, BACKGROUND, query=False), dtype=float)
    centroid: npt.NDArray[np.float64] = _unit(vectors).mean(axis=0)
    try:
        _centroids[embedder] = centroid
    except TypeError:
        _by_id[id(embedder)] = (embedder, centroid)
    return centroid


def _unit(vectors: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    unit: npt.NDArray[np.float64] = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    return unit


async def unrelated_levels(embedder: Embedder, query_vectors: Sequence[Sequence[float]]) -> list[float]:
    """Each query's mean cosine similarity to the background memories (the query vectors are the
    embedder's own, already computed)."""
    if not query_vectors:
        return []
    centroid = await _centroid(embedder)
    return [float(level) for level in _unit(np.asarray(query_vectors, dtype=float)) @ centroid]
