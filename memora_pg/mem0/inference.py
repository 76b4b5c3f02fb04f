"""What an inferred add asks the language model, and what its answers may say.

``add(infer=True)`` makes two model calls: the facts of the conversation, then, shown the related
memories of the same scope, a decision per fact (ADD, UPDATE, DELETE or NONE). The prompts and the
checks of both answers are here, as plain functions: :func:`facts_of` reads the first answer and
:func:`plan_of` turns the second into a :class:`Plan`, refusing with ``LLMError`` any answer that
names a memory it was not shown, leaves a text empty or decides twice about one memory. The memory
(``AsyncMemory._add_inferred``) embeds what the plan holds and writes it in one transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from memora_pg.errors import LLMError
from memora_pg.graph import validate as check
from memora_pg.graph.memories import NewMemory
from memora_pg.mem0 import prompts
from memora_pg.mem0.shapes import new_memory, number_of


class _Decision(BaseModel):
    id: str | int
    text: str = ""
    event: Literal["ADD", "UPDATE", "DELETE", "NONE"]
    old_memory: str | None = None


class _Decisions(BaseModel):
    memory: list[_Decision]


def extraction_messages(conversation: list[dict[str, str]], instructions: str | None) -> list[dict[str, str]]:
    """The first call: the facts of ``conversation``, under the caller's ``instructions`` if any."""
    return [
        {"role": "system", "content": prompts.fact_extraction_prompt(instructions)},
        {"role": "user", "content": "Input:\n" + prompts.conversation_text(conversation)},
    ]


def facts_of(answer: Mapping[str, Any]) -> list[str]:
    """The facts of the first answer, trimmed, empty ones left out; each a valid memory text."""
    facts = answer.get("facts")
    if not isinstance(facts, list) or not all(isinstance(f, str) for f in facts):
        raise LLMError('The language model\'s answer has no "facts" list of strings.')
    kept = [f.strip() for f in facts if f.strip()]
    for fact in kept:
        check.memory_text(fact)
    return kept


def decision_messages(
    shown: Sequence[dict[str, str]], facts: Sequence[str], custom: str | None
) -> list[dict[str, str]]:
    """The second call: the memories ``shown`` (small integers as ids, so that none can be invented) and the facts."""
    return [{"role": "user", "content": prompts.update_decision_prompt(list(shown), list(facts), custom)}]


@dataclass(frozen=True)
class Plan:
    """What the decisions change: new memories, memories rewritten (the row and its new text), memories deleted."""

    additions: list[NewMemory]
    updates: list[tuple[dict[str, Any], str]]
    deletions: list[dict[str, Any]]


def numbered(related: Sequence[Sequence[tuple[dict[str, Any], float]]]) -> dict[int, dict[str, Any]]:
    """The memories related to any fact (a search's hits per fact), each once, numbered as the model is shown them."""
    found: dict[str, dict[str, Any]] = {}
    for hits in related:
        for row, _ in hits:
            found.setdefault(str(row["memory_id"]), row)
    return dict(enumerate(found.values()))


def plan_of(decided: Any, by_number: Mapping[int, dict[str, Any]], base: dict[str, Any]) -> Plan:
    """The second answer as a :class:`Plan`: ``by_number`` is what the model was shown, by the number it saw;
    ``base`` the metadata of each new memory."""
    try:
        decisions = _Decisions.model_validate(decided).memory
    except ValidationError as error:
        raise LLMError(f"The language model's decisions are malformed: {error.error_count()} problem(s).") from error
    plan = Plan([], [], [])
    for decision in decisions:
        target = by_number.get(number_of(decision.id)) if decision.event in ("UPDATE", "DELETE", "NONE") else None
        if decision.event in ("UPDATE", "DELETE") and target is None:
            raise LLMError(f"The language model named memory {decision.id!r}, which it was not shown.")
        if decision.event in ("ADD", "UPDATE") and not decision.text.strip():
            raise LLMError(f"The language model's {decision.event} has no text.")
        if decision.event == "ADD":
            check.memory_text(decision.text)
            plan.additions.append(new_memory(decision.text.strip(), dict(base)))
        elif decision.event == "UPDATE" and target is not None:
            check.memory_text(decision.text)
            plan.updates.append((target, decision.text.strip()))
        elif decision.event == "DELETE" and target is not None:
            plan.deletions.append(target)
    touched = [str(row["memory_id"]) for row, _ in plan.updates] + [str(row["memory_id"]) for row in plan.deletions]
    if len(touched) != len(set(touched)):
        raise LLMError("The language model decided twice about the same memory.")
    return plan


def procedural_messages(conversation: list[dict[str, str]], prompt: str | None) -> list[dict[str, str]]:
    """The one call of ``add(memory_type="procedural_memory")``: a summary of the agent's conversation."""
    return [
        {"role": "system", "content": prompt or prompts.PROCEDURAL_SUMMARY},
        *conversation,
        {"role": "user", "content": "Create the procedural memory of the conversation above."},
    ]


def procedural_text(summary: str) -> str:
    """The summary as the memory's text; an empty one is an ``LLMError``."""
    if not summary.strip():
        raise LLMError("The language model returned an empty procedural memory.")
    return summary.strip()
