"""StepClock: the seconds and peak memory of a fit's named steps."""

from __future__ import annotations

import time

import numpy as np

from pucl.runtime.clock import StepClock


def test_a_step_named_twice_adds_up_its_seconds():
    clock = StepClock()
    for _ in range(2):
        with clock("pretrain"):
            time.sleep(0.05)
    with clock("prior"):
        pass
    assert 0.1 <= clock.seconds["pretrain"] < 0.5
    assert clock.seconds["prior"] < 0.05 and clock.peak_rss == {}


def test_the_peak_memory_of_a_step_sees_what_it_held_for_a_moment():
    clock = StepClock(memory=True, interval=0.01)
    with clock("small"):
        time.sleep(0.05)
    with clock("large"):
        block = np.ones(50_000_000)  # 400 MB, freed before the step ends
        time.sleep(0.1)
        del block
    assert clock.peak_rss["large"] - clock.peak_rss["small"] > 300e6
