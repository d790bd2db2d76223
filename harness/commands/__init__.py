"""Click commands kept out of harness/cli.py, each registered there with cli.add_command."""
