"""The queues family's run options: what a run may change of its share group, each checked before anything starts.

`--delivery-limit N` is the run's share group's delivery-attempt limit, the
group-level `share.delivery.count.limit` (Kafka 4.4's GroupConfig), set with the
admin API before the workers join (share_launcher.py). The broker accepts a
group value only between its `group.share.min.delivery.count.limit` and
`group.share.max.delivery.count.limit` (2 and 10 by default, ShareGroupConfig);
the option refuses anything outside them in one line, so a run never starts on
a value the broker would refuse after the run's topics exist. The workers take
it too: a record a death left at the limit is archived, and settles the queue.

`--dead-letter on` gives the run's share group a dead-letter topic of its own
(KIP-1191, Kafka 4.4: share_dead_letter.py): an archived or REJECTed record is
written there by the broker, and the audit counts its payment dead-lettered, not
lost. Refused in one line on a broker that cannot (share_dead_letter.refusal).
"""

from ...core.options import Option
from .share_facts import DELIVERY_LIMIT, DELIVERY_LIMIT_RANGE, GROUP_CONFIG, limit_of

LOW, HIGH = DELIVERY_LIMIT_RANGE

DELIVERY_LIMIT_OPTION = Option(
    "delivery_limit", int, "queues family: the share group's delivery-attempt limit (the group's "
    "share.delivery.count.limit, set with the admin API): a record delivered this many times without being "
    "settled is archived, never delivered again.", default=DELIVERY_LIMIT, shown=f"{DELIVERY_LIMIT}, Kafka's default",
    low=LOW, high=HIGH, must=f"between {LOW} and {HIGH} (the broker's group.share.min.delivery.count.limit and "
    f"group.share.max.delivery.count.limit defaults)", metavar="N", worker=True, applies_to="the queues family")

DEAD_LETTER_OPTION = Option(
    "dead_letter", str, "queues family: give the run's share group a dead-letter topic of its own "
    "(harness.<run id>.dlq; the group's errors.deadletterqueue.topic.name, Kafka 4.4+): the broker writes each "
    "archived or REJECTed record there, and the audit counts its payment dead-lettered instead of lost.",
    default="off", choices=("off", "on"), applies_to="the queues family")

OPTIONS = (DELIVERY_LIMIT_OPTION, DEAD_LETTER_OPTION)


def group_settings(params, dead_letter_topic: str | None = None) -> dict:
    """The share group's settings for this run: the family's (short locks and sessions) with its delivery limit,
    and its dead-letter topic when it has one (the broker copies each dead letter's record there too)."""
    dlq = {"errors.deadletterqueue.topic.name": dead_letter_topic,
           "errors.deadletterqueue.copy.record.enable": "true"} if dead_letter_topic else {}
    return {**GROUP_CONFIG, "share.delivery.count.limit": str(limit_of(params)), **dlq}
