"""The mean of BBE and DEDPUL, both read from one set of held-out P-vs-U scores (the
default, as `auto`, until TED^n took its place: docs/prior.md).

BBE reads the ratio q_u / q_p in a top bin, an upper bound that is tight only where that
bin is free of negatives, so it errs high; DEDPUL's minimum of f_u / f_p sits where the
estimated densities are thinnest, and errs low when its fixed point stops early. On most
rows of reports/prior their errors have opposite signs and the mean is closer to the truth
than either. The second estimate costs well under a second: both share the scores.
"""

from __future__ import annotations

from pucl.prior.base import PRIOR_ESTIMATORS
from pucl.prior.bbe import bbe_from_scores
from pucl.prior.dedpul import dedpul_from_scores
from pucl.prior.heldout import HeldOutEstimator, HeldOutParams, HeldOutScores


@PRIOR_ESTIMATORS.register("bbe_dedpul", params=HeldOutParams, params_key="heldout")
class BBEDEDPULMean(HeldOutEstimator):
    """The mean of BBE and DEDPUL on shared held-out P-vs-U scores."""

    def _from_scores(self, scores: HeldOutScores) -> tuple[float, dict]:
        bbe, bbe_details = bbe_from_scores(scores, self.gamma, self.delta)
        dedpul, dedpul_details = dedpul_from_scores(scores, self.bandwidth_u, self.bandwidth_p)
        return (bbe + dedpul) / 2, {**bbe_details, **dedpul_details, "bbe": bbe,
                                    "dedpul": dedpul}
