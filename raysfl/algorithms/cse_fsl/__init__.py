"""CSE-FSL: communication- and storage-efficient federated split learning (specs/cse-fsl.md).

The client trains x_c through an auxiliary head a_c on a local loss (no gradient download), uploads the
smashed data and labels of one minibatch in every h; one server-side model x_s takes one SGD step per upload
in emulated arrival order; x_c and a_c are FedAvg-aggregated once per round (or every C batches).
Shared machinery: :mod:`raysfl.algorithms.common.fsl_policy`, ``fsl_server``, ``aux_client``.
"""

from raysfl.algorithms.common.fsl_round import FSLRules
from raysfl.algorithms.common.fsl_spec import fsl_spec
from raysfl.algorithms.cse_fsl.params import CSEFSLParams


def rules(p: CSEFSLParams) -> FSLRules:
    """CSE-FSL: local loss, one server model, uploads every h batches."""
    return FSLRules(
        method="cse_fsl",
        local_loss=True,
        server_copies=False,
        h=p.h,
        upload_rule=p.upload_rule,
        agg_every_batches=p.agg_every_batches,
        recompute_after_update=p.recompute_after_update,
        server_order=p.server_order,
        local_epochs=p.local_epochs,
        drop_last=p.drop_last,
        lr_decay=p.lr_decay,
        lr_decay_every=p.lr_decay_every,
        aggregation=p.aggregation,
        client_sampling=p.client_sampling,
        init_std=p.init_std,
    )


SPEC = fsl_spec(
    name="cse_fsl",
    params=CSEFSLParams,
    rules=rules,
    smoke=('model.aux="mlp"',),  # the local loss needs an auxiliary head (``validate_aux``)
    description="split FL with an auxiliary-head local loss, one server model, smashed data every h batches",
)

__all__ = ["SPEC", "CSEFSLParams", "rules"]
