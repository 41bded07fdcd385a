"""Documents: a report's blocks, their markdown/text/CSV and HTML renderings, the figure helpers and
the typed rows every JSON document is written from."""
