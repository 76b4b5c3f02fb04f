"""``AsyncMemory``: the durag/mem0 ``Memory`` API on memora_pg's tables, natively async.

A collection (``vector_store.config.collection_name``, default ``mem0``) is an organization
``mem0:<collection>``; mem0's ``user_id`` is a user of it (created on first write), its
``agent_id`` the memory's agent, and ``run_id``, ``actor_id`` and ``role`` are kept in the
memory's metadata as mem0 keeps them in its payload. A memory without a user belongs to the
collection's user ``''``, without an agent to the agent ``''``.

Every method is one transaction. ``add`` calls the language model and the embedder before
it opens; all the changes it decides, with their history events, then commit together.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_
from sqlalchemy.ext.asyncio import AsyncEngine

from memora_pg import driver, tracing
from memora_pg.config import Settings
from memora_pg.db import Database
from memora_pg.embeddings import Embedder, embed_checked, unrelated_similarity
from memora_pg.face import EmbeddingFace
from memora_pg.graph import audit, history, memories, orgs, saves, search
from memora_pg.graph import validate as check
from memora_pg.graph.memories import NewMemory
from memora_pg.ids import parse_memory_id
from memora_pg.mem0 import changes, inference
from memora_pg.mem0 import filters as filter_language
from memora_pg.mem0.config import MemoryConfig
from memora_pg.mem0.errors import DuragValidationError, MemoryNotFoundError
from memora_pg.mem0.llm import LLMReranker, OpenAILLM, Reranker
from memora_pg.mem0.shapes import (
    EXPIRATION,
    PROCEDURAL,
    SIMILAR_PER_FACT,
    AddRequest,
    Scope,
    actor_of,
    add_scope,
    added_at,
    check_threshold,
    combined_filters,
    event_of,
    existing_id,
    expiration_of,
    history_item,
    item_of,
    kept,
    messages_of,
    new_memory,
    new_metadata,
    scope_of,
    search_query,
    searched,
    shown_at,
    top_k_of,
    with_vector,
)
from memora_pg.statements import Statement

# update()'s "expiration_date not given" (None clears it, as in mem0).
_UNSET: Any = object()


@tracing.instrument("mem0", tracing.MEM0)
class AsyncMemory(EmbeddingFace):
    """The mem0-style memory on PostgreSQL (async). ``Memory`` is its synchronous shell."""

    def __init__(
        self,
        config: MemoryConfig | None = None,
        *,
        engine: AsyncEngine | None = None,
        embedder: Embedder | None = None,
        llm: OpenAILLM | None = None,
        reranker: Reranker | None = None,
        settings: Settings | None = None,
    ) -> None:
        self.config = config or MemoryConfig()
        # memora_pg's own settings, when given, instead of those the config and the environment make.
        settings = settings or self.config.settings()
        search.check_mode(settings.search_mode)
        self._db = Database(engine, settings=settings)
        self.collection = self.config.collection_name
        self.org_id = f"mem0:{self.collection}"
        self._embedder = embedder
        self._llm = llm
        self._reranker = reranker
        # Set on a copy made by for_organization: the original owns the connections and clients.
        self._copy_of: AsyncMemory | None = None

    @classmethod
    def from_config(cls, config_dict: Mapping[str, Any]) -> AsyncMemory:
        return cls(MemoryConfig.parse(config_dict))

    # -- plumbing ------------------------------------------------------------------------------

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = self.config.build_embedder()
        return self._embedder

    @property
    def llm(self) -> OpenAILLM:
        if self._llm is None:
            if self.config.llm.provider != "openai":
                raise DuragValidationError(f"llm provider must be 'openai', not {self.config.llm.provider!r}")
            self._llm = OpenAILLM.from_config(self.config.llm.config)
        return self._llm

    @property
    def reranker(self) -> Reranker | None:
        if self._reranker is None and self.config.reranker is not None:
            options = self.config.reranker.config
            self._reranker = LLMReranker(OpenAILLM.from_config(options) if options else self.llm)
        return self._reranker

    @property
    def can_infer(self) -> bool:
        """Whether a language model is configured (given, in the config, or OpenAI's key in the
        environment), so that ``add(..., infer=True)`` can extract facts."""
        return self._llm is not None or bool(self.config.llm.config) or bool(os.environ.get("OPENAI_API_KEY"))

    # Its database is shared with for_organization's copies. Every method is made ready (Face.ensure_ready)
    # before its first statement.

    def new_database_dimensions(self) -> int:
        # The configured embedder's dimension, as mem0 sizes a new collection by its embedder.
        return self.embedder.dimensions

    async def _embed(self, texts: Sequence[str], *, query: bool) -> list[list[float]]:
        await self.ensure_ready()
        return await embed_checked(self.embedder, texts, query=query)

    def for_organization(self, org_id: str) -> AsyncMemory:
        """This memory (its database, pool, embedder and models) for another organization than its
        collection's: what a server acting for many tenants (``memora-pg mcp --http``) uses per request.
        The copy shares the original's connections, embedder and models (made here, once, if they were
        not yet); closing a copy does nothing: close the original."""
        if not isinstance(org_id, str) or not org_id or len(org_id) > 200 or "\x00" in org_id:
            raise DuragValidationError("org_id must be 1-200 characters without NUL")
        if org_id == self.org_id:
            return self
        self.embedder  # noqa: B018 (made now, so that every copy shares the one embedder)
        if self._llm is None and self.can_infer:
            self.llm  # noqa: B018 (likewise the model's client)
        scoped = copy.copy(self)
        scoped.org_id = org_id
        scoped.collection = org_id.removeprefix("mem0:")
        scoped._copy_of = self
        return scoped

    async def close(self) -> None:
        """Release the connections and the model's client; a for_organization copy leaves them to the original."""
        if self._copy_of is not None:
            return
        await super().close()
        if self._llm is not None:
            await self._llm.aclose()

    # -- add -----------------------------------------------------------------------------------

    async def add(
        self,
        messages: str | dict[str, Any] | list[dict[str, Any]],
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        infer: bool = True,
        memory_type: str | None = None,
        prompt: str | None = None,
        expiration_date: Any = None,
        timestamp: Any = None,
        filters: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Remember ``messages``: facts chosen by the language model (``infer=True``) or the messages as given.

        ``metadata["created_at"]`` (an ISO 8601 timestamp) dates the new memories; identity keys
        in ``metadata`` (user_id, agent_id, run_id, actor_id) are ignored with a warning, as in
        mem0. ``timestamp`` (Unix seconds or a datetime, as on mem0's platform) is when the memories
        were created: it is used instead of the current time and dates them in valid time (it wins
        over ``metadata["created_at"]``). ``expiration_date`` (a date, datetime or YYYY-MM-DD
        string) is kept in the memories' metadata; once it is past (UTC) they are no longer
        current: hidden from search and get_all, still in their history. ``filters`` (as mem0's
        platform client takes them) may carry the ids; its other keys go into the metadata.
        """
        if filters is not None:
            ids, metadata = add_scope(filters, {"user_id": user_id, "agent_id": agent_id, "run_id": run_id}, metadata)
            user_id, agent_id, run_id = ids["user_id"], ids["agent_id"], ids["run_id"]
        scope = scope_of(user_id, agent_id, run_id)
        if memory_type not in (None, PROCEDURAL):
            raise DuragValidationError(f"memory_type must be None or {PROCEDURAL!r}, not {memory_type!r}.")
        if memory_type == PROCEDURAL and not scope.agent_id:
            raise DuragValidationError("A procedural memory needs an agent_id.")
        request = AddRequest(
            messages_of(messages), scope, new_metadata(metadata, scope, expiration_date), added_at(metadata, timestamp)
        )
        if memory_type == PROCEDURAL:
            return await self._add_procedural(request, prompt)
        if not infer:
            return await self._add_raw(request)
        return await self._add_inferred(request, prompt)

    async def _add_raw(self, request: AddRequest) -> dict[str, Any]:
        kept = [m for m in request.conversation if m.get("role") != "system" and m.get("content")]
        base = request.metadata
        items = [new_memory(m["content"], {**base, "role": m.get("role", "user"), **actor_of(m)}) for m in kept]
        return await self._added(request.scope, items, request.at, raw=True)

    async def _add_procedural(self, request: AddRequest, prompt: str | None) -> dict[str, Any]:
        messages = inference.procedural_messages(request.conversation, prompt)
        summary = await self.llm.complete(messages, json_object=False)
        item = new_memory(inference.procedural_text(summary), {**request.metadata, "memory_type": PROCEDURAL})
        return await self._added(request.scope, [item], request.at, raw=False)

    async def _added(self, scope: Scope, items: list[NewMemory], at: datetime, *, raw: bool) -> dict[str, Any]:
        """``items`` embedded, then written as new memories of ``scope`` in one statement, with their ADD
        events and the audit row; mem0's result of the add."""
        vectors = await self._embed([item.text for item in items], query=False)
        items = [with_vector(item, vector) for item, vector in zip(items, vectors, strict=True)]
        results = [event_of(item, "ADD", raw=raw) for item in items]
        await self._db.execute_one(
            self._new(scope, items, changes.audit_entry(self._db.settings.audit, "add", scope.user_id, results), at),
            org_id=self.org_id,
        )
        return {"results": results}

    async def _add_inferred(self, request: AddRequest, prompt: str | None) -> dict[str, Any]:
        scope, at = request.scope, request.at
        system = prompt or self.config.custom_fact_extraction_prompt or self.config.custom_instructions
        extraction = inference.extraction_messages(request.conversation, system)
        facts = inference.facts_of(await self.llm.complete_json(extraction))
        if not facts:
            return {"results": []}

        # Related memories of the same scope, one statement for all facts.
        fact_vectors = await self._embed(facts, query=False)
        related = await search.find(
            self._db,
            search.MEMORIES,
            org_id=self.org_id,
            where=search.memories_where(self.org_id, also=scope.where()),
            vectors=fact_vectors,
            texts=facts,
            k=SIMILAR_PER_FACT,
            scoped=bool(scope.user_id),
            unrelated_similarity=unrelated_similarity(self.embedder),
        )
        by_number = inference.numbered(related)
        shown = [{"id": str(n), "text": row["memory"]} for n, row in by_number.items()]
        custom = self.config.custom_update_memory_prompt
        plan = inference.plan_of(
            await self.llm.complete_json(inference.decision_messages(shown, facts, custom)), by_number, request.metadata
        )
        additions, updates, deletions = plan.additions, plan.updates, plan.deletions

        vectors = await self._embed([i.text for i in additions] + [t for _, t in updates], query=False)
        additions = [with_vector(item, v) for item, v in zip(additions, vectors[: len(additions)], strict=True)]
        update_vectors = vectors[len(additions) :]
        results: list[dict[str, Any]] = []
        async with self._db.transaction(org_id=self.org_id) as conn:
            if additions:
                await conn.run(self._new(scope, additions, None, at))
            results += [event_of(item, "ADD") for item in additions]
            results += await changes.apply_decisions(
                conn, org_id=self.org_id, updates=updates, update_vectors=update_vectors, deletions=deletions
            )
            if results:
                await self._audit(conn, "add", scope.user_id if additions else None, results)
        return {"results": results}

    def _new(self, scope: Scope, items: Sequence[NewMemory], audited: audit.Entry | None, at: datetime) -> Statement:
        """The statement writing new memories of the scope, created ``at``, with their ADD events, the
        collection and user rows they need, and the call's audit row when ``audited`` is given."""
        return saves.add(
            org_id=self.org_id,
            collection=self.collection,
            user_id=scope.user_id,
            agent_id=scope.agent_id,
            at=at,
            items=items,
            audited=audited,
        )

    async def _audit(
        self, conn: driver.Connection, method: str, user_id: str | None, results: Sequence[dict[str, Any]]
    ) -> None:
        """One audit row per public call, in its transaction."""
        await audit.record(
            conn, org_id=self.org_id, audited=changes.audit_entry(self._db.settings.audit, method, user_id, results)
        )

    # -- reading -------------------------------------------------------------------------------

    async def search(
        self,
        query: str,
        *,
        top_k: int | None = None,
        filters: dict[str, Any] | None = None,
        threshold: float | None = None,
        rerank: bool = False,
        show_expired: bool = False,
        as_of: datetime | None = None,
        as_of_clock: str = "valid",
        **kwargs: Any,
    ) -> dict[str, Any]:
        """The ``top_k`` (default 20) memories most similar to ``query`` under ``filters``, best first.

        ``threshold`` (0 to 1) is the lowest score kept. By default (None) a hit must score above 0:
        the score counts only what lies beyond where unrelated text lands for this query (see the
        README, "What a score means"), so 0 means "not related". ``threshold=0`` keeps every ranked
        memory. ``limit=`` is accepted for ``top_k`` and top-level ``user_id=``/``agent_id=``/``run_id=``
        are folded into the filters (autogen-ext's Mem0Memory sends both). Expired memories are left
        out unless ``show_expired``. ``as_of`` (a datetime) searches the memories current at that
        time, by valid time (``as_of_clock="valid"``) or by system time (``"system"``).
        """
        query = search_query(query)
        top_k = top_k_of(top_k, kwargs)
        threshold = check_threshold(threshold)
        combined, rows = searched(self.org_id, self._db.schema, filters, kwargs, as_of, as_of_clock, show_expired)
        if rerank and self.reranker is None:
            raise DuragValidationError("rerank=True needs a reranker in MemoryConfig.reranker.")
        if top_k == 0:
            await self.ensure_ready()
            return {"results": []}
        (vector,) = await self._embed([query], query=True)
        (hits,) = await search.find(
            self._db,
            search.MEMORIES,
            org_id=self.org_id,
            where=rows,
            vectors=[vector],
            texts=[query],
            k=top_k,
            scoped=filter_language.uses_user_scope(combined),
            unrelated_similarity=unrelated_similarity(self.embedder),
            embedder=self.embedder,
        )
        found = [(row, score) for row, score in hits if kept(score, threshold)]
        if rerank and found and self.reranker is not None:
            scores = await self.reranker.scores(query, [row["memory"] for row, _ in found])
            found = sorted(((row, s) for (row, _), s in zip(found, scores, strict=True)), key=lambda pair: -pair[1])
        return {"results": [item_of(row, "search", score) for row, score in found]}

    async def get(self, memory_id: str) -> dict[str, Any] | None:
        """The memory, or None when no memory of this collection has that id."""
        await self.ensure_ready()
        parsed = parse_memory_id(memory_id)
        if parsed is None:
            return None
        # On the primary: a memory just added is there for its caller's next get (read-your-writes).
        rows = await self._db.execute_one(
            memories.find_statement(org_id=self.org_id, memory_id=parsed), org_id=self.org_id, writes=False
        )
        return item_of(rows[0]._asdict()) if rows else None

    async def get_all(
        self,
        *,
        filters: dict[str, Any] | None = None,
        top_k: int | None = None,
        show_expired: bool = False,
        as_of: datetime | None = None,
        as_of_clock: str = "valid",
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Up to ``top_k`` (default 20) memories matching ``filters``, newest first; expired ones
        only with ``show_expired``; ``as_of`` as in :meth:`search`."""
        top_k = top_k_of(top_k, kwargs)
        _, where = combined_filters(filters, kwargs)
        where = and_(where, shown_at(self._db.schema, as_of, as_of_clock, show_expired))
        await self.ensure_ready()
        if top_k == 0:
            return {"results": []}
        rows = await self._db.execute_one(
            memories.newest_statement(org_id=self.org_id, where=where, limit=top_k), org_id=self.org_id, writes=False
        )
        return {"results": [item_of(row._asdict(), "list") for row in rows]}

    async def history(self, memory_id: str, *, user_id: str | None = None) -> list[dict[str, Any]]:
        """The memory's ADD, UPDATE and DELETE events, oldest first, with the text before and after
        (none unless the memory is ``user_id``'s, when given).

        As in mem0, every event's ``created_at`` is the memory's creation time and ``updated_at``
        the time of the event (the creation time for the ADD).
        """
        await self.ensure_ready()
        parsed = parse_memory_id(memory_id)
        if parsed is None:
            return []
        async with self._db.transaction(org_id=self.org_id) as conn:
            events = await history.for_memory(conn, org_id=self.org_id, memory_id=parsed, user_id=user_id)
            created = next((e["created_at"] for e in events if e["event"] == "ADD"), None)
            if created is None and events:
                row = await memories.find(conn, org_id=self.org_id, memory_id=parsed)
                created = row["obtained_at"] if row else None
        return [history_item(event, created) for event in events]

    # -- changing ------------------------------------------------------------------------------

    async def update(
        self,
        memory_id: str,
        text: str | None = None,
        metadata: dict[str, Any] | None = None,
        expiration_date: Any = _UNSET,
        data: str | None = None,
    ) -> dict[str, Any]:
        """Change the memory's text and/or merge ``metadata`` into its metadata; the id stays the same.

        As mem0 2.x: ``data`` is the old name of ``text``; identity keys in ``metadata`` are
        ignored; ``expiration_date`` sets (None: clears) the expiration date.
        """
        if text is None:
            text = data
        if text is None and metadata is None and expiration_date is _UNSET:
            raise DuragValidationError("At least one of text, metadata, or expiration_date must be provided.")
        if text is not None:
            check.memory_text(text)
        if metadata is not None and not isinstance(metadata, dict):
            raise DuragValidationError("metadata must be a dict.")
        given = dict(metadata or {})
        if expiration_date is not _UNSET:
            given[EXPIRATION] = expiration_of(expiration_date)
        parsed = existing_id(memory_id)
        await self.ensure_ready()
        vector = (await self._embed([text], query=False))[0] if text is not None else None
        change = changes.edit(memory_id=parsed, text=text, embedding=vector, given=given)
        # One call: the memory locked and changed, its UPDATE event and the audit row (naming its user).
        audited = changes.audit_entry(self._db.settings.audit, "update", None, [{"id": str(parsed), "event": "UPDATE"}])
        statement = memories.update_in_place(self.org_id, [change], audited)
        before = memories.updated(await self._db.execute_one(statement, org_id=self.org_id))
        if not before:
            raise MemoryNotFoundError(f"No memory with id {memory_id!r} in collection {self.collection!r}.")
        changes.warn_of_identity_keys(given, before[0])
        return {"message": "Memory updated successfully!"}

    async def delete(self, memory_id: str) -> dict[str, Any]:
        parsed = existing_id(memory_id)
        await self.ensure_ready()
        async with self._db.transaction(org_id=self.org_id) as conn:
            found = await memories.find(conn, org_id=self.org_id, memory_id=parsed)
            deleted, events = await changes.delete(
                conn, org_id=self.org_id, memory_ids=[parsed], metadata={parsed: found["metadata"] if found else None}
            )
            if not deleted:
                raise MemoryNotFoundError(f"No memory with id {memory_id!r} in collection {self.collection!r}.")
            await history.record(conn, org_id=self.org_id, events=events)
            await self._audit(conn, "delete", deleted[0].user_id, [{"id": str(parsed), "event": "DELETE"}])
        return {"message": "Memory deleted successfully!"}

    async def delete_all(
        self, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None
    ) -> dict[str, Any]:
        """Delete every memory of the given user, agent and/or run (at least one is required)."""
        if user_id is None and agent_id is None and run_id is None:
            raise DuragValidationError(
                "At least one filter is required to delete all memories. "
                "If you want to delete all memories, use the `reset()` method."
            )
        scope = scope_of(user_id, agent_id, run_id)
        await self.ensure_ready()
        async with self._db.transaction(org_id=self.org_id) as conn:
            doomed = await memories.metadata_where(conn, org_id=self.org_id, where=scope.where())
            deleted, events = await changes.delete(conn, org_id=self.org_id, memory_ids=list(doomed), metadata=doomed)
            await history.record(conn, org_id=self.org_id, events=events)
            if deleted:
                await self._audit(
                    conn, "delete_all", None, [{"id": str(d.memory_id), "event": "DELETE"} for d in deleted]
                )
        return {"message": "Memories deleted successfully!"}

    async def reset(self) -> None:
        """Forget the whole collection: its memories, their vectors, its history and its users."""
        await self.ensure_ready()
        async with self._db.transaction(org_id=self.org_id) as conn:
            await orgs.delete(conn, org_id=self.org_id)
