"""Model section of a scenario: which zoo model, where it is split, which auxiliary head.

Tags follow ``shared/specs/README.md``: [P] stated in a paper, [C] what a reference code does, [A] an
implementation choice. Spec sections are cited as "GAS spec §10.9" (``specs/gas.md``), "CSE-FSL spec §4.2"
(``specs/cse-fsl.md``), "lightweight-FedSL spec §5.2" (``specs/lightweight-fedsl.md``) and "FedASMU spec
§4.2" (``specs/fedasmu.md``).

Names of splits and auxiliary heads depend on the model, so they are checked against the zoo by
:func:`raysfl.models.zoo.validate_model_config`, not by ``choices`` here.
"""

from __future__ import annotations

from dataclasses import dataclass

from raysfl.config import option

MODEL_NAMES = (
    "alexnet",
    "vgg16_bn",
    "vgg19",
    "resnet18",
    "vit_small",
    "cse_fsl_cifar10",
    "cse_fsl_femnist",
    "lenet5",
    "fedasmu_cnn",
    "resnet20",
    "vgg11",
)
"""The keys of :data:`raysfl.models.zoo.MODELS`, in the same order (the zoo checks this at import)."""

AUX_ACTIVATIONS = ("relu", "none")
"""The activations an auxiliary head may have between its layers (``model.aux_activation``)."""


@dataclass(frozen=True)
class ModelConfig:
    """Options of :func:`raysfl.models.zoo.build_split_model`.

    ``split`` and ``aux`` are names listed by the chosen :class:`raysfl.models.zoo.ModelEntry`; the
    model-specific options below only affect the model they name.
    """

    name: str = option("alexnet", choices=MODEL_NAMES, doc="zoo model (`raysfl describe model NAME`)")
    split: str = option("", doc="named cut point between client and server; '' = the model's default split")
    aux: str = option("", doc="auxiliary head on the client activation (CSE-FSL); '' = none")
    vgg19_pool_on_client: bool = option(
        True,
        doc="vgg19: the MaxPool closing the cut block runs on the client [A] lightweight-FedSL §5.2",
        applies={"name": ("vgg19",)},
    )
    vgg19_batch_norm: bool = option(
        True,
        doc="vgg19: BatchNorm after every conv (adds 2·C_out params each) [A] lightweight-FedSL §5.2",
        applies={"name": ("vgg19",)},
    )
    vgg19_width_divisor: int = option(
        1,
        ge=1,
        doc="vgg19: divide every conv and hidden FC width by this (1 = the paper's VGG-19); a small variant "
        "for quick CPU runs [A] lightweight-FedSL quick scenarios",
        applies={"name": ("vgg19",)},
    )
    alexnet_width_divisor: int = option(
        1,
        ge=1,
        le=32,
        doc="alexnet: divide every conv and hidden Linear width by this (1 = the GAS paper's AlexNet); a "
        "small variant with the same layers and cuts for CPU-sized runs [A] reproduction suite",
        applies={"name": ("alexnet",)},
    )
    vgg11_batch_norm: bool = option(
        True,
        doc="vgg11: BatchNorm after every conv (CIFAR-style VGG-11) [A] FedASMU spec A18",
        applies={"name": ("vgg11",)},
    )
    resnet18_stem: str = option(
        "imagenet",
        choices=("imagenet", "cifar"),
        doc="resnet18 stem: imagenet = 7×7/2 conv + max pool (64×8×8 after layer1 on 32×32), "
        "cifar = 3×3/1 conv (64×32×32) [A] GAS App. H leaves it open",
        applies={"name": ("resnet18",)},
    )
    vit_patch_size: int = option(
        4,
        ge=1,
        doc="vit_small: square patch side in pixels [A] GAS App. H leaves it open",
        applies={"name": ("vit_small",)},
    )
    vit_embed_dim: int = option(
        512,
        ge=8,
        doc="vit_small: token width, a multiple of the 8 heads [A] GAS App. H leaves it open",
        applies={"name": ("vit_small",)},
    )
    cse_fsl_cifar10_pool: str = option(
        "code",
        choices=("code", "paper"),
        doc="cse_fsl_cifar10: code = 3×3/2 max pools (padding 1), LRN before the second pool, as the "
        "authors' code [C]; paper = 2×2 max pools each followed by LRN, as §VI-A [P]; same shapes and "
        "counts [A] CSE-FSL spec §2.7-10",
        applies={"name": ("cse_fsl_cifar10",)},
    )
    aux_activation: str = option(
        "relu",
        choices=AUX_ACTIVATIONS,
        doc="activation between the 1×1 conv and the Linear of a cnn_mlp_* auxiliary head; the paper does "
        "not say [A] CSE-FSL spec §2.7-12",
    )
    cse_fsl_femnist_relu: bool = option(
        True,
        doc="cse_fsl_femnist: ReLU after each client conv as in Reddi et al.; False = authors' code [A] "
        "CSE-FSL spec §2.7-11",
        applies={"name": ("cse_fsl_femnist",)},
    )
