"""The default small transformer: a decoder-only model over bytes, with a KV cache.

About 3.2M parameters at the defaults (4 layers, width 256). Prompts of different lengths are
left-padded; positions are counted per sequence and padding is masked out of attention, so a
sequence's tokens do not depend on what it is batched with. Positions enter as rotary
embeddings of queries and keys (relative offsets), not as a learned table of absolute
positions: with a table, positions that demonstrations never reached (a longer prompt at a
level with tests only, a revision prompt with the last attempt in it) were untrained, and the
model wrote garbage or nothing there. On CUDA compute runs under bf16
autocast (weights stay fp32 for the optimizer); on CPU everything is fp32.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from policies.neural import Sample
from policies.tokenizer import ByteTokenizer

__all__ = ["TransformerConfig", "TransformerPolicy"]

KVCache = list[tuple[torch.Tensor, torch.Tensor]]


@dataclasses.dataclass(frozen=True)
class TransformerConfig:
    vocab_size: int = ByteTokenizer.vocab_size
    d_model: int = 256
    n_layers: int = 4
    n_heads: int = 4
    max_len: int = 512

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} must be a multiple of n_heads {self.n_heads}")
        if (self.d_model // self.n_heads) % 2:
            raise ValueError(
                f"d_model / n_heads must be even (rotary positions turn pairs), got "
                f"{self.d_model} / {self.n_heads}"
            )


ROPE_BASE = 10_000.0


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of `x` [B, H, T, D]: each pair (i, i + D/2) turned by its angle."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class _Block(nn.Module):
    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.heads = cfg.n_heads
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, 4 * cfg.d_model),
            nn.GELU(),
            nn.Linear(4 * cfg.d_model, cfg.d_model),
        )

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor,
        rotary: tuple[torch.Tensor, torch.Tensor],
        past: tuple[torch.Tensor, torch.Tensor] | None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        q, k = _rotate(q, *rotary), _rotate(k, *rotary)  # the cache holds rotated keys
        if past is not None:
            k = torch.cat([past[0], k], dim=2)
            v = torch.cat([past[1], v], dim=2)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x)), (k, v)


class _Decoder(nn.Module):
    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab_size, cfg.d_model)
        head_dim = cfg.d_model // cfg.n_heads
        exponents = torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim
        # Derived from the config, not learned: kept out of the state dict.
        self.inv_freq: torch.Tensor
        self.register_buffer("inv_freq", ROPE_BASE**-exponents, persistent=False)
        self.blocks = nn.ModuleList(_Block(cfg) for _ in range(cfg.n_layers))
        self.ln = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)

    def forward(
        self,
        tokens: torch.Tensor,
        positions: torch.Tensor,
        key_valid: torch.Tensor,
        cache: KVCache | None = None,
    ) -> tuple[torch.Tensor, KVCache]:
        """Logits for `tokens` [B, T] after `cache`; `key_valid` [B, S+T] marks real keys."""
        t = tokens.shape[1]
        s = key_valid.shape[1]
        # Causal over the batch's shared timeline; pads are never keys, except that every query
        # sees itself so that a padded query row is never fully masked (SDPA would give NaN).
        timeline = torch.arange(s, device=tokens.device)
        query_at = timeline[s - t :].unsqueeze(1)
        causal = timeline.unsqueeze(0) <= query_at
        mask = causal.unsqueeze(0) & key_valid.unsqueeze(1)
        mask = mask | (timeline.unsqueeze(0) == query_at).unsqueeze(0)
        angles = positions.unsqueeze(-1).float() * self.inv_freq  # [B, T, D/2]
        rotary = (angles.cos().unsqueeze(1), angles.sin().unsqueeze(1))
        x = self.tok(tokens)
        new_cache: KVCache = []
        for i, block in enumerate(self.blocks):
            x, kv = block(x, mask.unsqueeze(1), rotary, cache[i] if cache is not None else None)
            new_cache.append(kv)
        return self.head(self.ln(x)).float(), new_cache


@dataclasses.dataclass
class _Decoding:
    """A batch mid-decode (implements `policies.neural.Decoding`)."""

    cache: KVCache
    key_valid: torch.Tensor
    next_pos: torch.Tensor
    last: torch.Tensor
    finished: torch.Tensor
    out_tokens: list[list[int]]
    out_logprobs: list[list[float]]
    out_versions: list[list[int]]
    max_new_tokens: int
    temperature: float
    generator: torch.Generator | None

    @property
    def done(self) -> bool:
        return bool(self.finished.all())

    @property
    def size(self) -> int:
        return len(self.out_tokens)

    def samples(self) -> list[Sample]:
        return [
            Sample(list(t), list(lp), list(v))
            for t, lp, v in zip(self.out_tokens, self.out_logprobs, self.out_versions, strict=True)
        ]


class TransformerPolicy:
    """`NeuralPolicy` over `_Decoder`; CUDA with bf16 autocast when available, else CPU."""

    def __init__(
        self,
        config: TransformerConfig | None = None,
        *,
        device: str | torch.device | None = None,
        seed: int = 0,
    ) -> None:
        self.config = config or TransformerConfig()
        self._device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.model = _Decoder(self.config).to(self._device)
        self.tokenizer = ByteTokenizer()
        self._version = 0

    @property
    def version(self) -> int:
        return self._version

    @version.setter
    def version(self, value: int) -> None:
        self._version = value

    @property
    def device(self) -> torch.device:
        return self._device

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    def _autocast(self) -> torch.autocast:
        return torch.autocast("cuda", dtype=torch.bfloat16, enabled=self._device.type == "cuda")

    # -- generation ----------------------------------------------------------------------------

    @torch.inference_mode()
    def start(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
        seed: int | None = None,
    ) -> _Decoding:
        if not prompts or any(len(p) == 0 for p in prompts):
            raise ValueError("every prompt needs at least one token")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        longest = max(len(p) for p in prompts)
        if longest + max_new_tokens > self.config.max_len:
            raise ValueError(f"prompt plus completion exceeds max_len {self.config.max_len}")
        dev = self._device
        pad = self.tokenizer.pad
        tokens = torch.tensor([[pad] * (longest - len(p)) + list(p) for p in prompts], device=dev)
        valid = torch.tensor(
            [[False] * (longest - len(p)) + [True] * len(p) for p in prompts], device=dev
        )
        positions = (valid.long().cumsum(1) - 1).clamp(min=0)
        generator = None
        if seed is not None:
            generator = torch.Generator(device=dev)
            generator.manual_seed(seed)
        with self._autocast():
            logits, cache = self.model(tokens, positions, valid)
        n = len(prompts)
        state = _Decoding(
            cache=cache,
            key_valid=valid,
            next_pos=positions[:, -1] + 1,
            last=torch.zeros(n, dtype=torch.long, device=dev),
            finished=torch.zeros(n, dtype=torch.bool, device=dev),
            out_tokens=[[] for _ in range(n)],
            out_logprobs=[[] for _ in range(n)],
            out_versions=[[] for _ in range(n)],
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            generator=generator,
        )
        self._sample(state, logits[:, -1])
        return state

    @torch.inference_mode()
    def advance(self, decoding: object, steps: int) -> int:
        state = decoding
        if not isinstance(state, _Decoding):
            raise TypeError(
                f"not a decoding started by TransformerPolicy: {type(decoding).__name__}"
            )
        made = 0
        for _ in range(steps):
            if state.done:
                break
            live = ~state.finished
            state.key_valid = torch.cat([state.key_valid, live.unsqueeze(1)], dim=1)
            with self._autocast():
                logits, state.cache = self.model(
                    state.last.unsqueeze(1),
                    state.next_pos.unsqueeze(1),
                    state.key_valid,
                    state.cache,
                )
            state.next_pos = state.next_pos + 1
            made += self._sample(state, logits[:, -1])
        return made

    def _sample(self, state: _Decoding, logits: torch.Tensor) -> int:
        if state.temperature > 0:
            logp = torch.log_softmax(logits / state.temperature, dim=-1)
            chosen = torch.multinomial(logp.exp(), 1, generator=state.generator).squeeze(1)
        else:  # greedy; the log-probability is the model's own (temperature 1)
            logp = torch.log_softmax(logits, dim=-1)
            chosen = logp.argmax(dim=-1)
        picked = logp.gather(1, chosen.unsqueeze(1)).squeeze(1)
        made = 0
        chosen_l, picked_l = chosen.tolist(), picked.tolist()
        finished = state.finished.tolist()
        for i in range(state.size):
            if finished[i]:
                continue
            state.out_tokens[i].append(chosen_l[i])
            state.out_logprobs[i].append(picked_l[i])
            state.out_versions[i].append(self._version)
            made += 1
            if (
                chosen_l[i] == self.tokenizer.eos
                or len(state.out_tokens[i]) >= state.max_new_tokens
            ):
                finished[i] = True
        state.finished = torch.tensor(finished, device=self._device)
        state.last = chosen
        return made

    # -- training --------------------------------------------------------------------------------

    def token_logprobs(
        self,
        prompts: Sequence[Sequence[int]],
        completions: Sequence[Sequence[int]],
        *,
        temperature: float = 1.0,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if len(prompts) != len(completions):
            raise ValueError("prompts and completions differ in number")
        # Right-padded [prompt | completion]; the logit at position j predicts token j + 1.
        dev = self._device
        pad = self.tokenizer.pad
        seqs = [list(p) + list(c) for p, c in zip(prompts, completions, strict=True)]
        width = max(len(s) for s in seqs)
        tokens = torch.tensor([s + [pad] * (width - len(s)) for s in seqs], device=dev)
        valid = torch.tensor(
            [[True] * len(s) + [False] * (width - len(s)) for s in seqs], device=dev
        )
        positions = torch.arange(width, device=dev).expand(len(seqs), width)
        with self._autocast():
            logits, _ = self.model(tokens, positions, valid)
        scale = temperature if temperature > 0 else 1.0
        logp_all = torch.log_softmax(logits[:, :-1] / scale, dim=-1)
        next_tok = tokens[:, 1:].clamp(max=self.config.vocab_size - 1)
        logp_next = logp_all.gather(2, next_tok.unsqueeze(2)).squeeze(2)
        longest = max(max((len(c) for c in completions), default=0), 1)
        out = torch.zeros(len(seqs), longest, device=dev)
        mask = torch.zeros(len(seqs), longest, device=dev)
        rows, cols, src = [], [], []
        for i, (p, c) in enumerate(zip(prompts, completions, strict=True)):
            for j in range(len(c)):
                rows.append(i)
                cols.append(j)
                src.append(len(p) - 1 + j)
        if rows:
            r = torch.tensor(rows, device=dev)
            out = out.index_put(
                (r, torch.tensor(cols, device=dev)), logp_next[r, torch.tensor(src, device=dev)]
            )
            mask[rows, cols] = 1.0
        return out, mask

    def parameters(self) -> Iterator[nn.Parameter]:
        return self.model.parameters()

    def train(self, mode: bool = True) -> object:
        return self.model.train(mode)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def load_state_dict(self, state: Mapping[str, torch.Tensor], version: int) -> None:
        self.model.load_state_dict(dict(state))
        self._version = version


def param_count_label(policy: TransformerPolicy) -> str:
    """'3.2M' style, for tables."""
    n = policy.num_parameters()
    return f"{n / 1e6:.1f}M" if n >= 1e5 else f"{n / 1e3:.0f}k" if n >= 1e3 else str(n)
