"""FSL_AN: federated split learning with an auxiliary network (Han et al.; specs/cse-fsl.md §1, §4.3).

As CSE-FSL with h = 1 (smashed data and labels uploaded after every minibatch, no gradient download), but the
server keeps one server-side copy per client; the copies are FedAvg-ed with the client models each round.
"""

from raysfl.algorithms.common.fsl_round import FSLRules
from raysfl.algorithms.common.fsl_spec import fsl_spec
from raysfl.algorithms.fsl_an.params import FSLANParams


def rules(p: FSLANParams) -> FSLRules:
    """FSL_AN: local loss, server copies, every batch uploaded."""
    return FSLRules(
        method="fsl_an",
        local_loss=True,
        server_copies=True,
        h=1,
        local_epochs=p.local_epochs,
        drop_last=p.drop_last,
        lr_decay=p.lr_decay,
        lr_decay_every=p.lr_decay_every,
        aggregation=p.aggregation,
        client_sampling=p.client_sampling,
        average_server_copies=p.average_server_copies,
        init_std=p.init_std,
    )


SPEC = fsl_spec(
    name="fsl_an",
    params=FSLANParams,
    rules=rules,
    smoke=('model.aux="mlp"',),  # the local loss needs an auxiliary head (``validate_aux``)
    description="split FL with an auxiliary-head local loss, upload every batch, one server copy per client",
)

__all__ = ["SPEC", "FSLANParams", "rules"]
