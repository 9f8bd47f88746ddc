"""The `tinygrad` scope of `compare tune`: tinygrad's schedule search of
the nets' kernels.  scope.py runs it (check, run, show); loop.py surveys
the nets and hands each searcher the next kernel within the deadline;
session.py is a searcher in a child on this device, beam.py the search
inside that child, farm.py the searchers on a farm's workers.  What it
chooses the `tinygrad` backend reads from the choices file alone
(backends/peers/tinygrad_choices.py)."""
