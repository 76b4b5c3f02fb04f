"""The Memora contract: ``BaseGraphDB``, ``BaseVectorDB`` and ``MemorySearchScope``, as memora-core 0.3.1 defines them.

memora_pg ships its own copy so that it does not depend on memora-core (whose pins are
heavy); upstream's agent only duck-types the backends it is given.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from datetime import datetime
from enum import Enum
from typing import Any

from memora_pg import models


class MemorySearchScope(Enum):
    ORGANIZATION = "organization"
    USER = "user"


class BaseVectorDB(ABC):
    """A store of memory embeddings that answers similarity searches."""

    @abstractmethod
    async def close(self) -> None: ...

    @abstractmethod
    async def setup(self, *args: Any, **kwargs: Any) -> None: ...

    @abstractmethod
    async def add_memories(
        self,
        org_id: str,
        user_id: str,
        agent_id: str,
        memory_ids: list[uuid.UUID] | list[str],
        memories: list[str],
        obtained_at: str,
    ) -> None: ...

    @abstractmethod
    async def search_memory(
        self,
        query: str,
        memory_search_scope: MemorySearchScope,
        org_id: str,
        user_id: str | None = None,
        agent_id: str | None = None,
    ) -> list[tuple[models.Memory, float]]: ...

    @abstractmethod
    async def search_memories(
        self,
        queries: list[str],
        memory_search_scope: MemorySearchScope,
        org_id: str,
        user_id: str | None = None,
        agent_id: str | None = None,
    ) -> list[list[tuple[models.Memory, float]]]: ...

    @abstractmethod
    async def delete_memory(self, memory_id: str) -> None: ...

    @abstractmethod
    async def delete_memories(self, memory_ids: list[str]) -> None: ...

    @abstractmethod
    async def delete_all_user_memories(self, org_id: str, user_id: str) -> None: ...

    @abstractmethod
    async def delete_all_organization_memories(self, org_id: str) -> None: ...


class BaseGraphDB(ABC):
    """Organizations, users, agents, interactions and memories with their version chains."""

    associated_vector_db: BaseVectorDB | None

    def get_associated_vector_db(self) -> BaseVectorDB | None:
        return self.associated_vector_db

    @abstractmethod
    async def close(self) -> None: ...

    @abstractmethod
    async def setup(self, *args: Any, **kwargs: Any) -> None: ...

    # Organizations
    @abstractmethod
    async def create_organization(self, org_name: str) -> models.Organization: ...

    @abstractmethod
    async def update_organization(self, org_id: str, new_org_name: str) -> models.Organization: ...

    @abstractmethod
    async def delete_organization(self, org_id: str) -> None: ...

    @abstractmethod
    async def get_organization(self, org_id: str) -> models.Organization: ...

    @abstractmethod
    async def get_all_organizations(self) -> list[models.Organization]: ...

    # Agents
    @abstractmethod
    async def create_agent(self, org_id: str, agent_label: str, user_id: str | None = None) -> models.Agent: ...

    @abstractmethod
    async def update_agent(self, org_id: str, agent_id: str, new_agent_label: str) -> models.Agent: ...

    @abstractmethod
    async def delete_agent(self, org_id: str, agent_id: str) -> None: ...

    @abstractmethod
    async def get_agent(self, org_id: str, agent_id: str) -> models.Agent: ...

    @abstractmethod
    async def get_all_org_agents(self, org_id: str) -> list[models.Agent]: ...

    @abstractmethod
    async def get_all_user_agents(self, org_id: str, user_id: str) -> list[models.Agent]: ...

    # Users
    @abstractmethod
    async def create_user(self, org_id: str, user_name: str) -> models.User: ...

    @abstractmethod
    async def update_user(self, org_id: str, user_id: str, new_user_name: str) -> models.User: ...

    @abstractmethod
    async def delete_user(self, org_id: str, user_id: str) -> None: ...

    @abstractmethod
    async def get_user(self, org_id: str, user_id: str) -> models.User: ...

    @abstractmethod
    async def get_all_org_users(self, org_id: str) -> list[models.User]: ...

    # Interactions
    @abstractmethod
    async def save_interaction_with_memories(
        self, org_id: str, agent_id: str, user_id: str, memories_and_interaction: models.MemoriesAndInteraction
    ) -> tuple[str, datetime]: ...

    @abstractmethod
    async def update_interaction_and_memories(
        self,
        org_id: str,
        agent_id: str,
        user_id: str,
        interaction_id: str,
        updated_memories_and_interaction: models.MemoriesAndInteraction,
    ) -> tuple[str, datetime]: ...

    @abstractmethod
    async def get_interaction(
        self, org_id: str, user_id: str, interaction_id: str, with_messages: bool = True, with_memories: bool = True
    ) -> models.Interaction: ...

    @abstractmethod
    async def get_all_user_interactions(
        self,
        org_id: str,
        user_id: str,
        with_their_messages: bool = True,
        with_their_memories: bool = True,
        skip: int = 0,
        limit: int = 100,
    ) -> list[models.Interaction]: ...

    @abstractmethod
    async def delete_user_interaction_and_its_memories(
        self, org_id: str, user_id: str, interaction_id: str
    ) -> None: ...

    @abstractmethod
    async def delete_all_user_interactions_and_their_memories(self, org_id: str, user_id: str) -> None: ...

    # Memories
    @abstractmethod
    async def fetch_user_memories_resolved(self, org_user_mem_ids: list[dict[str, str]]) -> list[models.Memory]: ...

    @abstractmethod
    async def fetch_user_memories_resolved_batch(
        self, batch_org_user_mem_ids: list[list[dict[str, str]]]
    ) -> list[list[models.Memory]]: ...

    @abstractmethod
    async def get_user_memory(self, org_id: str, user_id: str, memory_id: str) -> models.Memory: ...

    @abstractmethod
    async def get_user_memory_history(self, org_id: str, user_id: str, memory_id: str) -> list[models.Memory]: ...

    @abstractmethod
    async def get_all_user_memories(
        self, org_id: str, user_id: str, agent_id: str | None = None, skip: int = 0, limit: int = 1000
    ) -> list[models.Memory]: ...

    @abstractmethod
    async def delete_user_memory(self, org_id: str, user_id: str, memory_id: str) -> None: ...

    @abstractmethod
    async def delete_all_user_memories(self, org_id: str, user_id: str) -> None: ...
