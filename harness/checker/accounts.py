"""Audit the accounts table of experiments with balances: each account's balance against its payments.

One query, with a quoted identifier, so anyone can re-check it with psql:
`select account, balance, version, stale_updates from harness.acct_<run>`.
The expected balance of an account is the sum of the payments produced to
it; the audit reports expected and actual side by side and publishes each
actual balance as the metric `accounts.<account>.balance` for the verdict. An
account that could not be read is unknown (None), never 0.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from ..clients import pgconn


@dataclass
class AccountRows:
    rows: list | None              # [(account, balance, version, stale_updates)]; None when unreadable
    error: str | None = None


def read_accounts(dsn: str, table: str) -> AccountRows:
    from psycopg import sql
    from ..workload.sqlnames import table_identifier
    from .ledger import _first_line
    try:
        with pgconn.connect(dsn, connect_timeout=10) as conn:
            rows = conn.execute(sql.SQL("select account, balance, version, stale_updates from {} order by account")
                                .format(table_identifier(table))).fetchall()
        return AccountRows([(r[0], int(r[1]), int(r[2]), int(r[3])) for r in rows])
    except Exception as e:  # noqa: BLE001 - report, never raise
        return AccountRows(None, _first_line(e))


def expected_balances(amounts: dict, accounts: dict) -> Counter:
    """Account -> the sum of the payments produced to it."""
    out: Counter = Counter()
    for i, amount in amounts.items():
        if i in accounts:
            out[accounts[i]] += amount
    return out


def audit_accounts(a, got: AccountRows, amounts: dict, accounts: dict, hits_from_accounts: bool) -> None:
    """Fill `a.accounts` and the metrics: each account's balance, and (when the experiment has no dedupe
    table) the conditional updates that changed nothing as its dedupe hits."""
    expected = expected_balances(amounts, accounts)
    if got.rows is None:
        a.evidence.errors.append(f"accounts table: {got.error}")
        a.accounts = [{"account": k, "expected": v, "actual": None, "version": None, "stale_updates": None}
                      for k, v in sorted(expected.items())]
    else:
        seen = {r[0]: r for r in got.rows}
        a.accounts = [{"account": k, "expected": expected.get(k, 0),
                       "actual": seen[k][1] if k in seen else None,
                       "version": seen[k][2] if k in seen else None,
                       "stale_updates": seen[k][3] if k in seen else None}
                      for k in sorted(set(expected) | set(seen))]
        missing = sorted(set(expected) - set(seen))
        if missing:
            a.evidence.errors.append(f"accounts table: no row for {', '.join(missing)}")
        if hits_from_accounts:
            a.dedupe_hits = sum(r[3] for r in got.rows)
            a.metrics["ledger.dedupe_hits"] = a.dedupe_hits
    for row in a.accounts:
        a.metrics[f"accounts.{row['account']}.balance"] = row["actual"]
    if got.rows is None and hits_from_accounts:
        a.metrics["ledger.dedupe_hits"] = None
