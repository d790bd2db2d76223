"""One RunReport, rendered to JSON, Markdown and HTML from the same object."""
