"""File formats read and written by more than one layer (the model loads PLY, ``export/`` writes it).

Kept below ``model/`` and ``export/`` so that both import it from above; ``atomic_io.py`` is its
crash-safe write primitive.
"""
