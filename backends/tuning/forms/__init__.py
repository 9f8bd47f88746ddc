"""The `forms` scope of `compare tune`: the prepare-time choices of our
hand-written backends (which Winograd form each 3x3 conv runs) measured once
per net and device (search.py), run by scope.py; kept in the per-device forms
cache, which the backends read (backends/handwritten/forms_tuned.py)."""
