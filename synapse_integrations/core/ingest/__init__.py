"""The write path: turn -> durable episode -> windows -> concepts."""
