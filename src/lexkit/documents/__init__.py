"""Documents: a report's blocks, their markdown/text/CSV and HTML renderings, the figure helpers, the
typed rows every JSON document is written from and the typed report (:mod:`.report`) an instrument returns."""
