"""The CSE-FSL family: CSE-FSL and its three baselines as :class:`FSLRules` presets (specs/cse-fsl.md).

The four methods run the same client, server and policy (:mod:`raysfl.algorithms.common.fsl_policy`,
``fsl_server``, ``aux_client``, ``fsl_split_client``) and differ only in the :class:`FSLRules` value their
options map to:

* ``cse_fsl`` (CSE-FSL, Mu & Shen): the client trains x_c through an auxiliary head a_c on a local loss
  (eq. 5, no gradient download), uploads the smashed data and labels of one minibatch in every h; one
  server-side model x_s takes one SGD step per upload in emulated arrival order; x_c and a_c are
  FedAvg-aggregated (eq. 14) once per round or every C batches.
* ``fsl_an`` (FSL_AN, Han et al.): as CSE-FSL with h = 1, but the server keeps one server-side copy per
  client, FedAvg-ed with the client models each round.
* ``splitfed_v1`` (SplitFed V1 / FSL_MC, Thapa et al.): every minibatch's smashed data goes up and its
  gradient comes back; one server-side copy per client; client models and copies FedAvg-ed each round.
* ``splitfed_v2`` (SplitFed V2 / FSL_OC, Thapa et al.): per-batch gradients, one shared server model updated
  sequentially in arrival order; the CSE-FSL paper adds gradient clipping against its convergence problems.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from raysfl.algorithms.common.fsl_round import FSLRules
from raysfl.algorithms.common.fsl_spec import fsl_spec
from raysfl.algorithms.cse_fsl.params import CSEFSLParams, FSLANParams, SplitFedV1Params, SplitFedV2Params

_AUX_SMOKE = ('model.aux="mlp"',)  # the local loss needs an auxiliary head (``validate_aux``)


def _shared(p: CSEFSLParams | FSLANParams | SplitFedV1Params | SplitFedV2Params) -> dict[str, Any]:
    """The options every member of the family has: local epochs, batching, lr schedule, FedAvg, sampling."""
    return {
        "local_epochs": p.local_epochs,
        "drop_last": p.drop_last,
        "lr_decay": p.lr_decay,
        "lr_decay_every": p.lr_decay_every,
        "aggregation": p.aggregation,
        "client_sampling": p.client_sampling,
        "init_std": p.init_std,
    }


def cse_fsl_rules(p: CSEFSLParams) -> FSLRules:
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
        **_shared(p),
    )


def fsl_an_rules(p: FSLANParams) -> FSLRules:
    """FSL_AN: local loss, server copies, every batch uploaded."""
    return FSLRules(
        method="fsl_an",
        local_loss=True,
        server_copies=True,
        h=1,
        average_server_copies=p.average_server_copies,
        **_shared(p),
    )


def splitfed_v1_rules(p: SplitFedV1Params) -> FSLRules:
    """SplitFed V1 (FSL_MC): gradients, server copies."""
    return FSLRules(
        method="splitfed_v1",
        local_loss=False,
        server_copies=True,
        average_server_copies=p.average_server_copies,
        **_shared(p),
    )


def splitfed_v2_rules(p: SplitFedV2Params) -> FSLRules:
    """SplitFed V2 (FSL_OC): gradients, one server model, clipping."""
    return FSLRules(
        method="splitfed_v2",
        local_loss=False,
        server_copies=False,
        max_grad_norm=p.max_grad_norm,
        **_shared(p),
    )


RULES: dict[str, Callable[[Any], FSLRules]] = {
    "cse_fsl": cse_fsl_rules,
    "fsl_an": fsl_an_rules,
    "splitfed_v1": splitfed_v1_rules,
    "splitfed_v2": splitfed_v2_rules,
}
"""Each registry name's preset: its ``Params`` → :class:`FSLRules`."""

SPEC = fsl_spec(
    name="cse_fsl",
    params=CSEFSLParams,
    rules=cse_fsl_rules,
    smoke=(*_AUX_SMOKE, "algorithm.params.h=2"),  # a small run's clients hold fewer than h = 5 minibatches
    description="split FL with an auxiliary-head local loss, one server model, smashed data every h batches",
)
FSL_AN_SPEC = fsl_spec(
    name="fsl_an",
    params=FSLANParams,
    rules=fsl_an_rules,
    smoke=_AUX_SMOKE,
    description="split FL with an auxiliary-head local loss, upload every batch, one server copy per client",
)
SPLITFED_V1_SPEC = fsl_spec(
    name="splitfed_v1",
    params=SplitFedV1Params,
    rules=splitfed_v1_rules,
    description="split FL with per-batch gradients and one server-side copy per client (FSL_MC)",
)
SPLITFED_V2_SPEC = fsl_spec(
    name="splitfed_v2",
    params=SplitFedV2Params,
    rules=splitfed_v2_rules,
    description="split FL with per-batch gradients and one shared server model, clipped (FSL_OC)",
)

__all__ = [
    "FSL_AN_SPEC",
    "RULES",
    "SPEC",
    "SPLITFED_V1_SPEC",
    "SPLITFED_V2_SPEC",
    "CSEFSLParams",
    "FSLANParams",
    "SplitFedV1Params",
    "SplitFedV2Params",
    "cse_fsl_rules",
    "fsl_an_rules",
    "splitfed_v1_rules",
    "splitfed_v2_rules",
]
