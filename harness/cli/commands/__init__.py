"""Click commands kept out of harness/cli/entry.py, each registered there with cli.add_command."""
