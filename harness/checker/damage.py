"""The words a crash's damage is said in, shared by the experiments that declare it and the checker that predicts it.

A kill point declares which of these damages a SIGKILL there can do; a crash
record lists the records each damage touched, one list per damage (`unacked`,
`acked_unapplied`, `produced`, ...). The experiments' declarations write their
kill points in this vocabulary and the checker's predictors read crash records
in it, so it lives here, below both: the checker never imports an experiment.
"""

# What a crash can do to the records in each list of its crash record.
LOST = "lost"                # acked_unapplied: offsets committed, effect never applied: nobody redelivers them
DUPLICATED = "duplicated"    # unacked: effect applied, not acknowledged: redelivered and applied again
DEDUPED = "deduped"          # unacked, with a dedupe table: redelivered, absorbed by the key (a dedupe hit)
ABORTED = "aborted"          # produced: written in the open transaction, aborted: read_uncommitted sees a copy
UNPUBLISHED = "unpublished"  # row_only: the service's row committed, its event never produced (dual write)
ORPHANED = "orphaned"        # event_only: the event produced, the service's row never committed (dual write)
REPUBLISHED = "republished"  # republished: published, not marked sent: the relay publishes it again (outbox)
DAMAGES = (LOST, DUPLICATED, DEDUPED, ABORTED, UNPUBLISHED, ORPHANED, REPUBLISHED)

# The list of a crash record that each kind of damage is read from.
SOURCE_OF = {LOST: "acked_unapplied", DUPLICATED: "unacked", DEDUPED: "unacked", ABORTED: "produced",
             UNPUBLISHED: "row_only", ORPHANED: "event_only", REPUBLISHED: "republished"}
