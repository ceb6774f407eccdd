"""Device-profile generators: seeding, stream layout, placement, bandwidth sharing, ratios, reduction."""

import dataclasses

import numpy as np
import pytest

from raysfl.system.config import ComputeConfig, LinkConfig, SystemConfig
from raysfl.system.profiles import compute_rates, draw_devices, wireless_rates_bps


def draw(cfg: SystemConfig, k: int = 20, seed: int = 2023):
    return draw_devices(cfg, k, np.random.default_rng(seed))


def with_link(**changes) -> SystemConfig:
    return SystemConfig(link=LinkConfig(**changes))


def with_compute(**changes) -> SystemConfig:
    return SystemConfig(compute=ComputeConfig(**changes))


def test_defaults_are_the_gas_device_model():
    t = draw(SystemConfig(), k=200)
    assert len(t) == 200
    assert t.flops_per_s.min() >= 1e9 and t.flops_per_s.max() <= 1e10
    assert t.distance_m.min() >= 100.0 and t.distance_m.max() <= 1000.0
    up, down = wireless_rates_bps(LinkConfig(), t.distance_m, 200)
    np.testing.assert_array_equal(t.uplink_bps, up)
    np.testing.assert_array_equal(t.downlink_bps, down)


def test_same_seed_same_table_different_seed_different():
    assert draw(SystemConfig(), seed=7) == draw(SystemConfig(), seed=7)
    a, b = draw(SystemConfig(), seed=7), draw(SystemConfig(), seed=8)
    assert a != b
    assert not np.any(a.flops_per_s == b.flops_per_s)
    assert not np.any(a.distance_m == b.distance_m)


@pytest.mark.parametrize(
    "cfg",
    [
        SystemConfig(),
        SystemConfig(compute=ComputeConfig(kind="fixed"), link=LinkConfig(kind="fixed")),
        SystemConfig(compute=ComputeConfig(kind="ratio"), link=LinkConfig(kind="uniform")),
    ],
)
def test_draws_exactly_one_fixed_block_from_the_stream(cfg):
    rng, ref = np.random.default_rng(5), np.random.default_rng(5)
    draw_devices(cfg, 13, rng)
    ref.random((3, 13))
    assert rng.random() == ref.random()


def test_compute_kind_does_not_shift_the_link_draws():
    a = draw(with_compute(kind="uniform"))
    b = draw(with_compute(kind="ratio"))
    c = draw(with_compute(kind="fixed"))
    np.testing.assert_array_equal(a.distance_m, b.distance_m)
    np.testing.assert_array_equal(a.distance_m, c.distance_m)
    np.testing.assert_array_equal(a.uplink_bps, c.uplink_bps)


def test_uniform_in_area_places_more_clients_far_out_than_uniform_in_radius():
    k = 4000
    area = draw(with_link(placement="area"), k=k, seed=11).distance_m
    radius = draw(with_link(placement="radius"), k=k, seed=11).distance_m
    # Same uniforms, monotone maps: area's sqrt transform puts each client at least as far out.
    assert np.all(area >= radius - 1e-9)
    # Uniform in area: P(d > 700 m) = (1000² - 700²)/(1000² - 100²) ≈ 0.515; in radius: 300/900 ≈ 0.333.
    assert np.mean(area > 700) == pytest.approx(0.515, abs=0.03)
    assert np.mean(radius > 700) == pytest.approx(1 / 3, abs=0.03)
    assert np.median(area) == pytest.approx(np.sqrt((100**2 + 1000**2) / 2), rel=0.03)
    assert np.median(radius) == pytest.approx(550.0, rel=0.03)


def test_shared_bandwidth_splits_w_over_k_clients():
    k = 20
    shared = draw(with_link(bandwidth_mode="shared"), k=k)
    full = draw(with_link(bandwidth_mode="per-client"), k=k)
    np.testing.assert_array_equal(shared.distance_m, full.distance_m)
    assert np.all(shared.uplink_bps < full.uplink_bps)
    by_hand, _ = wireless_rates_bps(
        LinkConfig(bandwidth_hz=1e7 / k, bandwidth_mode="per-client"), shared.distance_m, k
    )
    np.testing.assert_allclose(shared.uplink_bps, by_hand, rtol=1e-12)
    # With one client the two modes coincide.
    assert draw(with_link(bandwidth_mode="shared"), k=1) == draw(with_link(bandwidth_mode="per-client"), k=1)


def test_fixed_distance_cell_reproduces_the_lightweight_rate():
    # lightweight-fedsl §2.2: 100 m, 5 MHz per client, 23 dBm up / 37 dBm down → 65.63 / 88.88 Mb/s.
    cfg = with_link(
        radius_m=100.0,
        min_distance_m=100.0,
        tx_power_dbm=23.0,
        server_tx_power_dbm=37.0,
        bandwidth_hz=5e6,
        bandwidth_mode="per-client",
    )
    t = draw(cfg, k=5)
    np.testing.assert_array_equal(t.distance_m, 100.0)
    assert np.all(np.round(t.uplink_bps / 1e6, 2) == 65.63)
    assert np.all(np.round(t.downlink_bps / 1e6, 2) == 88.88)


@pytest.mark.parametrize("sampling", ["time", "rate"])
def test_heterogeneity_ratio_holds(sampling):
    cfg = with_compute(kind="ratio", ratio=5.0, ratio_sampling=sampling, max_flops_per_s=1e10)
    many = draw(cfg, k=5000).flops_per_s
    assert many.max() <= 1e10 and many.min() >= 1e10 / 5.0
    assert many.max() / many.min() == pytest.approx(5.0, rel=0.01)
    few = draw(cfg, k=10).flops_per_s
    assert few.max() / few.min() <= 5.0


def test_ratio_sampling_uniform_in_time_versus_in_rate():
    # fedasmu §2.6: slowdown r ~ U[1, R] (time) has mean (1 + R)/2 = 3;
    # in rate, f/max ~ U[1/R, 1] has mean 0.6.
    k = 20000
    time = draw(with_compute(kind="ratio", ratio_sampling="time"), k=k).flops_per_s / 1e10
    rate = draw(with_compute(kind="ratio", ratio_sampling="rate"), k=k).flops_per_s / 1e10
    assert np.mean(1 / time) == pytest.approx(3.0, rel=0.02)
    assert np.mean(rate) == pytest.approx(0.6, rel=0.02)


@pytest.mark.parametrize("sampling", ["time", "rate"])
def test_pinned_extremes_make_the_ratio_exact(sampling):
    cfg = with_compute(kind="ratio", ratio=40.0, ratio_sampling=sampling, pin_extremes=True)
    f = draw(cfg, k=7).flops_per_s
    assert f.max() == 1e10
    assert f.max() / f.min() == pytest.approx(40.0, rel=1e-12)


@pytest.mark.parametrize(
    ("sampling", "smallest_u_rate", "largest_u_rate"), [("time", 1e10, 2.5e9), ("rate", 2.5e9, 1e10)]
)
def test_pinned_extremes_map_the_smallest_draw_by_sampling(sampling, smallest_u_rate, largest_u_rate):
    # The smallest u becomes 0: f = max/(1 + (R-1)·0) = max in time, max/R + (max - max/R)·0 = max/R in rate.
    cfg = ComputeConfig(
        kind="ratio", max_flops_per_s=1e10, ratio=4.0, ratio_sampling=sampling, pin_extremes=True
    )
    f = compute_rates(cfg, np.array([0.5, 0.1, 0.9, 0.3]))
    assert f[1] == smallest_u_rate
    assert f[2] == largest_u_rate  # the largest u takes the other extreme


def test_fixed_kinds_give_equal_devices():
    cfg = SystemConfig(
        compute=ComputeConfig(kind="fixed", flops_per_s=3e9),
        link=LinkConfig(kind="fixed", uplink_bps=2e6, downlink_bps=8e6),
    )
    t = draw(cfg, k=4)
    np.testing.assert_array_equal(t.flops_per_s, 3e9)
    np.testing.assert_array_equal(t.uplink_bps, 2e6)
    np.testing.assert_array_equal(t.downlink_bps, 8e6)
    assert np.all(np.isnan(t.distance_m)) and not t.wireless


def test_uniform_links_and_downlink_multiple():
    t = draw(with_link(kind="uniform"), k=500)
    assert t.uplink_bps.min() >= 5e6 and t.uplink_bps.max() <= 2e7
    assert t.downlink_bps.min() >= 2.5e7 and t.downlink_bps.max() <= 1e8
    t5 = draw(with_link(kind="uniform", downlink_to_uplink=5.0), k=500)
    np.testing.assert_allclose(t5.downlink_bps, 5 * t5.uplink_bps, rtol=1e-15)
    np.testing.assert_array_equal(t5.uplink_bps, t.uplink_bps)


@pytest.mark.parametrize("kind", ["wireless", "fixed", "uniform"])
def test_bandwidth_reduction_divides_rates(kind):
    base = draw(with_link(kind=kind))
    slow = draw(with_link(kind=kind, bandwidth_reduction=50.0))
    np.testing.assert_allclose(slow.uplink_bps, base.uplink_bps / 50.0, rtol=1e-15)
    np.testing.assert_allclose(slow.downlink_bps, base.downlink_bps / 50.0, rtol=1e-15)
    np.testing.assert_array_equal(slow.flops_per_s, base.flops_per_s)


def test_trace_kinds_read_the_file(tmp_path):
    src = draw(SystemConfig(), k=6, seed=3)
    path = tmp_path / "devices.csv"
    src.to_csv(path)
    both = SystemConfig(
        compute=ComputeConfig(kind="trace"), link=LinkConfig(kind="trace"), trace_file=str(path)
    )
    assert draw(both, k=6, seed=99) == src
    assert draw(both, k=4, seed=99) == draw_devices(both, 4, np.random.default_rng(0))
    np.testing.assert_array_equal(draw(both, k=4).uplink_bps, src.uplink_bps[:4])
    # Trace compute with drawn links: the links still come from the rng.
    mixed = dataclasses.replace(both, link=LinkConfig())
    t = draw(mixed, k=6, seed=3)
    np.testing.assert_array_equal(t.flops_per_s, src.flops_per_s)
    np.testing.assert_array_equal(t.distance_m, src.distance_m)
    # bandwidth_reduction applies to trace links too.
    slow = dataclasses.replace(both, link=LinkConfig(kind="trace", bandwidth_reduction=100.0))
    np.testing.assert_allclose(draw(slow, k=6).uplink_bps, src.uplink_bps / 100.0, rtol=1e-15)
    np.testing.assert_allclose(draw(slow, k=6).downlink_bps, src.downlink_bps / 100.0, rtol=1e-15)


def test_num_clients_must_be_positive():
    with pytest.raises(ValueError, match="num_clients"):
        draw(SystemConfig(), k=0)
