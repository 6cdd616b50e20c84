"""Where the widening searches measure their candidates: :class:`Scorer` scores an integer graph on a
subsample of the calibration sequences, and on every one where the subsample's figure is close to a threshold."""

from __future__ import annotations

from .budget import spread_rows

#: the search scores a candidate on about this many calibration steps, whole sequences evenly spaced over the
#: set (issue 54: the psMNIST-sized model's 16 candidates on 200 x 784 steps took 12.7 s each, 203 of 293 s);
#: the one chosen is scored on every sequence after it
SEARCH_STEPS = 16384
#: a candidate the subsample scores within this of the target is scored on every sequence instead
NEAR_DB = 1.0


def noted(qg, **fields):
    """``qg`` with ``fields`` (what a widening search chose and why) added to its quantization metadata."""
    meta = dict(qg.metadata)
    meta["quantization"] = {**meta["quantization"], **fields}
    return qg.replace(metadata=meta)


class Scorer:
    """Where :func:`lmu_edge.widening.search` measures its candidates: ``score(qg, x, y_f)`` annotates an
    integer graph with its SQNR against the float outputs ``y_f`` on inputs ``x``. With a ``target_db`` and calibration
    longer than ``search_steps`` steps, :attr:`x` and :attr:`y_f` are every k-th sequence, the fewest
    with at least ``search_steps`` steps; :meth:`near` scores a candidate within :data:`NEAR_DB` of the
    target on every sequence, and :meth:`run` scores the search's choice on every sequence and, where
    that puts it on the other side of the target than the subsample did, runs the search again on every
    sequence. ``search_steps=None`` scores everything on every sequence."""

    def __init__(self, x, y_f, score, target_db, search_steps=SEARCH_STEPS):
        self.all, self.score, self.target = (x, y_f), score, target_db
        self.rows = spread_rows(x.shape[0], x.shape[1], None if target_db is None else search_steps)
        self.x, self.y_f = (x, y_f) if self.rows is None else (x[self.rows], y_f[self.rows])
        self.marks = [] if target_db is None else [float(target_db)]
        self.on_all: dict = {}  # id(layers) -> (layers, their SCORE_FIELDS on every sequence): kept, no id reused

    def mark(self, db: float) -> None:
        """Add a threshold the search compares candidates with (the target is one)."""
        self.marks.append(float(db))

    def _all(self, qg):
        """``qg`` scored on every sequence, once per set of integers: a graph :func:`noted` after its scoring
        (the search's choice) keeps its layers, and takes the figures already measured for them."""
        seen = self.on_all.get(id(qg.layers))
        if seen is None or seen[0] is not qg.layers:
            info = self.score(qg, *self.all).metadata["quantization"]
            seen = self.on_all[id(qg.layers)] = (qg.layers, {k: info[k] for k in SCORE_FIELDS})
        return qg.replace(metadata={**qg.metadata, "quantization": {**qg.metadata["quantization"], **seen[1]}})

    def near(self, qg):
        """``qg`` scored on every sequence where the subsample puts it within :data:`NEAR_DB` of a threshold
        (:meth:`mark`), else as it is."""
        if self.rows is None or all(abs(sqnr_of(qg) - m) >= NEAR_DB for m in self.marks):
            return qg
        return self._all(qg)

    def settle(self, results: list) -> list:
        """``results`` (``(SQNR, graph, warnings)`` the search picks the best of) with those within
        :data:`NEAR_DB` of the best scored on every sequence: a near-tie decided there, not by the subsample
        (the GPTQ and nearest roundings of the drawn models in tests/test_search_subsample.py)."""
        if self.rows is None or len(results) < 2:
            return list(results)
        top = max(r[0] for r in results)
        out = []
        for sq, qg, caught in results:
            full = self._all(qg) if top - sq < NEAR_DB else qg
            out.append((sqnr_of(full), full, caught))
        return out

    def run(self, search):
        """``search()`` (returning :func:`lmu_edge.widening.search`'s tuple) on the subsample, its choice scored
        on every sequence (the search again on every sequence where the subsample misjudged the target)."""
        res = search()
        if self.rows is None:
            return res
        built, sqnr, qg, caught, used, kept = res
        full = self._all(qg)
        part = f"{len(self.rows)} of {self.all[0].shape[0]} calibration sequences"
        on = f"{part} (the choice on every one)"
        if (sqnr >= float(self.target)) != (sqnr_of(full) >= float(self.target)):
            on = f"every calibration sequence ({part} put the choice on the wrong side of {self.target:.3g} dB)"
            self.rows, (self.x, self.y_f) = None, self.all
            built, sqnr, full, caught, used, kept = search()
        return built, sqnr_of(full), noted(full, search_on=on), caught, used, kept


#: what a scoring adds to a graph's quantization metadata (quantization._scored)
SCORE_FIELDS = ("calibration_error", "calibration_sqnr_db")


def sqnr_of(qg) -> float:
    """A scored graph's calibration SQNR in dB."""
    return float(qg.metadata["quantization"]["calibration_sqnr_db"])
