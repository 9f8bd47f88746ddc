"""The `tiles` scope of `compare tune`: vectorised-tiled's tiles and splits
timed on each conv layer of the nets (search.py), run by scope.py; what it
finds is kept in the per-device tiles cache, which the backend reads
(backends/handwritten/tiles_tuned.py)."""
