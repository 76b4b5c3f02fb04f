"""Where unrelated text lands for a query: the level a related memory must rise above.

Embedders place texts on different scales. multilingual-e5 puts almost any two texts at a cosine
similarity near 0.75-0.80, so a query can land as close to "The weather is cold" as to its answer;
OpenAI's text-embedding-3 models put unrelated texts near 0.1. And within one model, short or
generic queries ("ok", "Noted!") sit closer to everything than specific ones. No one constant
tells related from unrelated, so the level is measured for each query: the mean cosine similarity
of its :data:`NEAREST` closest texts of :data:`ABOUT_NO_ONE`, a fixed set of text that is about no
person (general knowledge, how-to answers, figures, news, an assistant's output, chit-chat),
embedded once per embedder as documents.

The closest of them, not all of them: a question about the world ("What is the capital of
Australia?") lands near the few texts about the world, a thank-you near the chit-chat, and a
question about a person near none, so the level rises for what no memory answers and stays low
for what one may. Everyday facts about a person are left out of the set on purpose: they are what
memories are, and a question about the user would land as near them as near its answer.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from memora_pg.embeddings.base import Embedder, embed_checked

# How many of the closest texts about no one a query's level averages.
NEAREST = 5

# Text about no person, of the kinds an agent's conversation also holds; none of it is a memory, and none
# names, addresses or speaks as anyone ("How can I help you?" is near every question about the user).
ABOUT_NO_ONE: tuple[str, ...] = (
    "Paris is the capital and largest city of France.",
    "The Pacific is the largest ocean on Earth.",
    "Photosynthesis turns sunlight, water and carbon dioxide into sugar.",
    "The Second World War ended in 1945.",
    "The speed of light is about 300,000 kilometres per second.",
    "Shakespeare wrote Hamlet around 1600.",
    "The Amazon is the largest rainforest in the world.",
    "Gold is a chemical element with the symbol Au.",
    "The Nile flows north into the Mediterranean Sea.",
    "Mount Kilimanjaro is the highest mountain in Africa.",
    "The human heart has four chambers.",
    "The Roman Empire split into an eastern and a western half.",
    "The French Revolution began in 1789.",
    "The Great Wall of China is thousands of kilometres long.",
    "Black holes bend light with their gravity.",
    "Vaccines train the immune system to recognise a virus.",
    "The Olympic Games are held every four years.",
    "Bees pollinate many of the crops we eat.",
    "Saturn has the most visible rings of any planet.",
    "The Renaissance began in Italy in the fourteenth century.",
    "Python lists can be sorted with the sorted() function.",
    "To center a div in CSS, use flexbox with justify-content and align-items.",
    "SQL joins combine rows from two tables on a related column.",
    "Git rebase rewrites commits on top of another branch.",
    "A binary search runs in logarithmic time.",
    "JavaScript promises represent a value that arrives later.",
    "Regular expressions match patterns in text.",
    "Restart the router if the Wi-Fi keeps dropping.",
    "Mix flour, eggs and milk to make a pancake batter.",
    "A good resume fits on one page.",
    "Twelve divided by four is three.",
    "One inch is 2.54 centimetres.",
    "Water freezes at zero degrees Celsius.",
    "A leap year has 366 days.",
    "A triangle's angles add up to 180 degrees.",
    "The stock market fell sharply on Monday.",
    "Electric cars are becoming cheaper every year.",
    "Interest rates affect mortgage payments.",
    "The forecast says rain tomorrow afternoon.",
    "The film won three awards at the festival.",
    "Here is a short poem about the sea.",
    "Sure! Here's a fun fact about octopuses.",
    "Once upon a time, a dragon lived in a quiet valley.",
    "Here are three ideas for a team name.",
    "Okay, got it.",
    "Great, thanks a lot!",
    "Haha, that's funny.",
)

# Each embedder's unit vectors of ABOUT_NO_ONE, computed on its first search (two first searches at
# once both compute them, and agree). An embedder that cannot be a weak key (unhashable) is kept by
# its id, with a strong reference so that the id is not reused.
_references: weakref.WeakKeyDictionary[Embedder, npt.NDArray[np.float64]] = weakref.WeakKeyDictionary()
_by_id: dict[int, tuple[Embedder, npt.NDArray[np.float64]]] = {}


async def _reference_vectors(embedder: Embedder) -> npt.NDArray[np.float64]:
    try:
        known = _references.get(embedder)
    except TypeError:
        kept = _by_id.get(id(embedder))
        known = kept[1] if kept else None
    if known is not None:
        return known
    vectors = _unit(np.asarray(await embed_checked(embedder, ABOUT_NO_ONE, query=False), dtype=float))
    try:
        _references[embedder] = vectors
    except TypeError:
        _by_id[id(embedder)] = (embedder, vectors)
    return vectors


def _unit(vectors: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    unit: npt.NDArray[np.float64] = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    return unit


async def unrelated_levels(embedder: Embedder, query_vectors: Sequence[Sequence[float]]) -> list[float]:
    """Each query's level: the mean cosine similarity of its :data:`NEAREST` closest texts about no one
    (the query vectors are the embedder's own, already computed)."""
    if not query_vectors:
        return []
    similarities = _unit(np.asarray(query_vectors, dtype=float)) @ (await _reference_vectors(embedder)).T
    closest = -np.partition(-similarities, NEAREST - 1, axis=1)[:, :NEAREST]
    return [float(level) for level in closest.mean(axis=1)]
