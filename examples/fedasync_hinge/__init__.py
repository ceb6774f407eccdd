"""FedAsync with a hinge staleness function: a complete method outside raysfl (see method.py)."""
