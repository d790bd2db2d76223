from harness.stack.model import redact
from harness.workload.naming import RunNames, new_run_id, slug


def test_run_ids_sort_by_time_and_say_what_ran():
    a, b = new_run_id("offset-after", 1_700_000_000), new_run_id("dedupe", 1_700_000_060)
    assert a == "20231114T221320-offset-after" and a < b


def test_names_are_safe_identifiers():
    n = RunNames("20261129T183000-eos-boundary")
    assert n.ledger_table == "harness.ledger_r20261129t183000_eos_boundary"
    assert n.input_topic == "harness.20261129T183000-eos-boundary.input"
    assert slug("A b--c") == "ra_b_c"


def test_redact_removes_passwords():
    assert redact("postgresql://u:s3cret@h:5/db") == "postgresql://u:***@h:5/db"
    assert "s3cret" not in redact("host=h user=u password=s3cret dbname=d")
    assert redact("postgresql://h/db") == "postgresql://h/db"
    assert redact(None) is None
