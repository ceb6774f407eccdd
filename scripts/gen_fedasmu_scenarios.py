"""Write scenarios/fedasmu/: the FedASMU paper's Table 4 settings our data allows, sweeps and ablations.

Every scenario has a `_quick` twin (a short common emulated-time budget, minutes on 2 CPU cores for the
small models). Methods: FedASMU and FedSSMU, and the paper's baselines that are registered in
``raysfl.algorithms.ALGORITHMS`` when this script runs (FedAsync, PORT, ASO-Fed, FedBuff, FedSA;
FedAvg, FedProx, MOON, FedDyn, FedLWS): rerun the script after a baseline lands.

    table4/    model × dataset settings of Table 4 (fedasmu spec §5.1): LeNet/FMNIST, LeNet, CNN, AlexNet and
               VGG-11 on CIFAR-10 (read from the JPEG copy cifar10-jpg.tar.gz as well); CIFAR-100 and
               Tiny-ImageNet settings are written only once those datasets are registered (they then
               validate and fail at run time with the data-not-found error where the data is absent);
               TextCNN/IMDb is not written (no text data or model in raysfl)
    sweeps/    LeNet/FMNIST [A] (the paper does not say which setting Figs. 6-8 use, spec A21): 200 and
               250 devices (Fig. 6), heterogeneity ratio 10 and 40 (Fig. 7; the paper's "110"/"440", A16),
               bandwidth reduced 50× and 100× (Fig. 8, §6.2.5)
    ablation/  LeNet and CNN on CIFAR-10 (Fig. 9): FedASMU-DA, -FA, -0; fixed request slots H1, H2, H3

Settings [P] (Table 3, §4): m = 100 devices, m' = 10, T = 500, τ = 99, 𝒯 = 10, Dirichlet non-IID, the
per-setting learning rates η_i, η_λ, η_σ, η_ι, η_γ, η_υ. [A] (spec §2.6, §3.8): 𝓛 = 5 local epochs of a full
pass, B = 32, plain SGD, Dirichlet 0.5, learning-rate decay 0.99, compute ratio 5 with the fastest device at
1e9 FLOP/s, uplink U[5, 20] Mb/s and downlink 5× uplink. [P] (§6.1.4): the ratio bounds the devices' training
times whatever their data sizes (`system.compute.training_time = "per-device"`: FedASMU's and FedSSMU's epochs
are charged as passes over mean-size data); the sweeps in scenarios/repro/fedasmu/ ran before that option
and keep "per-sample" (Dirichlet sizes widen FedASMU's time ratio to 10-19×), except the *_per_device*
sweeps. The baselines run E = 5·⌈(N/m)/B⌉ local steps
(the same average work as 5 epochs) with m' = 10 concurrent jobs (async) or 10 devices per round (sync).

Budgets: full = T = 500 aggregations (async) or rounds (sync), capped by a common emulated-time budget of
300 fastest-device trainings (spec A15: compare by time to target); quick = 18 fastest-device trainings
(6 for AlexNet, 3 for VGG-11). Table 4's accuracy (%) and time to the target go into [reference].

Run `python scripts/gen_fedasmu_scenarios.py` after changing this file; the output is committed.
"""

from __future__ import annotations

import math
import shutil
from functools import cache
from pathlib import Path
from typing import Any

from raysfl.algorithms import ALGORITHMS
from raysfl.config import dumps_toml
from raysfl.data.registry import DATASETS

OUT = Path(__file__).resolve().parents[1] / "scenarios" / "fedasmu"

ASYNC = ("fedasmu", "fedasync", "port", "aso_fed", "fedbuff", "fedsa")
SYNC = ("fedssmu", "fedavg", "fedprox", "moon", "feddyn", "fedlws")
METHODS = ASYNC + SYNC
LABEL = {
    "fedasmu": "FedASMU",
    "fedasync": "FedAsync",
    "port": "PORT",
    "aso_fed": "ASO-Fed",
    "fedbuff": "FedBuff",
    "fedsa": "FedSA",
    "fedssmu": "FedSSMU",
    "fedavg": "FedAvg",
    "fedprox": "FedProx",
    "moon": "MOON",
    "feddyn": "FedDyn",
    "fedlws": "FedLWS",
}

# [P] Table 3: (η_λ, η_σ, η_ι, η_γ, η_υ, η_i); Table 4 caption: target accuracy; Table 4: (Acc, Time) per
# method in METHODS order (None = the target is never reached, "/" in the paper).
SETTINGS: dict[tuple[str, str], dict[str, Any]] = {
    ("lenet5", "fashion-mnist"): {
        "title": "LeNet/FMNIST",
        "eta": (1e-4, 1e-4, 1e-4, 1e-4, 1e-4, 0.005),
        "target": 0.70,
        "table4": [
            (0.858, 11603),
            (0.839, 15941),
            (0.799, 75323),
            (0.833, 42472),
            (0.827, 16953),
            (0.786, 14473),
            (0.858, 13753),
            (0.780, 97692),
            (0.778, 97692),
            (0.785, 97692),
            (0.842, 51223),
            (0.846, 20599),
        ],
    },
    ("lenet5", "cifar10"): {
        "title": "LeNet/CIFAR-10",
        "eta": (1e-3, 1e-3, 0.1, 0.1, 1e-3, 0.03),
        "target": 0.30,
        "table4": [
            (0.485, 8800),
            (0.483, 36565),
            (0.307, 365642),
            (0.411, 83973),
            (0.366, 9907),
            (0.306, 21562),
            (0.496, 63500),
            (0.450, 125514),
            (0.374, 126958),
            (0.305, 437531),
            (0.277, None),
            (0.488, 56019),
        ],
    },
    ("fedasmu_cnn", "cifar10"): {
        "title": "CNN/CIFAR-10",
        "eta": (1e-3, 1e-3, 1e-4, 0.1, 1e-3, 0.028),
        "target": 0.40,
        "table4": [
            (0.603, 10109),
            (0.491, 24931),
            (0.380, None),
            (0.477, 92246),
            (0.366, None),
            (0.509, 20415),
            (0.628, 44338),
            (0.562, 117794),
            (0.360, None),
            (0.478, 100302),
            (0.508, 43974),
            (0.570, 56019),
        ],
    },
    ("alexnet", "cifar10"): {
        "title": "AlexNet/CIFAR-10",
        "eta": (1e-4, 1e-4, 1e-4, 1e-4, 1e-4, 0.03),
        "target": 0.40,
        "table4": [
            (0.490, 12591),
            (0.415, 83693),
            (0.370, None),
            (0.450, 128015),
            (0.471, 27763),
            (0.410, 22198),
            (0.496, 56655),
            (0.446, 157678),
            (0.446, 141125),
            (0.440, 157678),
            (0.439, 144999),
            (0.458, 125514),
        ],
    },
    ("vgg11", "cifar10"): {
        "title": "VGG/CIFAR-10",
        "eta": (1e-4, 1e-4, 1e-4, 1e-4, 1e-4, 0.03),
        "target": 0.45,
        "table4": [
            (0.657, 47356),
            (0.645, 77530),
            (0.561, 97848),
            (0.548, 276352),
            (0.617, 192419),
            (0.417, None),
            (0.612, 228078),
            (0.519, 346890),
            (0.522, 346890),
            (0.522, 346890),
            (0.549, 195032),
            (0.643, 180782),
        ],
    },
    ("lenet5", "cifar100"): {
        "title": "LeNet/CIFAR-100",
        "eta": (1e-4, 1e-4, 1e-4, 1e-4, 1e-4, 0.03),
        "target": 0.13,
        "table4": [
            (0.183, 20737),
            (0.168, 102113),
            (0.106, None),
            (0.151, 110942),
            (0.174, 25791),
            (0.0836, None),
            (0.220, 98303),
            (0.167, 95306),
            (0.173, 93430),
            (0.170, 93430),
            (0.150, 70260),
            (0.181, 91686),
        ],
    },
    ("fedasmu_cnn", "cifar100"): {
        "title": "CNN/CIFAR-100",
        "eta": (1e-5, 1e-5, 1e-5, 1e-5, 1e-5, 0.013),
        "target": 0.15,
        "table4": [
            (0.279, 30569),
            (0.230, 37160),
            (0.146, None),
            (0.209, 103090),
            (0.202, 65736),
            (0.191, 94169),
            (0.293, 104844),
            (0.249, 73145),
            (0.244, 73145),
            (0.225, 252703),
            (0.189, 52874),
            (0.264, 108906),
        ],
    },
    ("resnet20", "cifar100"): {
        "title": "ResNet/CIFAR-100",
        "eta": (1e-4, 1e-4, 1e-4, 1e-4, 1e-4, 0.03),
        "target": 0.25,
        "table4": [
            (0.359, 16027),
            (0.316, 21107),
            (0.314, 35712),
            (0.280, 198797),
            (0.317, 27672),
            (0.195, None),
            (0.378, 35145),
            (0.298, 109680),
            (0.303, 109680),
            (0.304, 106021),
            (0.327, 73711),
            (0.352, 62891),
        ],
    },
    ("alexnet", "cifar100"): {
        "title": "AlexNet/CIFAR-100",
        "eta": (1e-4, 1e-4, 1e-4, 1e-4, 1e-4, 0.03),
        "target": 0.12,
        "table4": [
            (0.246, 12150),
            (0.204, 13717),
            (0.193, 17400),
            (0.243, 60864),
            (0.226, 27672),
            (0.173, 17508),
            (0.255, 34127),
            (0.204, 92558),
            (0.204, 91369),
            (0.197, 89297),
            (0.193, 103950),
            (0.226, 58802),
        ],
    },
    ("vgg11", "cifar100"): {
        "title": "VGG/CIFAR-100",
        "eta": (1e-4, 1e-4, 1e-4, 1e-4, 1e-4, 0.03),
        "target": 0.12,
        "table4": [
            (0.267, 83226),
            (0.168, 375236),
            (0.213, 120533),
            (0.131, 405906),
            (0.258, 167053),
            (0.187, 120426),
            (0.268, 243896),
            (0.115, None),
            (0.109, None),
            (0.112, None),
            (0.224, 307955),
            (0.177, 330701),
        ],
    },
    ("resnet20", "tiny-imagenet"): {
        "title": "ResNet/Tiny-ImageNet",
        "eta": (1e-4, 1e-4, 1e-4, 1e-4, 1e-4, 0.03),
        "target": 0.12,
        "table4": [
            (0.168, 22415),
            (0.143, 31288),
            (0.133, 78155),
            (0.125, 359899),
            (0.148, 43523),
            (0.116, None),
            (0.193, 69848),
            (0.145, 155023),
            (0.149, 151935),
            (0.151, 139444),
            (0.139, 103661),
            (0.176, 92180),
        ],
    },
}
SHORT = {"fashion-mnist": "fmnist", "cifar10": "cifar10", "cifar100": "cifar100", "tiny-imagenet": "tiny"}
QUICK_TRAININGS = {"alexnet": 6, "vgg11": 3}  # else 18 fastest-device trainings
FULL_TRAININGS = 300
DEVICES, LOCAL_EPOCHS, BATCH = 100, 5, 32
FASTEST_FLOPS = 1e9


@cache
def job_seconds(model: str, dataset: str, devices: int) -> float:
    """Compute time of one 5-epoch training of an average-size device at the fastest rate (measured FLOPs)."""
    from raysfl.models.config import ModelConfig
    from raysfl.models.flops import profile_split_model
    from raysfl.models.zoo import build_split_model

    info = DATASETS[dataset]
    c, h = info.channels, info.image_size
    prof = profile_split_model(build_split_model(ModelConfig(name=model), c, h, info.num_classes, seed=0))
    per_sample = prof.full_forward_flops + prof.full_backward_flops
    return LOCAL_EPOCHS * (info.train_size / devices) * per_sample / FASTEST_FLOPS


def method_params(method: str, eta: tuple[float, ...], extra: dict[str, Any]) -> dict[str, Any]:
    """Table 3's control learning rates for FedASMU/FedSSMU; the baselines' defaults otherwise."""
    if method not in ("fedasmu", "fedssmu"):
        return {}
    lam, sig, iota, gam, ups, _ = eta
    params: dict[str, Any] = {
        "local_epochs": LOCAL_EPOCHS,
        "tau": 99,
        "eta_lambda": lam,
        "eta_sigma": sig,
        "eta_iota": iota,
        "eta_gamma": gam,
        "eta_upsilon": ups,
    }
    if method == "fedasmu":
        params["trigger_period"] = 10.0
    return {**params, **extra}


def scenario(
    name: str,
    desc: str,
    model: str,
    dataset: str,
    method: str,
    *,
    devices: int = DEVICES,
    ratio: float = 5.0,
    kappa: float = 1.0,
    extra: dict[str, Any] | None = None,
    reference: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One scenario as plain data."""
    setting = SETTINGS[(model, dataset)]
    eta = setting["eta"]
    info = DATASETS[dataset]
    steps = LOCAL_EPOCHS * math.ceil(info.train_size / devices / BATCH)
    budget = FULL_TRAININGS * job_seconds(model, dataset, devices)
    sc: dict[str, Any] = {
        "name": name,
        "description": desc,
        "seed": 1,
        "data": {"dataset": dataset, "partition": "dirichlet", "alpha": 0.5},
        "model": {"name": model},
        "federation": {"num_clients": devices, "active_clients": 10},
        "train": {
            "global_iterations": 500,
            "local_iterations": steps,
            "batch_size": BATCH,
            "optimizer": "sgd",
            "lr": eta[5],
            "momentum": 0.0,
            "weight_decay": 0.0,
            "eval_every": 5 if method in ASYNC else 1,
            "max_emulated_s": round(budget, 1),
        },
        "algorithm": {"name": method, "params": method_params(method, eta, extra or {})},
        "system": {
            "compute": {
                "kind": "ratio",
                "ratio": ratio,
                "max_flops_per_s": FASTEST_FLOPS,
                "training_time": "per-device",
            },
            "link": {"kind": "uniform", "downlink_to_uplink": 5.0, "bandwidth_reduction": kappa},
        },
        "metrics": {"progress": True},
    }
    if reference:
        sc["reference"] = reference
    return sc


def quick(sc: dict[str, Any]) -> dict[str, Any]:
    """The `_quick` twin: a short common emulated-time budget; evaluate every 5 aggregations / round."""
    model, dataset = sc["model"]["name"], sc["data"]["dataset"]
    n = QUICK_TRAININGS.get(model, 18)
    budget = round(n * job_seconds(model, dataset, sc["federation"]["num_clients"]), 1)
    async_method = sc["algorithm"]["name"] in ASYNC
    return {
        **sc,
        "name": sc["name"] + "_quick",
        "description": sc["description"] + f" — quick budget ({budget:g} emulated s)",
        "train": {**sc["train"], "max_emulated_s": budget, "eval_every": 5 if async_method else 1},
        "metrics": {"progress": False},
    }


def write(folder: str, sc: dict[str, Any]) -> None:
    """Write the scenario and its quick twin."""
    path = OUT / folder
    path.mkdir(parents=True, exist_ok=True)
    for item in (sc, quick(sc)):
        header = (
            f"# {item['description']}\n# Generated by scripts/gen_fedasmu_scenarios.py; edit that script.\n"
        )
        (path / f"{item['name']}.toml").write_text(header + dumps_toml(item))


def available() -> list[str]:
    """The paper's methods registered right now."""
    return [m for m in METHODS if m in ALGORITHMS]


def table4() -> None:
    """Table 4: every registered method on every setting whose dataset raysfl knows."""
    for (model, dataset), setting in SETTINGS.items():
        if dataset not in DATASETS:
            continue
        for method in available():
            acc, time = setting["table4"][METHODS.index(method)]
            ref: dict[str, Any] = {
                "accuracy": round(100 * acc, 2),
                "target": setting["target"],
                "source": f"FedASMU Table 4, {setting['title']}, {LABEL[method]}; time to "
                f"{setting['target']:.2f}: " + ("not reached" if time is None else f"{time} (no unit)"),
            }
            if time is not None:
                ref["time_to_target"] = time
            name = f"{SHORT[dataset]}_{model}_{method}"
            desc = f"FedASMU Table 4: {LABEL[method]}, {setting['title']}"
            write("table4", scenario(name, desc, model, dataset, method, reference=ref))


def sweeps() -> None:
    """Figs. 6-8 on LeNet/FMNIST [A]: device count, heterogeneity ratio, bandwidth reduction."""
    variants = [
        ("k200", "200 devices (Fig. 6)", {"devices": 200}),
        ("k250", "250 devices (Fig. 6)", {"devices": 250}),
        ("r10", "compute ratio 1:10 (Fig. 7, moderate)", {"ratio": 10.0}),
        ("r40", "compute ratio 1:40 (Fig. 7, high)", {"ratio": 40.0}),
        ("bw50", "bandwidth 50× lower (Fig. 8)", {"kappa": 50.0}),
        ("bw100", "bandwidth 100× lower (§6.2.5)", {"kappa": 100.0}),
    ]
    for tag, what, kw in variants:
        for method in available():
            name = f"fmnist_lenet5_{method}_{tag}"
            desc = f"FedASMU paper sweep: {LABEL[method]}, LeNet/FMNIST, {what}"
            write("sweeps", scenario(name, desc, "lenet5", "fashion-mnist", method, **kw))


def ablation() -> None:
    """Fig. 9 and the request-slot study: LeNet and CNN on CIFAR-10."""
    variants = [
        ("da", "FedASMU-DA (fixed α controls)", {"learn_alpha": False}),
        ("fa", "FedASMU-FA (no fresh-model request)", {"request_slot": "none"}),
        ("0", "FedASMU-0 (both removed)", {"learn_alpha": False, "request_slot": "none"}),
        ("h1", "FedASMU with slot H1 (after the first epoch)", {"request_slot": "h1"}),
        ("h2", "FedASMU with slot H2 (midway)", {"request_slot": "h2"}),
        ("h3", "FedASMU with slot H3 (penultimate epoch)", {"request_slot": "h3"}),
    ]
    for model in ("lenet5", "fedasmu_cnn"):
        title = SETTINGS[(model, "cifar10")]["title"]
        for tag, what, extra in variants:
            name = f"cifar10_{model}_fedasmu_{tag}"
            desc = f"FedASMU paper Fig. 9: {what}, {title}"
            write("ablation", scenario(name, desc, model, "cifar10", "fedasmu", extra=extra))


def main() -> None:
    """Regenerate scenarios/fedasmu/ from scratch."""
    if OUT.exists():
        shutil.rmtree(OUT)
    table4()
    sweeps()
    ablation()


if __name__ == "__main__":
    main()
