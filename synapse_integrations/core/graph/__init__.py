"""The memory graph: its record, its compiled view and what is derived from it."""
