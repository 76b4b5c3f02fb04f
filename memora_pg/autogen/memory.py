"""``PostgresMemory``: AutoGen's memory protocol on PostgreSQL, and its component configuration."""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Coroutine
from datetime import datetime
from typing import Any, TypeVar

from pydantic import SecretStr, field_serializer
from sqlalchemy import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from memora_pg import tracing
from memora_pg.autogen.arguments import (
    DEFAULT_ORG_ID,
    DEFAULT_ORG_NAME,
    MAX_NAME_CHARS,
    USER_KEY,
    check_k,
    check_threshold,
    optional_id,
    query_options,
)
from memora_pg.autogen.convert import memory_line, message_text, to_entry, to_memory_content
from memora_pg.autogen.protocol import (
    CancellationToken,
    Component,
    Memory,
    MemoryContent,
    MemoryQueryResult,
    ModelContext,
    SystemMessage,
    UpdateContextResult,
)
from memora_pg.config import Settings
from memora_pg.db import Database
from memora_pg.driver import Connection
from memora_pg.embeddings import (
    Embedder,
    embed_checked,
    unrelated_similarity,
)
from memora_pg.embeddings.config import embedder_config, embedder_from_config
from memora_pg.errors import ConfigurationError, InvalidInputError, NotFoundError
from memora_pg.face import EmbeddingFace
from memora_pg.graph import audit, autogen_contents, orgs, search, timeline
from memora_pg.graph.validate import no_nul
from memora_pg.known_names import StrictConfig

T = TypeVar("T")


def _url_without_password(url: str) -> str:
    """The URL as a configuration may show it: the password replaced by ``***``."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # an unparsable URL is not shown at all
        return "**********"


def _url_for_connecting(url: str) -> str | None:
    """A configuration's URL: a password dumped as ``***`` (or a fully hidden URL) is left out, so the
    driver takes it from PGPASSWORD or ~/.pgpass (or the configured URL is used)."""
    if set(url) == {"*"}:
        return None
    parsed = make_url(url)
    if parsed.password == "***":  # noqa: S105 - the mask dump_component writes, not a password
        parsed = parsed.set(password=None)
    return parsed.render_as_string(hide_password=False)


class PostgresMemoryConfig(StrictConfig):
    """Configuration of a ``PostgresMemory`` component.

    ``database_url`` is a SecretStr, and is written by ``dump_component()`` with its password
    replaced by ``***``: a loaded configuration then connects with the password from
    ``PGPASSWORD`` or ``~/.pgpass``. Without a URL (or when the memory was given an engine) the
    loaded memory uses the configured URL (``MEMORA_PG_DATABASE_URL``) or the embedded server.
    """

    name: str
    database_url: SecretStr | None = None
    embedder: dict[str, Any] | None = None
    k: int = 5
    score_threshold: float | None = None
    org_id: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    allow_reset: bool = False

    @field_serializer("database_url")
    def _hide_password(self, url: SecretStr | None) -> str | None:
        return None if url is None else _url_without_password(url.get_secret_value())


async def _cancellable(token: CancellationToken | None, work: Coroutine[Any, Any, T]) -> T:
    """Await ``work`` as a task that ``token`` cancels (AutoGen's contract); a write then rolls back."""
    if token is None:
        return await work
    if token.is_cancelled():
        work.close()
        raise asyncio.CancelledError
    task = asyncio.ensure_future(work)
    token.link_future(task)
    return await task


# -- PostgresMemory ------------------------------------------------------------------------------


@tracing.instrument("autogen", tracing.AUTOGEN)
class PostgresMemory(EmbeddingFace, Memory, Component[PostgresMemoryConfig]):
    """A persistent, searchable AutoGen memory in memora_pg's database (table ``autogen_contents``).

    ``name`` is the namespace. ``database_url`` or ``engine`` (which stays the caller's) or
    neither (the configured URL, else the embedded server) chooses the database; ``settings``
    the schema and pool. Every method brings the schema to head on first use (``setup()`` does it up front).

    Scope: a memory object sees exactly the entries it could have written, those of its
    organization and namespace whose ``user_id`` and ``agent_id`` equal its own, where None
    matches only entries written without one. ``org_id=None`` is the built-in organization
    ``"default"``, created by the first write; any other organization, and a ``user_id``, must
    exist when writing (else ``NotFoundError``). Reads of a missing organization or user find
    nothing; ``agent_id`` is a plain label.

    Contents: text and markdown (str, any ``text/*`` mime type) and JSON (a dict, or a str
    holding a JSON object, with ``application/json``) are embedded and searchable, JSON as its
    canonical serialized text, and come back as str and dict. Bytes (any other mime type) and
    images (``image/...``) are stored without an embedding: ``list()`` returns them,
    ``query()`` never does. Images come back as AutoGen ``Image`` objects when autogen-core is
    installed (PNG when given as an ``Image``), else as bytes. Mime types that are
    ``MemoryMimeType`` values come back as its members; empty metadata comes back as None.

    ``query()`` returns the ``k`` best entries by the hybrid search's score (every face's ranking,
    :mod:`memora_pg.graph.scoring`), best first, each with that score as ``metadata["score"]`` and
    its cosine similarity to the query as ``metadata["similarity"]`` beside its stored metadata,
    dropping those whose similarity is under ``score_threshold``; both can be overridden per call
    (``query(q, k=3, score_threshold=0.5)``), also under the names other AutoGen memories use:
    ``top_k`` for ``k``, and ``distance_threshold`` (a cosine distance d, kept when the
    similarity is at least 1 - d). An empty or blank query finds nothing.

    First use: every method brings the schema to head the first time it runs (once per object,
    safe when several processes start at once); ``setup()`` does the same explicitly.

    It is an AutoGen component (``dump_component()``/``load_component()``, see
    :class:`PostgresMemoryConfig`); the embedder is written as its kind and options (never an
    API key), and only HashEmbedder, LocalEmbedder, OpenAIEmbedder or the default can be.
    """

    component_type = "memory"
    component_provider_override = "memora_pg.autogen.PostgresMemory"
    component_config_schema = PostgresMemoryConfig

    _vector_table = "autogen_contents"

    def __init__(
        self,
        name: str,
        *,
        database_url: str | None = None,
        engine: AsyncEngine | None = None,
        embedder: Embedder | None = None,
        k: int = 5,
        score_threshold: float | None = None,
        org_id: str | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        settings: Settings | None = None,
        allow_reset: bool = False,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise InvalidInputError("`name` (the memory's namespace) must be a non-empty string.")
        if len(name) > MAX_NAME_CHARS:
            raise InvalidInputError(f"`name` is limited to {MAX_NAME_CHARS:,} characters.")
        no_nul(name, "`name`")
        if database_url is not None and engine is not None:
            raise InvalidInputError("Pass `database_url` or `engine`, not both.")
        if database_url is not None and not isinstance(database_url, str):
            raise InvalidInputError("`database_url` must be a string.")
        if engine is not None and not isinstance(engine, AsyncEngine):
            raise InvalidInputError("`engine` must be a SQLAlchemy AsyncEngine.")
        settings = settings or Settings()
        search.check_mode(settings.search_mode)
        self._db = Database(database_url if database_url is not None else engine, settings=settings)
        # No setup() needed: the first statement brings the schema to head, the vectors sized by the embedder.
        self._db.migrate_on_first_use(self.new_database_dimensions)
        self._database_url = database_url
        self._scope = autogen_contents.Scope(
            org_id=optional_id(org_id, "org_id") or DEFAULT_ORG_ID,
            namespace=name,
            user_id=optional_id(user_id, "user_id"),
            agent_id=optional_id(agent_id, "agent_id"),
        )
        self._creates_org = org_id is None
        self._embedder = embedder
        self._k = check_k(k)
        self._score_threshold = check_threshold(score_threshold)
        if not isinstance(allow_reset, bool):
            raise InvalidInputError("`allow_reset` must be a bool.")
        self._allow_reset = allow_reset

    # -- plumbing ------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The namespace."""
        return self._scope.namespace

    @property
    def collection_name(self) -> str:
        """The namespace, by the name AutoGen's ChromaDB memory gives its collection."""
        return self._scope.namespace

    @property
    def org_id(self) -> str:
        return self._scope.org_id

    @property
    def user_id(self) -> str | None:
        return self._scope.user_id

    @property
    def agent_id(self) -> str | None:
        return self._scope.agent_id

    @property
    def k(self) -> int:
        return self._k

    @property
    def score_threshold(self) -> float | None:
        return self._score_threshold

    @property
    def database(self) -> Database:
        """The database this memory is kept in."""
        return self._db

    def _to_config(self) -> PostgresMemoryConfig:
        return PostgresMemoryConfig(
            name=self.name,
            database_url=SecretStr(self._database_url) if self._database_url is not None else None,
            embedder=embedder_config(self._embedder),
            k=self._k,
            score_threshold=self._score_threshold,
            org_id=None if self._creates_org else self.org_id,
            user_id=self.user_id,
            agent_id=self.agent_id,
            allow_reset=self._allow_reset,
        )

    @classmethod
    def _from_config(cls, config: PostgresMemoryConfig) -> PostgresMemory:
        url = config.database_url.get_secret_value() if config.database_url is not None else None
        return cls(
            config.name,
            database_url=_url_for_connecting(url) if url is not None else None,
            embedder=embedder_from_config(config.embedder),
            k=config.k,
            score_threshold=config.score_threshold,
            org_id=config.org_id,
            user_id=config.user_id,
            agent_id=config.agent_id,
            allow_reset=config.allow_reset,
        )

    # -- the protocol --------------------------------------------------------------------

    async def add(self, content: MemoryContent, cancellation_token: CancellationToken | None = None) -> None:
        """Store one entry, in one transaction; the embedding is computed before it opens."""
        entry, text = to_entry(content)
        await _cancellable(cancellation_token, self._add(entry, text))

    async def _add(self, entry: autogen_contents.NewContent, text: str | None) -> None:
        embedding = None
        if text is not None:
            await self.check_dimensions()
            [embedding] = await embed_checked(self.embedder, [text], query=False)
        try:
            async with self._db.transaction(org_id=self._scope.org_id) as conn:
                if self._creates_org:
                    await orgs.ensure_owners(conn, org_id=DEFAULT_ORG_ID, org_name=DEFAULT_ORG_NAME)
                content_id = await autogen_contents.insert_one(
                    conn, scope=self._scope, entry=entry, embedding=embedding, text=text
                )
                await self._audit(
                    conn,
                    method="autogen.add",
                    ids={"namespace": self._scope.namespace, "content_id": str(content_id)},
                )
        except NotFoundError as error:
            if error.constraint_name == USER_KEY:
                raise NotFoundError(f"User {self.user_id!r} of organization {self.org_id!r} does not exist.") from error
            raise NotFoundError(f"Organization {self.org_id!r} does not exist.") from error

    async def _audit(self, conn: Connection, *, method: str, **fields: Any) -> None:
        """The call's audit row, in its transaction (unless auditing is off)."""
        entry = audit.entry(
            self._db.settings.audit, method, user_id=self._scope.user_id, agent_id=self._scope.agent_id, **fields
        )
        await audit.record(conn, org_id=self._scope.org_id, audited=entry)

    async def query(
        self, query: str | MemoryContent, cancellation_token: CancellationToken | None = None, **kwargs: Any
    ) -> MemoryQueryResult:
        """The best searchable entries, best first, with ``metadata["score"]`` (the ranking's score)
        and ``metadata["similarity"]`` (the cosine similarity, which the thresholds filter on).

        ``query`` is a str or a MemoryContent of text, markdown or JSON. Keyword arguments
        ``k`` and ``score_threshold`` override the memory's own for this call. ``as_of`` (a
        datetime) searches the entries as they were then: those added by that time. An entry
        has one time, when it was added, so both clocks (``as_of_clock``) agree.
        """
        k, threshold = query_options(kwargs, self._k, self._score_threshold)
        timeline.check_clock(kwargs.get("as_of_clock", timeline.VALID))
        as_of = timeline.check_as_of(kwargs.get("as_of"))
        if isinstance(query, str):
            text = autogen_contents.check_text(query, "The query")
        else:
            _, embeddable = to_entry(query)
            if embeddable is None:
                raise InvalidInputError("Only text, markdown and JSON content can be a query.")
            text = embeddable
        if not text.strip():
            # Nothing to look for: no results (AutoGen's memories never fail on an empty query).
            return MemoryQueryResult(results=[])
        return await _cancellable(cancellation_token, self._query(text, k, threshold, as_of))

    async def _query(self, text: str, k: int, threshold: float | None, as_of: datetime | None) -> MemoryQueryResult:
        await self.check_dimensions()
        [embedding] = await embed_checked(self.embedder, [text], query=True)
        (hits,) = await search.find(
            self._db,
            search.AUTOGEN_CONTENTS,
            org_id=self._scope.org_id,
            where=search.autogen_where(self._scope, as_of=as_of),
            vectors=[embedding],
            texts=[text],
            k=k,
            scoped=True,
            unrelated_similarity=unrelated_similarity(self.embedder),
            embedder=self.embedder,
        )
        # The threshold is on the cosine similarity, as the vector memories it stands in for take it
        # (ChromaDB's similarity score_threshold, Redis's distance_threshold); the ranking stays the search's.
        # Without one, a hit must be related to the query at all (its score above 0: the README, "What a score means").
        found = [
            autogen_contents.stored(row, score)
            for row, score in hits
            if (score > 0 if threshold is None else row["cosine"] >= threshold)
        ]
        return MemoryQueryResult(results=[to_memory_content(entry) for entry in found])

    async def update_context(self, model_context: ModelContext) -> UpdateContextResult:
        """Query with the last user message and append the results as one SystemMessage.

        Works with any object that has async ``get_messages()`` and ``add_message()``. Without
        a user message, or without results, nothing is added and the result is empty. A user
        message never makes this fail: NUL characters are dropped from the query and a message
        over the text limit is searched by its beginning.
        """
        messages = await model_context.get_messages()
        text = next((t for t in map(message_text, reversed(messages)) if t is not None), None)
        query = (text or "").replace("\x00", "")[: autogen_contents.MAX_TEXT_CHARS]
        if not query.strip():
            return UpdateContextResult(memories=MemoryQueryResult(results=[]))
        found = await self.query(query)
        if found.results:
            lines = [f"{i}. {memory_line(memory.content)}" for i, memory in enumerate(found.results, 1)]
            await model_context.add_message(
                SystemMessage(content="\nRelevant memory content:\n" + "\n".join(lines) + "\n")
            )
        return UpdateContextResult(memories=found)

    async def clear(self) -> None:
        """Delete this memory's entries (its namespace and scope only), in one transaction."""
        async with self._db.transaction(org_id=self._scope.org_id) as conn:
            if await autogen_contents.clear(conn, scope=self._scope):
                await self._audit(
                    conn,
                    method="autogen.clear",
                    ids={"namespace": self._scope.namespace},
                )

    async def reset(self) -> None:
        """Delete the whole namespace in this organization: the entries of every user and agent in it, where
        :meth:`clear` deletes this memory's scope only. It is AutoGen's ChromaDB memory's ``reset()``, which
        empties its store, for a store shared by many: other namespaces, organizations and the memories of
        the other faces are untouched. Refused unless the memory was made with ``allow_reset=True``, as
        ChromaDB refuses it without ``allow_reset``."""
        if not self._allow_reset:
            raise ConfigurationError("reset() deletes the whole namespace: make the memory with allow_reset=True.")
        async with self._db.transaction(org_id=self._scope.org_id) as conn:
            if await autogen_contents.clear_namespace(conn, org_id=self._scope.org_id, namespace=self._scope.namespace):
                await self._audit(conn, method="autogen.reset", ids={"namespace": self._scope.namespace})

    # Last in the class: from here on the name ``list`` is this method, hence ``builtins.list``.
    async def list(self) -> builtins.list[MemoryContent]:
        """Every entry of this memory, searchable or not, oldest first (the only way to read bytes and images)."""
        async with self._db.transaction(org_id=self._scope.org_id) as conn:
            found = await autogen_contents.list_all(conn, scope=self._scope)
        return [to_memory_content(entry) for entry in found]
