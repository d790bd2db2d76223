"""Faults: where workers die (kill points), which messages kill them (the crash
plan), the durable record of each death (the crash log), and the supervisor
that restarts them."""
