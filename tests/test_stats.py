"""lexkit.core.stats' interval over seeds: Student's t quantile against the printed tables (and scipy's,
an independent implementation, where installed), its CDF against the closed forms of one and two
degrees of freedom, and the interval of a mean against its formula."""

import math

import pytest

from lexkit.core.stats import mean_interval, t_cdf, t_quantile

#: t_{0.975, df} as printed in every statistics table
TABLE = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 10: 2.228, 30: 2.042, 120: 1.980}


@pytest.mark.parametrize("df, t", TABLE.items())
def test_t_quantile_is_the_tables(df, t):
    assert t_quantile(0.975, df) == pytest.approx(t, abs=5e-4)
    assert t_quantile(0.025, df) == -t_quantile(0.975, df)


def test_t_cdf_closed_forms_and_scipy():
    for x in (-3.0, -0.5, 0.0, 0.7, 2.5, 40.0):
        assert t_cdf(x, 1) == pytest.approx(0.5 + math.atan(x) / math.pi, abs=1e-12)  # Cauchy
        assert t_cdf(x, 2) == pytest.approx(0.5 + x / (2 * math.sqrt(2 + x * x)), abs=1e-12)
    special = pytest.importorskip("scipy.special")  # stdtrit: Student t's quantile (scipy.stats is slow to import)
    for df in (1, 2, 3, 7, 25, 500):
        for p in (0.6, 0.9, 0.975, 0.999):
            assert t_quantile(p, df) == pytest.approx(special.stdtrit(df, p), rel=1e-9)
    assert t_quantile(0.975, 10**6) == pytest.approx(1.959963984540054, abs=1e-5)  # the normal's


def test_mean_interval_is_mean_plus_minus_t_times_the_standard_error():
    values = [0.11, 0.95, 0.98]
    mean = sum(values) / 3
    s = math.sqrt(sum((v - mean) ** 2 for v in values) / 2)
    low, high = mean_interval(values)
    assert (low, high) == pytest.approx((mean - 4.302652729749462 * s / math.sqrt(3),
                                         mean + 4.302652729749462 * s / math.sqrt(3)))
    assert mean_interval([0.5, 0.5]) == (0.5, 0.5) and mean_interval([0.7]) is None and mean_interval([]) is None
    assert mean_interval([0.2, 0.4], level=0.9) == pytest.approx((0.3 - 6.3137515 * 0.1, 0.3 + 6.3137515 * 0.1))


def test_bad_input_is_refused():
    for p, df in ((0.0, 3), (1.0, 3), (0.5, 0)):
        with pytest.raises(ValueError, match="t quantile needs"):
            t_quantile(p, df)
