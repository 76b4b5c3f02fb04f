-- Every node has pgvector in the database memora_pg uses (Citus's own init script creates citus first).
CREATE EXTENSION IF NOT EXISTS vector;
