"""OpenTelemetry spans: one per public call of every face, as the GenAI memory conventions describe them.

A span is named by its operation, the ``gen_ai.operation.name``: ``search_memory``, ``create_memory``
(the caller asks for new records), ``update_memory`` (the caller names the records to change),
``upsert_memory`` (an add the language model turns into adds, updates and deletes), ``delete_memory``,
``create_memory_store`` and ``delete_memory_store``. It carries ``gen_ai.memory.store.id`` (the
organization), ``gen_ai.memory.record.id`` (the memory or interaction the call names) and
``gen_ai.memory.record.count`` (the records a search returned, or those a write was asked to create,
change or delete, where the call says), and memora_pg's own ``memora_pg.face`` and
``memora_pg.method``. The span is ``CLIENT`` for a database server and ``INTERNAL`` for the embedded
one, which runs beside the application for it alone.

The database's own spans, with their ``db.*`` attributes, are the children that asyncpg's
instrumentation makes (``memora_pg[otel-asyncpg]``, :func:`instrument_asyncpg`); the memory span holds
none, as the conventions keep the two apart. A failure sets the span's status and ``error.type``
(memora_pg's error class) and, when the database refused, its SQLSTATE as ``memora_pg.sqlstate``; its
message and traceback only with content on (a message can quote what the call was given).

Queries and memory texts are never recorded unless ``MEMORA_PG_TRACE_CONTENT`` is on (then
``gen_ai.memory.query.text`` holds the search query). Only ``opentelemetry-api`` is needed
(``memora_pg[otel]``); without an SDK configured, its tracer is a no-op, and without the package the
methods are left unwrapped.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from memora_pg.errors import sqlstate_of

if TYPE_CHECKING:
    from memora_pg.face import Face

try:
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind, StatusCode
except ImportError:  # pragma: no cover - the otel extra is not installed
    trace = None  # type: ignore[assignment]

C = TypeVar("C", bound=type)
Arguments = Mapping[str, Any]

# The GenAI memory operations (gen_ai.operation.name values).
SEARCH = "search_memory"
CREATE = "create_memory"
UPDATE = "update_memory"
UPSERT = "upsert_memory"
DELETE = "delete_memory"
CREATE_STORE = "create_memory_store"
DELETE_STORE = "delete_memory_store"
# Reads that are not searches: the conventions have no name for them yet.
GET = "get_memory"
RECORD_OPERATIONS = (SEARCH, CREATE, UPDATE, UPSERT, DELETE)

_RECORD_PARAMETERS = ("memory_id", "interaction_id")


def _mem0_add(arguments: Arguments) -> str:
    """mem0's add with ``infer`` (its default) lets the model decide, fact by fact, whether to add, update
    or delete: an upsert. Without it, the messages are stored as new records."""
    return CREATE if arguments.get("infer", True) is False else UPSERT


# Each face's public methods and their operations (a name, or a function of the call's arguments).
# Organizations are memory stores; users and agents are not memory records, so their calls carry names
# of their own (as the conventions allow).
Operation = str | Callable[[Arguments], str]
GRAPH: dict[str, Operation] = {
    "create_organization": CREATE_STORE,
    "update_organization": "update_memory_store",
    "delete_organization": DELETE_STORE,
    "erase_organization": DELETE_STORE,
    "get_organization": "get_memory_store",
    "get_all_organizations": "get_memory_store",
    "create_agent": "create_agent",
    "update_agent": "update_agent",
    "delete_agent": "delete_agent",
    "get_agent": "get_agent",
    "get_all_org_agents": "get_agent",
    "get_all_user_agents": "get_agent",
    "create_user": "create_user",
    "update_user": "update_user",
    "delete_user": "delete_user",
    "erase_user": "delete_user",
    "get_user": "get_user",
    "get_all_org_users": "get_user",
    "save_interaction_with_memories": CREATE,
    "update_interaction_and_memories": UPDATE,
    "get_interaction": GET,
    "get_all_user_interactions": GET,
    "delete_user_interaction_and_its_memories": DELETE,
    "delete_all_user_interactions_and_their_memories": DELETE,
    "fetch_user_memories_resolved": GET,
    "fetch_user_memories_resolved_batch": GET,
    "get_user_memory": GET,
    "get_user_memory_history": GET,
    "get_all_user_memories": GET,
    "delete_user_memory": DELETE,
    "delete_all_user_memories": DELETE,
}
# search_memory() is search_memories() of one query: its span is that call's.
VECTOR: dict[str, Operation] = {
    "add_memories": CREATE,
    "delete_memory": DELETE,
    "delete_memories": DELETE,
    "delete_all_user_memories": DELETE,
    "delete_all_organization_memories": DELETE,
    "search_memories": SEARCH,
}
MEM0: dict[str, Operation] = {
    "add": _mem0_add,
    "search": SEARCH,
    "get": GET,
    "get_all": GET,
    "history": GET,
    "update": UPDATE,
    "delete": DELETE,
    "delete_all": DELETE,
    "reset": DELETE_STORE,
}
AUTOGEN: dict[str, Operation] = {
    "add": CREATE,
    "query": SEARCH,
    "update_context": SEARCH,
    "clear": DELETE,
    "reset": DELETE_STORE,
    "list": GET,
}


def instrument(face: str, operations: Mapping[str, Operation]) -> Callable[[C], C]:
    """Wrap the class's listed async methods (name -> operation) in spans. ``face`` goes into
    ``memora_pg.face``; the class is a :class:`memora_pg.face.Face` (its spans read its ``database``)."""

    def decorate(cls: C) -> C:
        if trace is None:
            return cls
        for name, operation in operations.items():
            setattr(cls, name, _traced(getattr(cls, name), face, operation))
        return cls

    return decorate


def instrument_asyncpg() -> bool:
    """Turn on asyncpg's OpenTelemetry instrumentation (``memora_pg[otel-asyncpg]``): each statement
    becomes a ``postgresql`` span, a child of the memory span it serves. False when it is not installed."""
    try:
        from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor
    except ImportError:
        return False
    instrumentor = AsyncPGInstrumentor()  # type: ignore[no-untyped-call]
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument()
    return True


def _traced(method: Callable[..., Any], face: str, operation: Operation) -> Callable[..., Any]:
    tracer = trace.get_tracer("memora_pg")
    signature = inspect.signature(method)
    method_name = method.__name__

    def bound(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Arguments | None:
        """The call's arguments by name; None for a call the method itself refuses (it says how)."""
        try:
            return signature.bind_partial(*args, **kwargs).arguments
        except TypeError:
            return None

    @functools.wraps(method)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        # The arguments are bound (about 10 µs) only when the span's name needs them or the span records.
        arguments: Arguments | None = None
        if callable(operation):
            arguments = bound(args, kwargs)
            if arguments is None:
                return await method(*args, **kwargs)
            name = operation(arguments)
        else:
            name = operation
        store: Face = args[0]
        kind = SpanKind.INTERNAL if store.database.embedded else SpanKind.CLIENT
        with tracer.start_as_current_span(
            name, kind=kind, record_exception=False, set_status_on_exception=False
        ) as span:
            recording = span.is_recording()
            if recording and arguments is None:
                arguments = bound(args, kwargs)
                recording = arguments is not None
            if recording:
                assert arguments is not None
                _describe(span, store, arguments, face, name, method_name)
            try:
                result = await method(*args, **kwargs)
            except Exception as error:  # a cancellation (BaseException) is not the call's failure
                if recording:
                    _failed(span, store, error)
                raise
            if recording and name in RECORD_OPERATIONS:
                assert arguments is not None
                count = _record_count(name, arguments, result)
                if count is not None:
                    span.set_attribute("gen_ai.memory.record.count", count)
            return result

    return wrapper


def _describe(span: Any, store: Face, arguments: Arguments, face: str, operation: str, method_name: str) -> None:
    span.set_attribute("gen_ai.operation.name", operation)
    span.set_attribute("memora_pg.face", face)
    span.set_attribute("memora_pg.method", method_name)
    org_id = arguments["org_id"] if "org_id" in arguments else getattr(store, "org_id", None)
    if isinstance(org_id, str):
        span.set_attribute("gen_ai.memory.store.id", org_id)
    for name in _RECORD_PARAMETERS:
        record = arguments.get(name)
        if isinstance(record, str):
            span.set_attribute("gen_ai.memory.record.id", record)
            break
    if store.database.settings.trace_content:
        query = arguments.get("query") or arguments.get("queries")
        if isinstance(query, list) and all(isinstance(q, str) for q in query):
            query = "\n".join(query)
        if isinstance(query, str):
            span.set_attribute("gen_ai.memory.query.text", query)


def _failed(span: Any, store: Face, error: Exception) -> None:
    span.set_attribute("error.type", type(error).__qualname__)
    code = sqlstate_of(error)
    if code:
        span.set_attribute("memora_pg.sqlstate", code)
    # An error's message can quote what the call was given (a row, a text): content.
    if store.database.settings.trace_content:
        span.set_status(StatusCode.ERROR, str(error)[:500])
        span.record_exception(error)
    else:
        span.set_status(StatusCode.ERROR, type(error).__qualname__)


def _record_count(operation: str, arguments: Arguments, result: Any) -> int | None:
    """``gen_ai.memory.record.count``: for a search (and an upsert, whose records the model chose) the
    records returned; for a create, update or delete the records the call asked for, when it lists them
    (else, for a create, those it made). None where the call does not say (a delete of everything a user
    has)."""
    if operation in (SEARCH, UPSERT):
        return _returned(result)
    if isinstance(arguments.get("memory_id"), str) or "content" in arguments:
        return 1  # one memory, or AutoGen's one entry
    for name in ("memories", "memory_ids"):
        if isinstance(arguments.get(name), list):
            return len(arguments[name])
    for name in ("memories_and_interaction", "updated_memories_and_interaction"):
        given = arguments.get(name)
        if given is not None:
            return len(given.memories) + len(given.contrary_memories)
    if operation == CREATE:
        return _returned(result)  # mem0's add of messages as they are: one record for each it kept
    return None


def _returned(result: Any) -> int | None:
    """How many records a face's result holds: mem0's ``{"results": [...]}``, AutoGen's query result (or
    the one inside an update_context's), or the Memora vector store's list per query."""
    if isinstance(result, dict) and isinstance(result.get("results"), list):
        return len(result["results"])
    found = getattr(getattr(result, "memories", result), "results", None)
    if isinstance(found, list):
        return len(found)
    if isinstance(result, list):
        return sum(len(hits) if isinstance(hits, list) else 1 for hits in result)
    return None
