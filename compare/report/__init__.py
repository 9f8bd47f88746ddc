"""`compare report`: an index (the answer, one summary figure, the headline
table, links) and a page per results file, per sweep and for the rooflines,
in Markdown and HTML with PNG plots, rendered from results files only, so
runs from several machines merge into one report.  The figures come from
compare/analysis.py and compare/speedup.py; this package lays them out.

render_report is imported when asked for: the answer alone (compare run's
last lines) needs no plotting library."""


def __getattr__(name):
    if name in ("render_report", "REPORT_ROOM", "REPORT_NAMES"):
        from . import render
        return getattr(render, name)
    raise AttributeError(name)
