"""Attention resolution, the instrument (``lexkit resolution``; :mod:`.measure`, :mod:`.report`,
:mod:`.figures`)."""
