"""The benchmarks' statistics against published values (scipy.stats.fisher_exact's documented
example and R's fisher.test; Wilson intervals as statsmodels' proportion_confint(method='wilson'))."""

from __future__ import annotations

import pytest

from benchmarks.stats import fisher_exact_two_sided, rounds_for_significance, wilson_interval


def test_fisher_two_sided_matches_known_values() -> None:
    assert fisher_exact_two_sided(1, 9, 11, 3) == pytest.approx(0.0027594561852200832, rel=1e-9)  # scipy's docs
    assert fisher_exact_two_sided(8, 2, 1, 5) == pytest.approx(0.03496503496503497, rel=1e-9)
    assert fisher_exact_two_sided(3, 1, 1, 3) == pytest.approx(0.48571428571428565, rel=1e-9)  # tea tasting
    assert fisher_exact_two_sided(0, 5, 5, 0) == pytest.approx(2 / 252, rel=1e-12)
    assert fisher_exact_two_sided(5, 5, 5, 5) == 1.0
    assert fisher_exact_two_sided(0, 0, 0, 0) == 1.0


def test_fisher_is_symmetric_in_rows_and_columns() -> None:
    assert fisher_exact_two_sided(2, 7, 8, 2) == pytest.approx(fisher_exact_two_sided(8, 2, 2, 7), rel=1e-12)
    assert fisher_exact_two_sided(2, 7, 8, 2) == pytest.approx(fisher_exact_two_sided(2, 8, 7, 2), rel=1e-12)


def test_fisher_rejects_negative_cells() -> None:
    with pytest.raises(ValueError, match="cells must be >= 0"):
        fisher_exact_two_sided(-1, 2, 3, 4)


def test_wilson_interval_matches_known_values() -> None:
    low, high = wilson_interval(5, 10)  # type: ignore[misc]
    assert (low, high) == (pytest.approx(0.2365930905, abs=1e-9), pytest.approx(0.7634069095, abs=1e-9))
    assert wilson_interval(0, 10) == (0.0, pytest.approx(0.2775327999, abs=1e-9))
    assert wilson_interval(10, 10) == (pytest.approx(0.7224672001, abs=1e-9), 1.0)
    low99, high99 = wilson_interval(45, 50, 0.99)  # type: ignore[misc]
    assert (low99, high99) == (pytest.approx(0.7402692, abs=1e-6), pytest.approx(0.9660091, abs=1e-6))
    assert wilson_interval(0, 0) is None


def test_wilson_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError, match="successes must be between 0 and trials"):
        wilson_interval(11, 10)
    with pytest.raises(ValueError, match="confidence"):
        wilson_interval(1, 10, 1.5)


def test_rounds_for_significance_is_the_first_n_reaching_alpha() -> None:
    assert rounds_for_significance(0.0, 1.0) == 5  # 0/5 vs 5/5: p = 2/252 < 0.01; 0/4 vs 4/4: 2/70
    n = rounds_for_significance(0.5, 1.0)
    assert n is not None
    green = round(0.5 * n)
    assert fisher_exact_two_sided(green, n - green, n, 0) < 0.01
    green_before = round(0.5 * (n - 1))
    assert fisher_exact_two_sided(green_before, n - 1 - green_before, n - 1, 0) >= 0.01
    assert rounds_for_significance(0.5, 0.5, most=50) is None
