"""Student's t for the report's paired intervals: closed forms by hand, published critical values."""

import math

import pytest

from raysfl.report.student_t import mean_interval, student_t_cdf, student_t_quantile

# two-sided 95 % and 99 % critical values, t(0.975, ν) and t(0.995, ν), as printed in statistical tables
TABLE = {
    1: (12.706, 63.657),
    2: (4.303, 9.925),
    3: (3.182, 5.841),
    4: (2.776, 4.604),
    5: (2.571, 4.032),
    6: (2.447, 3.707),
    7: (2.365, 3.499),
    10: (2.228, 3.169),
    15: (2.131, 2.947),
    30: (2.042, 2.750),
}


@pytest.mark.parametrize("df", sorted(TABLE))
def test_quantiles_are_the_tables_critical_values(df):
    t95, t99 = TABLE[df]
    assert student_t_quantile(0.975, df) == pytest.approx(t95, abs=5e-4)
    assert student_t_quantile(0.995, df) == pytest.approx(t99, abs=5e-4)


@pytest.mark.parametrize("t", [-7.5, -1.0, -0.2, 0.0, 0.3, 1.0, 2.5, 40.0])
def test_the_cdf_has_the_closed_forms_of_one_two_and_three_degrees(t):
    # ν = 1 is Cauchy's; ν = 2 and ν = 3 written out by hand from their densities
    assert student_t_cdf(t, 1) == pytest.approx(0.5 + math.atan(t) / math.pi, abs=1e-14)
    assert student_t_cdf(t, 2) == pytest.approx(0.5 + t / (2 * math.sqrt(2 + t * t)), abs=1e-14)
    u = t / math.sqrt(3)
    assert student_t_cdf(t, 3) == pytest.approx(0.5 + (math.atan(u) + u / (1 + u * u)) / math.pi, abs=1e-14)


@pytest.mark.parametrize("df", [1, 2, 5, 8, 31])
def test_the_cdf_is_symmetric_increasing_and_inverted_by_the_quantile(df):
    grid = [-20.0 + 0.5 * i for i in range(81)]
    values = [student_t_cdf(t, df) for t in grid]
    assert all(a <= b for a, b in zip(values, values[1:], strict=False))
    central = [student_t_cdf(t, df) for t in grid if abs(t) <= 5]  # away from the tails' rounding to 0 and 1
    assert all(a < b for a, b in zip(central, central[1:], strict=False))
    assert all(student_t_cdf(-t, df) == pytest.approx(1 - student_t_cdf(t, df), abs=1e-14) for t in grid)
    for p in (0.01, 0.2, 0.5, 0.9, 0.999):
        assert student_t_cdf(student_t_quantile(p, df), df) == pytest.approx(p, abs=1e-11)
    assert student_t_cdf(math.inf, df) == 1.0 and student_t_cdf(-math.inf, df) == 0.0


def test_many_degrees_of_freedom_approach_the_normal():
    assert student_t_quantile(0.975, 4000) == pytest.approx(1.959964, abs=1e-3)


def test_the_interval_is_mean_plus_minus_t_standard_errors():
    # 4 seeds: mean -8.20, SE 0.53 -> 3.182 SE each side, wider than the normal approximation's 2 SE
    low, high = mean_interval(-8.20, 0.53, 4)
    assert (low, high) == (
        pytest.approx(-8.20 - 3.1824 * 0.53, abs=1e-4),
        pytest.approx(-8.20 + 3.1824 * 0.53, abs=1e-4),
    )
    assert mean_interval(1.0, 0.5, 6, level=0.99) == pytest.approx(
        (1.0 - 4.032 * 0.5, 1.0 + 4.032 * 0.5), abs=1e-3
    )
    assert mean_interval(3.0, 0.0, 5) == (3.0, 3.0)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match=r"degrees of freedom: 0 is not an integer >= 1"):
        student_t_cdf(1.0, 0)
    with pytest.raises(ValueError, match=r"degrees of freedom: 2.5 is not an integer >= 1"):
        student_t_quantile(0.9, 2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"p: 1.0 is not a probability strictly between 0 and 1"):
        student_t_quantile(1.0, 3)
    with pytest.raises(ValueError, match=r"t: nan has no probability"):
        student_t_cdf(math.nan, 3)
    with pytest.raises(ValueError, match=r"n: 1 values give no interval; it needs at least 2"):
        mean_interval(1.0, 0.1, 1)
    with pytest.raises(ValueError, match=r"level: 1.5 is not a probability"):
        mean_interval(1.0, 0.1, 3, level=1.5)
