"""The predict-first questions of the core group's class (docs/teaching.md), beside the declarations they ask
about: `harness worksheet` prints them, one line each, for `harness suite --predict`.

Each is (experiment, count, the question as the worksheet asks it); the count is one a guess may name
(harness/reporting/guesses.py).
"""

CORE_QUESTIONS = (
    ("offset-after", "duplicates", "duplicates without a key: offset-after commits its offset after the effect "
                                   "and keeps no idempotency key"),
    ("dedupe", "duplicates", "duplicates with a key: dedupe records each payment's id beside its effect"),
    ("offset-before", "lost", "losses with ack-first: offset-before commits its offset before the effect"),
    ("offset-after", "deliveries", "total deliveries: records handed to offset-after's workers, redeliveries "
                                   "included"),
)
