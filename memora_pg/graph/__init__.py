"""The data layer of the graph: plain async functions that take a connection and never commit."""
