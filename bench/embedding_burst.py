"""What a burst of concurrent single-text calls costs the default embedder (LocalEmbedder, multilingual-e5-small).

Every put of a busy store, every add of the mem0-style face, embeds one text. Calls that arrive while the model
runs share its next batch (memora_pg.embeddings.coalescing). The same texts are timed three ways in one run:
one call at a time, all calls at once (the default), and one call of the whole list (the model's batches of 64,
the floor).

    python -m bench.embedding_burst --texts 256
"""

from __future__ import annotations

import argparse
import asyncio
import time

from memora_pg.embeddings import LocalEmbedder


def _texts(count: int) -> list[str]:
    return [f"Note {n}: the user went hiking near Lisbon and had pizza after, on day {n % 31}" for n in range(count)]


async def measure(count: int) -> dict[str, float]:
    """Milliseconds a text, each way."""
    embedder = LocalEmbedder()
    await embedder.embed_documents(["warm up: load the model"])
    texts = _texts(count)
    figures: dict[str, float] = {}

    started = time.perf_counter()
    for text in texts:
        await embedder.embed_documents([text])
    figures["one call at a time"] = (time.perf_counter() - started) * 1000 / count

    started = time.perf_counter()
    await asyncio.gather(*(embedder.embed_documents([text]) for text in texts))
    figures["all calls at once (coalesced)"] = (time.perf_counter() - started) * 1000 / count

    started = time.perf_counter()
    await embedder.embed_documents(texts)
    figures["one call of every text"] = (time.perf_counter() - started) * 1000 / count
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=256)
    args = parser.parse_args()
    figures = asyncio.run(measure(args.texts))
    print(f"{args.texts} single-text calls, LocalEmbedder\n")
    print("| how the calls come | ms a text |\n| --- | --- |")
    for name, value in figures.items():
        print(f"| {name} | {value:.2f} |")


if __name__ == "__main__":
    main()
