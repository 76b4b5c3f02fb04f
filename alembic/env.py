"""Alembic environment of memora_pg: everything it needs comes from memora_pg's settings."""

from alembic import context
from memora_pg.migrations import run_env

run_env(context)
