"""Audio for keyword spotting: the integer log-mel front end (:mod:`lmu_edge.audio.frontend`).

Not part of the conversion core: only the keyword-spotting examples and their firmware use it.
"""
