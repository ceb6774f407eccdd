"""A worker whose constructor raised is said as such: the exception and where, not a lost worker."""

from raysfl.engine.ray_backend import start_failure

RAY_SAYS = (
    "The actor died because of an error raised in its creation task, "
    "\x1b[36mray::ClientPool.__init__()\x1b[39m "
    "(pid=4127, ip=10.0.0.3, actor_id=8b49, repr=<raysfl.actors.client_pool.ClientPool object at 0x7f>)\n"
    '  File "/x/actors/client_pool.py", line 23, in __init__\n'
    "    self.host = ClientHost(setup, train_x, train_y, transform, threads)\n"
    "ModuleNotFoundError: No module named 'raysfl'\n"
)


def test_a_failed_start_names_the_exception_the_actor_and_its_node():
    said = start_failure(RAY_SAYS)
    assert said.startswith(
        "a worker of the run could not start: ModuleNotFoundError: No module named 'raysfl' (raised building "
        "ClientPool on node 10.0.0.3). Every node needs raysfl"
    )
    assert "\x1b" not in said


def test_a_failed_start_without_ray_s_first_line_still_names_the_exception():
    said = start_failure("ValueError: bad\n")
    assert said.startswith("a worker of the run could not start: ValueError: bad. ")
