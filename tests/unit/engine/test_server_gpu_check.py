"""``engine.server_device = "cuda"`` on Ray without a GPU for the server is refused on the driver.

In the server actor the failure would be a constructor error, which Ray reports as a dead actor: restarted,
retried, and the run would end without saying why.
"""

import pytest

from raysfl.config import ConfigError
from raysfl.engine.cluster import check_server_gpu


@pytest.mark.parametrize(
    ("options", "where"),
    [
        ({"num_cpus": 1, "num_gpus": 0}, "the cluster"),
        ({"num_gpus": 0.0, "scheduling_strategy": object()}, "trial"),
    ],
)
def test_cuda_without_a_gpu_for_the_server_names_the_option(options, where):
    with pytest.raises(ConfigError, match=rf"engine.server_device: 'cuda' needs a GPU, but .*{where}"):
        check_server_gpu("cuda", options)


def test_a_gpu_for_the_server_or_another_device_passes():
    check_server_gpu("cuda", {"num_cpus": 1, "num_gpus": 1})
    for device in ("auto", "cpu"):
        check_server_gpu(device, {"num_cpus": 1, "num_gpus": 0})
