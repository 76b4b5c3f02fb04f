"""Name placeholders: stored memory texts say ``user_<id>`` and ``agent_<id>``; reads show current names.

The rule is memora-semantics.md §9.4: a token is ``user_`` or ``agent_`` (any case) not
preceded by a letter, digit or underscore, followed by one or more of ``[A-Za-z0-9-]``. It is
replaced by the current name of the memory's own user or agent, in a single pass (a name
put in is never scanned again), literally, keeping a following ``'s``. A token whose
user or agent no longer exists stays as it is.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r"(?<![A-Za-z0-9_])(?P<kind>user_|agent_)[A-Za-z0-9-]+", re.IGNORECASE | re.ASCII)


def render(text: str, *, user_name: str | None, agent_label: str | None) -> str:
    """``text`` with its placeholders replaced by the given names (None leaves the token)."""

    def replace(match: re.Match[str]) -> str:
        name = user_name if match.group("kind").lower() == "user_" else agent_label
        return match.group(0) if name is None else name

    return _TOKEN.sub(replace, text)
