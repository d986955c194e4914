"""memory_recall's reads (operations.py) and the search pipeline: id lookup, legs, fusion, calibration, hits, graph."""
