"""The memory's state: the one write path, its validation, filters and events."""
