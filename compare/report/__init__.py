"""`compare report`: an index (the answer, one summary figure, the headline
table, links) and a page per results file, per sweep and for the rooflines,
in Markdown and HTML with PNG plots, rendered from results files only, so
runs from several machines merge into one report.  The figures come from
compare/analysis.py and compare/speedup.py; this package lays them out."""
from .render import REPORT_ROOM, render_report

__all__ = ["REPORT_ROOM", "render_report"]
