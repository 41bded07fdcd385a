"""lexkit's version (one place; the package and every document lexkit writes read it here)."""

__version__ = "0.1.0"


def header(report: str, report_version: int) -> dict:
    """The first keys of every report an instrument writes (``lexkit eval``, ``retrieval``,
    ``resolution``, ``inspect``, ``conformance``): which report it is (``lexkit.eval``), the version of
    its layout (2 for every report since this header; 1 was the header before it, where ``version``
    meant lexkit's version in eval's and retrieval's documents and the layout's in the others), and
    lexkit's version."""
    return {"report": report, "report_version": report_version, "lexkit_version": __version__}
