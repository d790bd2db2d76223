"""Delivery modes, one module each, run inside worker processes.

`worker.py` is the process entry point; `context.py` holds what every mode
shares (consumer, Postgres, kill switch). Each mode's module states what it
proves and contains its kill point, so the whole story of a mode is one file.
"""
