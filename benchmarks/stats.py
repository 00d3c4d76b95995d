"""The benchmarks' statistics, pure and without scipy: Wilson score intervals for a share of
green runs and Fisher's exact test (two-sided) between two such shares."""

from __future__ import annotations

import math
from statistics import NormalDist


def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float] | None:
    """The Wilson score interval of `successes` out of `trials`; None without trials."""
    if not 0 <= successes <= trials:
        raise ValueError(f"successes must be between 0 and trials ({trials}), got {successes}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence}")
    if trials == 0:
        return None
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    share = successes / trials
    denominator = 1 + z * z / trials
    centre = (share + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(share * (1 - share) / trials + z * z / (4 * trials * trials)) / denominator
    # At 0 and at `trials` the bounds are exactly 0 and 1 (the formula leaves rounding dust).
    return (0.0 if successes == 0 else centre - half), (1.0 if successes == trials else centre + half)


def wilson_rounded(successes: int, trials: int, confidence: float = 0.95) -> list[float] | None:
    """`wilson_interval` as a results JSON records it: [low, high] rounded to 4 places."""
    found = wilson_interval(successes, trials, confidence)
    return None if found is None else [round(found[0], 4), round(found[1], 4)]


def fisher_exact_two_sided(a: int, b: int, c: int, d: int) -> float:
    """Two-sided p-value of Fisher's exact test on the 2x2 table [[a, b], [c, d]]: the probability,
    with the margins fixed, of every table no more likely than the observed one."""
    if min(a, b, c, d) < 0:
        raise ValueError(f"table cells must be >= 0, got {[[a, b], [c, d]]}")
    row, column, total = a + b, a + c, a + b + c + d

    def probability(x: int) -> float:
        return math.comb(column, x) * math.comb(total - column, row - x) / math.comb(total, row)

    observed = probability(a)
    low, high = max(0, row + column - total), min(row, column)
    # The relative tolerance keeps tables exactly as likely as the observed one (ties) in.
    return min(1.0, sum(p for x in range(low, high + 1) if (p := probability(x)) <= observed * (1 + 1e-7)))


def rounds_for_significance(share_a: float, share_b: float, alpha: float = 0.01, most: int = 1000) -> int | None:
    """The fewest rounds per variant at which Fisher's test on the expected counts
    (round(share * n) green of n each) gives p < alpha; None when `most` rounds do not suffice."""
    for share in (share_a, share_b):
        if not 0 <= share <= 1:
            raise ValueError(f"shares must be between 0 and 1, got {share}")
    for n in range(1, most + 1):
        green_a, green_b = round(share_a * n), round(share_b * n)
        if fisher_exact_two_sided(green_a, n - green_a, green_b, n - green_b) < alpha:
            return n
    return None
