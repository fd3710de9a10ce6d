"""The PyTorch twin of samples/nets/gpt-tiny.mgt, for tests/oracle/test_gpt.py
and scripts/bench-compare: the same layers under the same names, so its
state_dict keys are the mge parameter names. Attention is written out
(softmax(q k^T / sqrt(d) + causal mask) v), as torch 1.13 has no fused
scaled_dot_product_attention."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, WIDTH, HEADS, CONTEXT, HIDDEN, BLOCKS = 256, 64, 4, 64, 256, 2


class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(WIDTH, WIDTH)
        self.k = nn.Linear(WIDTH, WIDTH)
        self.v = nn.Linear(WIDTH, WIDTH)
        self.proj = nn.Linear(WIDTH, WIDTH)

    def forward(self, x):
        n, s, _ = x.shape
        dh = WIDTH // HEADS

        def heads(t):
            return t.reshape(n, s, HEADS, dh).transpose(1, 2)

        q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
        w = q @ k.transpose(-1, -2) / math.sqrt(dh)
        mask = torch.ones(s, s, dtype=torch.bool).triu(1)
        w = w.masked_fill(mask, float("-inf")).softmax(-1)
        return self.proj((w @ v).transpose(1, 2).reshape(n, s, WIDTH))


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(WIDTH, HIDDEN)
        self.proj = nn.Linear(HIDDEN, WIDTH)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(WIDTH)
        self.attn = Attn()
        self.ln2 = nn.LayerNorm(WIDTH)
        self.mlp = Mlp()

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GptTiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok_emb = nn.Embedding(VOCAB, WIDTH)
        self.pos_emb = nn.Embedding(CONTEXT, WIDTH)
        self.blocks = nn.ModuleList([Block() for _ in range(BLOCKS)])
        self.ln_f = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, tokens):
        h = self.tok_emb(tokens) + self.pos_emb(torch.arange(tokens.shape[1]))
        for b in self.blocks:
            h = b(h)
        return self.head(self.ln_f(h))

    def loss(self, tokens, targets):
        return F.cross_entropy(self(tokens).transpose(1, 2), targets)
