"""ViT-small of GAS Table 5: 6 pre-norm Transformer layers, 8 heads, MLP 512, split after layer 1.

GAS App. H [P]: "6 Transformer layers, 8 attention heads each, hidden MLP dimension 512, dropout 0.1 for the
Transformer layers and the embedding layer, split after the first Transformer layer". Patch size and token
width are not stated (GAS spec §9.5); they are options [A] (default 4 and 512). The rest of the layout is
not stated either and follows the common ViT [A]: pre-norm blocks, GELU in the MLP, a bias in the joint QKV
projection, a class token plus one token per patch with learned position embeddings, and a LayerNorm before
the head, which reads the class token.

Attention is written with explicit matrix products so that ``FlopCounterMode`` counts every multiply.
"""

from __future__ import annotations

import torch
from torch import nn

from raysfl.models.config import ModelConfig
from raysfl.models.split import LayerStack

DEPTH = 6
HEADS = 8
MLP_DIM = 512
DROPOUT = 0.1


class PatchEmbedding(nn.Module):
    """Non-overlapping patches → linear tokens, plus a class token and learned position embeddings."""

    def __init__(self, in_channels: int, image_size: int, patch_size: int, dim: int, dropout: float) -> None:
        super().__init__()
        self.proj = nn.Conv2d(in_channels, dim, kernel_size=patch_size, stride=patch_size)
        num_patches = (image_size // patch_size) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embedding = nn.Parameter(torch.zeros(1, num_patches + 1, dim))
        nn.init.normal_(self.cls_token, std=0.02)
        nn.init.normal_(self.pos_embedding, std=0.02)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Images ``(B, C, H, W)`` → tokens ``(B, 1 + patches, dim)``."""
        tokens = self.proj(x).flatten(2).transpose(1, 2)
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        return self.dropout(torch.cat([cls, tokens], dim=1) + self.pos_embedding)


class SelfAttention(nn.Module):
    """Multi-head scaled dot-product self-attention with a joint QKV projection.

    With ``engine.precision = "bfloat16"`` the attention products run under autocast too (``autocast_region``:
    :func:`raysfl.models.precision.use_autocast`), as the projections do; the softmax is on autocast's
    float32 list.
    """

    autocast_region = True

    def __init__(self, dim: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.attn_dropout = nn.Dropout(dropout)
        self.out_dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Tokens ``(B, N, dim)`` → tokens ``(B, N, dim)``."""
        b, n, d = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        weights = self.attn_dropout(torch.softmax((q @ k.transpose(-2, -1)) * self.scale, dim=-1))
        mixed = (weights @ v).transpose(1, 2).reshape(b, n, d)
        return self.out_dropout(self.out(mixed))


class TransformerBlock(nn.Module):
    """Pre-norm Transformer layer: ``x + attn(norm(x))`` then ``x + mlp(norm(x))`` (GELU MLP)."""

    def __init__(self, dim: int, heads: int, mlp_dim: int, dropout: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = SelfAttention(dim, heads, dropout)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(
            nn.Linear(dim, mlp_dim),
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(mlp_dim, dim),
            nn.Dropout(dropout),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Tokens ``(B, N, dim)`` → tokens ``(B, N, dim)``."""
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class ClassTokenHead(nn.Module):
    """Final LayerNorm and a Linear classifier on the class token."""

    def __init__(self, dim: int, num_classes: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Tokens ``(B, N, dim)`` → logits ``(B, num_classes)``."""
        return self.fc(self.norm(x[:, 0]))


def vit_small(cfg: ModelConfig, in_channels: int, image_size: int, num_classes: int) -> LayerStack:
    """ViT-small with cuts ``block1`` (default [P]) to ``block5`` after each Transformer layer (GAS App. H).

    The activation at ``block1`` is ``(1 + (image_size / patch)², dim)``: 65×512 on CIFAR-10 by default.

    Raises:
        ValueError: if the patch size does not divide the image size or the width is not a multiple of 8.
    """
    patch, dim = cfg.vit_patch_size, cfg.vit_embed_dim
    if image_size % patch:
        raise ValueError(f"vit_patch_size: {patch} does not divide the image size {image_size}")
    if dim % HEADS:
        raise ValueError(f"vit_embed_dim: {dim} is not a multiple of the {HEADS} heads")
    s = LayerStack((in_channels, image_size, image_size))
    s.add("embed", PatchEmbedding(in_channels, image_size, patch, dim, DROPOUT))
    for i in range(1, DEPTH + 1):
        s.add(f"block{i}", TransformerBlock(dim, HEADS, MLP_DIM, DROPOUT))
        if i < DEPTH:
            s.cut(f"block{i}")
    s.add("head", ClassTokenHead(dim, num_classes))
    return s
