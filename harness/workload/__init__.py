"""Seeded payments, the names of a run's topics and tables, and their creation."""
