"""Ranking signals: the adjustments applied after the hybrid score, one per module."""
