"""The prompts of ``Memory.add(infer=True)``: extract facts, then decide what to do with each."""

from __future__ import annotations

import json
from datetime import date

FACT_EXTRACTION = """You extract durable personal facts, preferences, plans and details from a conversation,
to be remembered for future conversations with the same person.

Rules:
- Each fact is one short, self-contained sentence in the language of the conversation.
- Only facts about the people in the conversation; no greetings, no small talk, no questions.
- Take facts from the user's messages; use the assistant's messages only as context.
- Today's date is {today}.

Answer with a JSON object of this shape and nothing else:
{{"facts": ["fact one", "fact two"]}}
An empty list is a valid answer."""

UPDATE_DECISION = """You maintain a person's memory. Compare the new facts with the existing memories and decide,
for each, one of:
- ADD: a new fact not yet in memory (give it a new id: the next free number).
- UPDATE: an existing memory that the new fact corrects or refines (keep its id; give the new text and
  the old text in "old_memory").
- DELETE: an existing memory that a new fact contradicts and that should be forgotten (keep its id).
- NONE: an existing memory that stays as it is (keep its id).

Existing memories (id and text):
{existing}

New facts:
{facts}

Answer with a JSON object of this shape and nothing else:
{{"memory": [{{"id": "0", "text": "...", "event": "ADD|UPDATE|DELETE|NONE", "old_memory": "..."}}]}}"""

PROCEDURAL_SUMMARY = """You keep the procedural memory of an AI agent: a precise, complete summary of the steps it
took, the tools it called with their arguments and results, and where the task stands, so that the agent can
continue from it. Summarise the conversation below in that way. Answer with the summary text only."""


def fact_extraction_prompt(custom: str | None) -> str:
    return custom or FACT_EXTRACTION.format(today=date.today().isoformat())


def update_decision_prompt(existing: list[dict[str, str]], facts: list[str], custom: str | None) -> str:
    template = custom or UPDATE_DECISION
    rendered_existing = json.dumps(existing, ensure_ascii=False)
    rendered_facts = json.dumps(facts, ensure_ascii=False)
    if custom and "{existing}" not in custom:
        # A custom prompt without placeholders gets the data appended, as mem0 does.
        return f"{custom}\n\nExisting memories:\n{rendered_existing}\n\nNew facts:\n{rendered_facts}"
    return template.format(existing=rendered_existing, facts=rendered_facts)


def conversation_text(messages: list[dict[str, str]]) -> str:
    return "\n".join(f"{m.get('role', 'user')}: {m.get('content', '')}" for m in messages)
