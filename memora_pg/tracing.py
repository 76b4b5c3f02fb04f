"""OpenTelemetry spans: one per public call of every face, named as the GenAI memory conventions name them.

A span is named by its operation (``search_memory``, ``update_memory``, ``delete_memory``, …, the
``gen_ai.operation.name``) and carries the stable database attributes: ``db.system.name`` =
``postgresql``, ``db.namespace`` = ``database|schema``, ``db.operation.name`` = the method called;
``gen_ai.memory.store.id`` = the organization and ``gen_ai.memory.record.id`` = the memory or
interaction named by the call. A failure sets the span's status, ``error.type`` (the exception's
class) and, when the database refused, its SQLSTATE as ``db.response.status_code``; its message and
traceback only with content on (a message can quote what the call was given).

Queries and memory texts are never recorded unless ``MEMORA_PG_TRACE_CONTENT`` is on (then
``gen_ai.memory.query.text`` holds the search query). Only ``opentelemetry-api`` is needed
(``memora_pg[otel]``); without an SDK configured, its tracer is a no-op, and without the package the
methods are left unwrapped.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from memora_pg.errors import sqlstate_of

try:
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind, StatusCode
except ImportError:  # pragma: no cover - the otel extra is not installed
    trace = None  # type: ignore[assignment]

C = TypeVar("C", bound=type)

# The GenAI memory operations (gen_ai.operation.name values).
SEARCH = "search_memory"
CREATE = "create_memory"
UPDATE = "update_memory"
DELETE = "delete_memory"
CREATE_STORE = "create_memory_store"
DELETE_STORE = "delete_memory_store"
# Reads that are not searches: the conventions have no name for them yet.
GET = "get_memory"

_RECORD_PARAMETERS = ("memory_id", "interaction_id")

# Each face's public methods and their operations. Organizations are memory stores; users and agents
# are not memory records, so their calls carry names of their own (as the conventions allow).
GRAPH = {
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
VECTOR = {
    "add_memories": CREATE,
    "delete_memory": DELETE,
    "delete_memories": DELETE,
    "delete_all_user_memories": DELETE,
    "delete_all_organization_memories": DELETE,
    "search_memories": SEARCH,
}
# mem0's add decides ADD, UPDATE or DELETE for each fact: an upsert, which the conventions call update_memory.
MEM0 = {
    "add": UPDATE,
    "search": SEARCH,
    "get": GET,
    "get_all": GET,
    "history": GET,
    "update": UPDATE,
    "delete": DELETE,
    "delete_all": DELETE,
    "reset": DELETE_STORE,
}
AUTOGEN = {
    "add": CREATE,
    "query": SEARCH,
    "update_context": SEARCH,
    "clear": DELETE,
    "reset": DELETE_STORE,
    "list": GET,
}


def instrument(face: str, operations: Mapping[str, str]) -> Callable[[C], C]:
    """Wrap the class's listed async methods (name -> operation) in spans. ``face`` goes into
    ``memora_pg.face``; the instance must hold its ``Database`` as ``_db``."""

    def decorate(cls: C) -> C:
        if trace is None:
            return cls
        for name, operation in operations.items():
            setattr(cls, name, _traced(getattr(cls, name), face, operation))
        return cls

    return decorate


def _traced(method: Callable[..., Any], face: str, operation: str) -> Callable[..., Any]:
    tracer = trace.get_tracer("memora_pg")
    signature = inspect.signature(method)
    names = list(signature.parameters)
    positions = {
        name: names.index(name) for name in ("org_id", "query", "queries", *_RECORD_PARAMETERS) if name in names
    }
    method_name = method.__name__

    def argument(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if name in kwargs:
            return kwargs[name]
        position = positions.get(name)
        return args[position] if position is not None and position < len(args) else None

    @functools.wraps(method)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        with tracer.start_as_current_span(
            operation, kind=SpanKind.CLIENT, record_exception=False, set_status_on_exception=False
        ) as span:
            if span.is_recording():
                _describe(span, args, kwargs, argument, face, operation, method_name, positions)
            try:
                return await method(*args, **kwargs)
            except Exception as error:  # a cancellation (BaseException) is not the call's failure
                if span.is_recording():
                    span.set_attribute("error.type", type(error).__qualname__)
                    code = sqlstate_of(error)
                    if code:
                        span.set_attribute("db.response.status_code", code)
                    # An error's message can quote what the call was given (a row, a text): content.
                    if args[0]._db.settings.trace_content:
                        span.set_status(StatusCode.ERROR, str(error)[:500])
                        span.record_exception(error)
                    else:
                        span.set_status(StatusCode.ERROR, type(error).__qualname__)
                raise
            finally:
                # Known once the call has opened its engine (the first call of a store opens it).
                if span.is_recording():
                    span.set_attribute("db.namespace", args[0]._db.namespace)

    return wrapper


def _describe(
    span: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    argument: Callable[[str, tuple[Any, ...], dict[str, Any]], Any],
    face: str,
    operation: str,
    method_name: str,
    positions: Mapping[str, int],
) -> None:
    store = args[0]
    span.set_attribute("gen_ai.operation.name", operation)
    span.set_attribute("db.system.name", "postgresql")
    span.set_attribute("db.operation.name", method_name)
    span.set_attribute("memora_pg.face", face)
    org_id = argument("org_id", args, kwargs) if "org_id" in positions else getattr(store, "org_id", None)
    if isinstance(org_id, str):
        span.set_attribute("gen_ai.memory.store.id", org_id)
    for name in _RECORD_PARAMETERS:
        record = argument(name, args, kwargs)
        if isinstance(record, str):
            span.set_attribute("gen_ai.memory.record.id", record)
            break
    if store._db.settings.trace_content:
        query = argument("query", args, kwargs) or argument("queries", args, kwargs)
        if isinstance(query, list) and all(isinstance(q, str) for q in query):
            query = "\n".join(query)
        if isinstance(query, str):
            span.set_attribute("gen_ai.memory.query.text", query)
