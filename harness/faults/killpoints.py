"""Named places in a worker's loop where a planned crash can strike.

Each name says where it sits between the steps of a delivery mode; the
processors call `KillSwitch.maybe_crash(POINT, ...)` at exactly that place.
"""

AFTER_COMMIT_BEFORE_EFFECT = "after-commit-before-effect"
AFTER_EFFECT_BEFORE_COMMIT = "after-effect-before-commit"
AFTER_PRODUCE_BEFORE_TXN_COMMIT = "after-produce-before-txn-commit"
AFTER_SEND_OFFSETS_BEFORE_TXN_COMMIT = "after-send-offsets-before-txn-commit"
AFTER_EXTERNAL_EFFECT_BEFORE_TXN_COMMIT = "after-external-effect-before-txn-commit"
AFTER_PROCESS_BEFORE_COMMIT = "after-process-before-commit"   # inside the Kafka Streams topology
ZOMBIE = "sigstop-replace-sigcont"                             # the zombie nemesis freezes, replaces, resumes
RANDOM = "random"                                              # the supervisor's SIGKILL at a seeded time

ALL = (AFTER_COMMIT_BEFORE_EFFECT, AFTER_EFFECT_BEFORE_COMMIT, AFTER_PRODUCE_BEFORE_TXN_COMMIT,
       AFTER_SEND_OFFSETS_BEFORE_TXN_COMMIT, AFTER_EXTERNAL_EFFECT_BEFORE_TXN_COMMIT,
       AFTER_PROCESS_BEFORE_COMMIT)
