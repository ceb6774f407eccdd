"""ASO-Fed: asynchronous online federated learning for non-IID data (Chen et al., IEEE BigData 2020)."""

from raysfl.algorithms.aso_fed.params import ASOFedParams
from raysfl.algorithms.aso_fed.policy import ASOFedPolicy, step_factor
from raysfl.algorithms.aso_fed.server import ASOFedServer, corrected_update, feature_attention
from raysfl.algorithms.common.fl_spec import fl_spec

SPEC = fl_spec(
    name="aso_fed",
    params=ASOFedParams,
    server=ASOFedServer,
    description="async FL: proximal local training, decayed update correction, step |D_k|/n per arrival",
    source="Chen, Ning, Slawski & Rangwala, IEEE BigData 2020 (arXiv:1911.02134); docs/algorithms/aso_fed.md",
    per_update=lambda setup: 1,  # every arrival is one global iteration
    proximal=lambda setup: setup.params.lam,
    policy=ASOFedPolicy,  # the FL policy plus the dynamic local step size (off by default)
    policy_options=lambda setup: {"dynamic_step": setup.params.dynamic_step},
)

__all__ = [
    "SPEC",
    "ASOFedParams",
    "ASOFedPolicy",
    "ASOFedServer",
    "corrected_update",
    "feature_attention",
    "step_factor",
]
