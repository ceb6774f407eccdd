"""The split-model zoo: a literal registry of models with named split points and auxiliary heads.

Each :class:`ModelEntry` names a component builder that returns a :class:`~raysfl.models.split.LayerStack`;
:func:`build_split_model` builds it with a seeded, local random stream and cuts it at the configured split.
Every model adapts to the dataset's channels, image size and number of classes (feature sizes are probed,
never hard-coded); :func:`validate_model_config` reports what does not fit, each problem naming its field.

Example:
    >>> from raysfl.models.config import ModelConfig
    >>> model = build_split_model(ModelConfig(name="alexnet", split="L2"), 3, 32, 10, seed=0)
    >>> model.activation_shape
    (64, 8, 8)
    >>> sum(p.numel() for p in model.client.parameters())
    19392
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

from raysfl.config import ConfigError
from raysfl.models.alexnet import alexnet
from raysfl.models.config import MODEL_NAMES, ModelConfig
from raysfl.models.cse_fsl import cse_fsl_cifar10, cse_fsl_femnist
from raysfl.models.fedasmu import fedasmu_cnn, lenet5
from raysfl.models.heads import AUX_HEADS
from raysfl.models.resnet import resnet18, resnet20
from raysfl.models.split import LayerStack, SplitModel
from raysfl.models.vgg import vgg11, vgg16_bn, vgg19
from raysfl.models.vit import vit_small

Builder = Callable[[ModelConfig, int, int, int], LayerStack]
"""``(cfg, in_channels, image_size, num_classes) -> LayerStack`` with every split of the entry marked."""


@dataclass(frozen=True)
class ModelEntry:
    """One zoo model.

    Attributes:
        name: registry key (``model.name``).
        description: one line for ``raysfl describe``.
        splits: names of the cut points, shallow to deep.
        default_split: the split used when ``model.split`` is ''.
        aux_heads: names in :data:`raysfl.models.heads.AUX_HEADS` this model offers (``model.aux``).
        builder: component builder returning the full :class:`LayerStack`.
        source: where the layer list comes from (spec section, paper).
        inputs: input shapes ``(C, H, W)`` used by the source experiments.
        input_rule: which other inputs work (checked exactly by :func:`validate_model_config`).
        default_dataset: dataset name of the source experiment matching ``inputs[0]`` (a name of
            ``raysfl.data``; ``raysfl describe model`` uses it when no dataset is given).
    """

    name: str
    description: str
    splits: tuple[str, ...]
    default_split: str
    aux_heads: tuple[str, ...]
    builder: Builder
    source: str
    inputs: tuple[tuple[int, int, int], ...]
    input_rule: str
    default_dataset: str


_CSE_CIFAR_AUX = ("mlp", "cnn_mlp_54", "cnn_mlp_27", "cnn_mlp_14", "cnn_mlp_7")
_CSE_FEMNIST_AUX = ("mlp", "cnn_mlp_64", "cnn_mlp_32", "cnn_mlp_8", "cnn_mlp_2")

MODELS: dict[str, ModelEntry] = {
    "alexnet": ModelEntry(
        name="alexnet",
        description="GAS AlexNet-like net: 5 conv + 3 FC, no BN (also FedASMU's AlexNet [A])",
        splits=("L1", "L2", "L3", "L4"),
        default_split="L2",
        aux_heads=("mlp",),
        builder=alexnet,
        source="GAS spec §10.9 (code utils/network.py, AlexNet_Split/L1..L4); FedASMU spec A18",
        inputs=((3, 32, 32), (1, 28, 28)),
        input_rule="any channels; H = W >= 12",
        default_dataset="cifar10",
    ),
    "vgg16_bn": ModelEntry(
        name="vgg16_bn",
        description="GAS VGG16 with BatchNorm, classifier 512-4096-4096-M; cuts after conv 4/7/10/13 + pool",
        splits=("L1", "L2", "L3", "L4"),
        default_split="L2",
        aux_heads=("mlp",),
        builder=vgg16_bn,
        source="GAS spec §10.9 (code utils/VGG16_split/L1..L4), Table 4",
        inputs=((3, 32, 32),),
        input_rule="any channels; H = W >= 32 (five 2x2 pools)",
        default_dataset="cifar10",
    ),
    "vgg19": ModelEntry(
        name="vgg19",
        description="VGG-19 (config E, BN option), classifier 512-512-M; L_c = 4, 8, 12 client conv layers",
        splits=("Lc4", "Lc8", "Lc12"),
        default_split="Lc8",
        aux_heads=("mlp",),
        builder=vgg19,
        source="lightweight-FedSL spec §5.2",
        inputs=((3, 32, 32),),
        input_rule="any channels; H = W >= 32 (five 2x2 pools)",
        default_dataset="cifar10",
    ),
    "resnet18": ModelEntry(
        name="resnet18",
        description="ResNet18 (stem option), split after the first residual stage",
        splits=("layer1", "layer2", "layer3"),
        default_split="layer1",
        aux_heads=("mlp",),
        builder=resnet18,
        source="GAS App. H, Table 5 (GAS spec §9.5)",
        inputs=((3, 32, 32),),
        input_rule="any channels and size",
        default_dataset="cifar10",
    ),
    "vit_small": ModelEntry(
        name="vit_small",
        description="ViT-small: 6 Transformer layers, 8 heads, MLP 512, dropout 0.1; split after layer 1",
        splits=("block1", "block2", "block3", "block4", "block5"),
        default_split="block1",
        aux_heads=("mlp",),
        builder=vit_small,
        source="GAS App. H, Table 5 (GAS spec §9.5)",
        inputs=((3, 32, 32),),
        input_rule="any channels; vit_patch_size divides H = W",
        default_dataset="cifar10",
    ),
    "cse_fsl_cifar10": ModelEntry(
        name="cse_fsl_cifar10",
        description="CSE-FSL CIFAR-10 net: 2 conv blocks (client) + 3 FC (server)",
        splits=("conv2",),
        default_split="conv2",
        aux_heads=_CSE_CIFAR_AUX,
        builder=cse_fsl_cifar10,
        source="CSE-FSL spec §4.2, Table III",
        inputs=((3, 24, 24),),
        input_rule="any channels and size (24x24 crops in the paper)",
        default_dataset="cifar10",
    ),
    "cse_fsl_femnist": ModelEntry(
        name="cse_fsl_femnist",
        description="CSE-FSL F-EMNIST net (Reddi et al.): conv-conv-pool-dropout (client) + 2 FC (server)",
        splits=("conv2",),
        default_split="conv2",
        aux_heads=_CSE_FEMNIST_AUX,
        builder=cse_fsl_femnist,
        source="CSE-FSL spec §4.2, Table IV",
        inputs=((1, 28, 28),),
        input_rule="any channels; H = W >= 6",
        default_dataset="femnist",
    ),
    "lenet5": ModelEntry(
        name="lenet5",
        description="LeNet5 with ReLU and max pooling; inputs under 32x32 are padded to 32",
        splits=("conv1", "conv2"),
        default_split="conv2",
        aux_heads=("mlp",),
        builder=lenet5,
        source="FedASMU spec §4.2",
        inputs=((1, 28, 28), (3, 32, 32)),
        input_rule="any channels; H = W >= 1",
        default_dataset="fashion-mnist",
    ),
    "fedasmu_cnn": ModelEntry(
        name="fedasmu_cnn",
        description="FedASMU Table 2 CNN: conv 64 k2, conv 32 k2, dense",
        splits=("conv1", "conv2"),
        default_split="conv2",
        aux_heads=("mlp",),
        builder=fedasmu_cnn,
        source="FedASMU spec §4.2 (Table 2), A17",
        inputs=((3, 32, 32),),
        input_rule="any channels; H = W >= 3",
        default_dataset="cifar10",
    ),
    "resnet20": ModelEntry(
        name="resnet20",
        description="CIFAR ResNet20 (3x3 blocks of 16/32/64, option-A shortcuts)",
        splits=("stage1", "stage2"),
        default_split="stage1",
        aux_heads=("mlp",),
        builder=resnet20,
        source="FedASMU spec §4.2, A18",
        inputs=((3, 32, 32), (3, 64, 64)),
        input_rule="any channels and size",
        default_dataset="cifar10",
    ),
    "vgg11": ModelEntry(
        name="vgg11",
        description="CIFAR-style VGG-11 (config A, BN option), one Linear classifier",
        splits=("block1", "block2", "block3", "block4"),
        default_split="block2",
        aux_heads=("mlp",),
        builder=vgg11,
        source="FedASMU spec §4.2, A18",
        inputs=((3, 32, 32),),
        input_rule="any channels; H = W >= 32 (five 2x2 pools)",
        default_dataset="cifar10",
    ),
}
"""Model name → entry; the keys equal :data:`raysfl.models.config.MODEL_NAMES`."""

if tuple(MODELS) != MODEL_NAMES:
    raise RuntimeError(
        "invariant broken: raysfl.models.config.MODEL_NAMES must list the keys of MODELS in order"
    )


def get_entry(name: str) -> ModelEntry:
    """The zoo entry ``name``.

    Raises:
        KeyError: if ``name`` is unknown; the message lists the zoo.
    """
    if name not in MODELS:
        raise KeyError(f"{name!r} is not a zoo model; choose one of {_choices(MODELS)}")
    return MODELS[name]


def _choices(names: Iterable[str]) -> str:
    return ", ".join(repr(n) for n in names)


def _first_line(err: Exception) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _field_problems(cfg: ModelConfig, in_channels: int, image_size: int, num_classes: int) -> list[str]:
    """Problems found from names and sizes alone, without building anything."""
    if cfg.name not in MODELS:
        return [f"model.name: {cfg.name!r} is not a zoo model; choose one of {_choices(MODELS)}"]
    entry = MODELS[cfg.name]
    problems = []
    if cfg.split and cfg.split not in entry.splits:
        problems.append(
            f"model.split: {cfg.split!r} is not a split of {entry.name}; "
            f"choose one of {_choices(entry.splits)}"
        )
    if cfg.aux and cfg.aux not in entry.aux_heads:
        problems.append(
            f"model.aux: {cfg.aux!r} is not an auxiliary head of {entry.name}; "
            f"choose one of {_choices(entry.aux_heads)}"
        )
    for what, value in (
        ("input channels", in_channels),
        ("image size", image_size),
        ("classes", num_classes),
    ):
        if value < 1:
            problems.append(
                f"model.name: {entry.name} needs at least 1 for the dataset's {what}, got {value}"
            )
    return problems


def _split_name(cfg: ModelConfig) -> str:
    """The cut ``cfg`` asks for: ``model.split``, or the model's default split when it is not set."""
    return cfg.split or MODELS[cfg.name].default_split


def _build_parts(
    cfg: ModelConfig, in_channels: int, image_size: int, num_classes: int
) -> tuple[torch.nn.Sequential, torch.nn.Sequential, tuple[int, ...], torch.nn.Module | None]:
    """``(client, server, activation_shape, aux)`` on the current default device, in a fixed build order.

    The layer stack is built first, then cut, then the auxiliary head: the order in which parameters draw
    from the random stream. ``cfg`` must have passed :func:`_field_problems`.

    Raises:
        ConfigError: with one problem naming its field when an option or a layer does not fit the input.
    """
    entry = MODELS[cfg.name]
    try:
        stack = entry.builder(cfg, in_channels, image_size, num_classes)
    except ValueError as err:  # a model option that does not fit; the message starts with the option
        raise ConfigError([f"model.{_first_line(err)}"]) from None
    except RuntimeError as err:  # a layer that cannot take the feature map it receives
        shape = f"{in_channels}×{image_size}×{image_size}"
        why = _first_line(err)
        raise ConfigError(  # the cause stays: build_split_model tells shape errors from others by it
            [f"model.name: {entry.name} cannot take {shape} inputs ({entry.input_rule}): {why}"]
        ) from err
    client, server, activation_shape = stack.split(_split_name(cfg))
    aux = None
    if cfg.aux:
        try:
            aux = AUX_HEADS[cfg.aux](activation_shape, num_classes, activation=cfg.aux_activation)
        except ValueError as err:
            raise ConfigError([f"model.aux: {_first_line(err)}"]) from None
    return client, server, activation_shape, aux


def validate_model_config(cfg: ModelConfig, in_channels: int, image_size: int, num_classes: int) -> list[str]:
    """Problems with ``cfg`` for inputs of shape ``(in_channels, image_size, image_size)``; [] when it fits.

    Each problem names its field, e.g. ``"model.split: 'L7' is not a split of alexnet; choose one of 'L1',
    'L2', 'L3', 'L4'"``. When names are valid, the model is built on the ``meta`` device (no memory, no
    random numbers drawn) to check that every layer accepts the input size. :func:`build_split_model`
    makes the same checks while it builds, so it does not call this.
    """
    problems = _field_problems(cfg, in_channels, image_size, num_classes)
    if problems:
        return problems
    with torch.device("meta"):
        try:
            _build_parts(cfg, in_channels, image_size, num_classes)
        except ConfigError as err:
            return err.problems
    return []


def build_split_model(
    cfg: ModelConfig, in_channels: int, image_size: int, num_classes: int, seed: int
) -> SplitModel:
    """Build the zoo model ``cfg.name`` cut at ``cfg.split`` (or its default), with ``cfg.aux`` attached.

    Parameters are a deterministic function of ``seed``: the layers (then the auxiliary head) are initialised
    on the CPU inside :func:`torch.random.fork_rng` seeded with ``seed``, so the global random state is left
    untouched; move the parts with ``.to(device)``. Under ``with torch.device("meta")`` the model is built on
    the meta device instead (shapes only, for :func:`raysfl.models.flops.profile_split_model`). The full model
    does not depend on the split (the whole stack is always built, in the same order).

    The checks of :func:`validate_model_config` are made on the real build, not on a separate meta-device
    build first: a process's first operations on the meta device import ``torch._dynamo`` and cost about
    0.9 s, which a process that makes no optimizer (an FL server) would otherwise pay
    (``benchmarks/RESULTS.md``). A layer's ``RuntimeError`` is confirmed on the meta device before it is
    reported as a shape problem; one that the meta build does not repeat (out of memory) is raised as it is.

    Raises:
        ConfigError: listing the problems :func:`validate_model_config` reports.
    """
    problems = _field_problems(cfg, in_channels, image_size, num_classes)
    if problems:
        raise ConfigError(problems)
    entry = MODELS[cfg.name]
    device = "meta" if torch.empty(0).is_meta else "cpu"  # CPU init: only the CPU generator is forked
    try:
        with torch.random.fork_rng(devices=[]), torch.device(device):
            torch.manual_seed(seed)
            client, server, activation_shape, aux = _build_parts(cfg, in_channels, image_size, num_classes)
    except ConfigError as err:
        cause = err.__cause__
        if not isinstance(cause, RuntimeError):
            raise
        confirmed = validate_model_config(cfg, in_channels, image_size, num_classes)
        if not confirmed:  # the layers fit on the meta device: a failure of this machine (memory)
            raise cause from None
        raise ConfigError(confirmed) from None
    return SplitModel(
        client=client,
        server=server,
        aux=aux,
        name=entry.name,
        split=_split_name(cfg),
        activation_shape=activation_shape,
        input_shape=(in_channels, image_size, image_size),
        aux_name=cfg.aux,
        num_classes=num_classes,
    )
