"""TensorBoard's per-evaluation quantities are the same on Ray as in one process.

The staleness histogram and the buffer shares sum the event rows logged between two reports. On Ray an
evaluation's value arrives after rows logged later, which used to land in its sums (and the sums then
differed between runs, pool counts and a run with checkpoints).
"""

from pathlib import Path

import pytest

from raysfl.engine import runner
from tests.faulty_methods import LONGER


def _staleness_per_evaluation(run_dir: Path) -> list[tuple[int, int, float]]:
    """TensorBoard's staleness histograms as (step, count, sum)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tb"), size_guidance={"histograms": 0})  # 0: keep every one
    acc.Reload()
    return [(h.step, int(h.histogram_value.num), h.histogram_value.sum) for h in acc.Histograms("staleness")]


@pytest.mark.parametrize("pools", [1, 2])
def test_tensorboard_sums_each_evaluation_over_the_rows_before_its_report(ray_session, tmp_path, pools):
    """On Ray an evaluation arrives after rows logged later; they used to land in its histogram."""
    import pyarrow.parquet as pq

    from examples.fedasync_hinge.test_fedasync_hinge import SCENARIO as HINGE
    from raysfl.scenario import load_scenario

    sc = load_scenario(HINGE, [*LONGER, "metrics.tensorboard=true", f"engine.pools={pools}"])
    runner.run(sc, tmp_path / "ray", backend="ray")
    runner.run(sc, tmp_path / "local", backend="local")
    # from the event log: arrival rows carry the version they were mixed into; evaluation i covers [i-4, i)
    rows = pq.read_table(tmp_path / "local" / "events.parquet").to_pylist()
    arrivals = [r for r in rows if r["kind"] == "arrival"]
    expected = []
    for it in (4, 8, 12):
        values = [r["staleness"] for r in arrivals if it - 4 <= r["version"] < it]
        expected.append((it, len(values), float(sum(values))))
    assert _staleness_per_evaluation(tmp_path / "local") == expected
    assert _staleness_per_evaluation(tmp_path / "ray") == expected
