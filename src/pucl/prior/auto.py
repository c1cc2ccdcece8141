"""The default (`prior.method: auto`): BBE and DEDPUL on one set of held-out scores,
averaged.

Why this rule (reports/prior/, 4 cases x 3 seeds): BBE reads the ratio q_u / q_p in a top
bin, an upper bound that is tight only where that bin is free of negatives, so it errs
high; DEDPUL's minimum of f_u / f_p sits where the estimated densities are thinnest, and
errs low when its fixed point stops early. Their errors have opposite signs on most rows,
and their mean is closer to the truth than either on the table's worst rows. Both read
the same cross-fitted scores, so the second estimate costs well under a second.
"""

from __future__ import annotations

from pucl.prior.base import PRIOR_ESTIMATORS
from pucl.prior.bbe import bbe_from_scores
from pucl.prior.dedpul import dedpul_from_scores
from pucl.prior.heldout import HeldOutEstimator, HeldOutParams, HeldOutScores


@PRIOR_ESTIMATORS.register("auto", params=HeldOutParams, params_key="heldout")
class AutoPrior(HeldOutEstimator):
    """The mean of BBE and DEDPUL on shared held-out P-vs-U scores (the default)."""

    def _from_scores(self, scores: HeldOutScores) -> tuple[float, dict]:
        bbe, bbe_details = bbe_from_scores(scores, self.gamma, self.delta)
        dedpul, dedpul_details = dedpul_from_scores(scores, self.bandwidth_u, self.bandwidth_p)
        return (bbe + dedpul) / 2, {**bbe_details, **dedpul_details, "bbe": bbe,
                                    "dedpul": dedpul}
