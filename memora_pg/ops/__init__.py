"""Operations on a memora_pg database: re-embedding, export and import, reports, health checks.

Each module is plain functions the ``memora-pg`` command line calls; they are usable from
Python too.
"""
