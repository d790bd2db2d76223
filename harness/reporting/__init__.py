"""Reporting: one RunReport built from a run's Outcome (build.py), rendered to JSON, Markdown and HTML from
the same object; the suite's page, and the comparison of two reports or suites."""
