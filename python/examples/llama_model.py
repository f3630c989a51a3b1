"""A small Llama-style decoder in plain PyTorch that trains on packed documents (no transformers needed).

One rank's input is a flat sequence of rows: tokens [rows] and each row's position in its document
[rows] (fulcrum.torch.packed.PackedRows.positions()). Everything but attention is per row; attention is
the ``PackedAttention`` callable the caller passes to ``forward``, so the same model runs on one process
(``reference_attention(rows)``) and distributed (``fulcrum.torch.attention`` over the step's plan):

    model = LlamaModel(LlamaConfig())
    logits = model(tokens, rows.positions(), attention)   # [rows, vocab]
    loss_sum = token_loss_sum(logits, labels)

Llama's pieces: token embedding, per layer RMSNorm -> attention with RoPE (rotate-half convention, as in
transformers) and grouped-query heads -> residual, RMSNorm -> SwiGLU MLP -> residual; a final RMSNorm and
the LM head (tied to the embedding or not).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from fulcrum.torch.packed import PackedAttention
from torch import nn

IGNORE = -100  # label of a row that predicts nothing (a document's last token)


@dataclass(frozen=True)
class LlamaConfig:
    vocab_size: int = 512
    hidden: int = 128
    layers: int = 2
    q_heads: int = 4
    kv_heads: int = 2
    head_dim: int = 32
    ffn_hidden: int = 344
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    tie_embeddings: bool = True
    init_std: float = 0.02


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotates x [rows, heads, head_dim] by each row's angles (cos, sin [rows, head_dim])."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos[:, None] + rotated * sin[:, None]


class Attention(nn.Module):
    def __init__(self, c: LlamaConfig) -> None:
        super().__init__()
        self.c = c
        self.q_proj = nn.Linear(c.hidden, c.q_heads * c.head_dim, bias=False)
        self.k_proj = nn.Linear(c.hidden, c.kv_heads * c.head_dim, bias=False)
        self.v_proj = nn.Linear(c.hidden, c.kv_heads * c.head_dim, bias=False)
        self.o_proj = nn.Linear(c.q_heads * c.head_dim, c.hidden, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                attention: PackedAttention) -> torch.Tensor:
        rows, c = x.shape[0], self.c
        q = rope(self.q_proj(x).view(rows, c.q_heads, c.head_dim), cos, sin)
        k = rope(self.k_proj(x).view(rows, c.kv_heads, c.head_dim), cos, sin)
        v = self.v_proj(x).view(rows, c.kv_heads, c.head_dim)
        o = attention(q.contiguous(), k.contiguous(), v.contiguous(), scale=c.head_dim**-0.5)
        return self.o_proj(o.reshape(rows, c.q_heads * c.head_dim))


class SwiGLU(nn.Module):
    def __init__(self, c: LlamaConfig) -> None:
        super().__init__()
        self.gate = nn.Linear(c.hidden, c.ffn_hidden, bias=False)
        self.up = nn.Linear(c.hidden, c.ffn_hidden, bias=False)
        self.down = nn.Linear(c.ffn_hidden, c.hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(nn.functional.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    def __init__(self, c: LlamaConfig) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(c.hidden, c.norm_eps)
        self.attention = Attention(c)
        self.mlp_norm = RMSNorm(c.hidden, c.norm_eps)
        self.mlp = SwiGLU(c)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                attention: PackedAttention) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), cos, sin, attention)
        return x + self.mlp(self.mlp_norm(x))


class LlamaModel(nn.Module):
    def __init__(self, c: LlamaConfig) -> None:
        super().__init__()
        if c.q_heads % c.kv_heads != 0 or c.head_dim % 2 != 0:
            raise ValueError(f"q_heads = {c.q_heads}, kv_heads = {c.kv_heads}, head_dim = {c.head_dim}: q_heads "
                             "must be a multiple of kv_heads and head_dim even")
        self.c = c
        self.embed = nn.Embedding(c.vocab_size, c.hidden)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.layers))
        self.norm = RMSNorm(c.hidden, c.norm_eps)
        self.lm_head = nn.Linear(c.hidden, c.vocab_size, bias=False)
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=c.init_std)
        if c.tie_embeddings:
            self.lm_head.weight = self.embed.weight
        inverse_frequency = c.rope_theta ** -(torch.arange(0, c.head_dim, 2, dtype=torch.float64) / c.head_dim)
        self.register_buffer("inverse_frequency", inverse_frequency.float(), persistent=False)

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor, attention: PackedAttention) -> torch.Tensor:
        """tokens, positions: int64 [rows]; returns the logits [rows, vocab]."""
        angles = positions.to(torch.float32)[:, None] * self.inverse_frequency[None, :]
        angles = torch.cat((angles, angles), dim=-1)  # [rows, head_dim], rotate-half pairs (i, i + head_dim/2)
        cos, sin = angles.cos(), angles.sin()
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, cos, sin, attention)
        return self.lm_head(self.norm(x))


def token_loss_sum(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The sum (not the mean) of the rows' next-token cross-entropies; rows labelled IGNORE add nothing.
    Summing lets ranks add their sums and divide once by the global count: the single-process mean."""
    return nn.functional.cross_entropy(logits.float(), labels, ignore_index=IGNORE, reduction="sum")
