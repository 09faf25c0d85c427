"""The default small transformer: a decoder-only model over bytes, with a KV cache.

About 3.2M parameters at the defaults (4 layers, width 256). Prompts of different lengths are
left-padded; positions are counted per sequence and padding is masked out of attention, so a
sequence's tokens do not depend on what it is batched with. Positions enter as rotary
embeddings of queries and keys (relative offsets), not as a learned table of absolute
positions: with a table, positions that demonstrations never reached (a longer prompt at a
level with tests only, a revision prompt with the last attempt in it) were untrained, and the
model wrote garbage or nothing there. On CUDA compute runs under bf16
autocast (weights stay fp32 for the optimizer); on CPU everything is fp32, except in a policy
built with `dtype=torch.bfloat16`: its weights are stored in bf16 and every product runs in it.
That is for the models that only infer (the RL generator's copy, the KL reference): on a CPU
that multiplies bf16 in hardware it generates about 1.6 times as fast, where autocast's casts
around each product made it slower (docs/benchmarks.md). Logits and log-probabilities are fp32
either way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import nn

from policies.neural import Sample
from policies.tokenizer import ByteTokenizer

__all__ = ["TransformerConfig", "TransformerPolicy", "cpu_multiplies_bf16"]


@dataclasses.dataclass
class _LayerCache:
    """One layer's rotated keys and values for a decoding batch, [B, H, capacity, D/H] each,
    allocated once at the first write (in the dtype autocast gives them) and written in place:
    growing them by concatenation copied the whole cache at every decoding step."""

    capacity: int
    k: torch.Tensor | None = None
    v: torch.Tensor | None = None

    def write(self, at: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store keys and values for positions `at`..; return every key and value so far."""
        if self.k is None or self.v is None:
            b, h, _, d = k.shape
            self.k = k.new_zeros(b, h, self.capacity, d)
            self.v = v.new_zeros(b, h, self.capacity, d)
        end = at + k.shape[2]
        self.k[:, :, at:end] = k
        self.v[:, :, at:end] = v
        return self.k[:, :, :end], self.v[:, :, :end]

    def take(self, rows: torch.Tensor) -> None:
        """Keep these rows, in this order (a row may come more than once)."""
        if self.k is not None and self.v is not None:
            self.k, self.v = self.k[rows], self.v[rows]


class _KeyStore(Protocol):
    def write(
        self, at: int, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]: ...


class _KeepKeys:
    """A stem pass (training): keeps each layer's rotated keys and values, gradient attached."""

    def __init__(self) -> None:
        self.k = self.v = torch.empty(0)

    def write(self, at: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.k, self.v = k, v
        return k, v


@dataclasses.dataclass
class _AfterStem:
    """A rest pass (training): each row's stem keys and values come first."""

    k: torch.Tensor
    v: torch.Tensor

    def write(self, at: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.cat([self.k, k], dim=2), torch.cat([self.v, v], dim=2)


MIN_STEM = 8  # a shorter stem is not worth a pass of its own


def shared_stems(
    prompts: Sequence[Sequence[int]], groups: Sequence[int]
) -> tuple[list[list[int]], list[int]]:
    """(The stems, each prompt's stem index): a group's stem is what all its prompts begin
    with, less the last token of the shortest (every prompt keeps one token of its own, the
    one that predicts the completion's first). A GRPO group's prompts, its first attempts and
    its revisions (the task again with the feedback), share the task's tokens. A group of one
    prompt, or whose stem is shorter than `MIN_STEM`, has an empty stem.
    """
    if len(groups) != len(prompts):
        raise ValueError(f"{len(prompts)} prompts but {len(groups)} group labels")
    index: dict[int, int] = {}
    stems: list[list[int]] = []
    members: list[int] = []
    which = [0] * len(prompts)
    for i, (prompt, group) in enumerate(zip(prompts, groups, strict=True)):
        own = list(prompt)[: len(prompt) - 1]
        j = index.get(group)
        if j is None:
            j = index[group] = len(stems)
            stems.append(own)
            members.append(0)
        else:
            stems[j] = stems[j][: _common(stems[j], own)]
        members[j] += 1
        which[i] = j
    for j, stem in enumerate(stems):
        if len(stem) < MIN_STEM or members[j] < 2:
            stems[j] = []
    return stems, which


def pack_rows(lengths: Sequence[int], width: int) -> list[tuple[int, int]]:
    """(Row, start) for each sequence of `lengths`, packed first-fit, longest first, into rows
    of `width` tokens. Ties keep their order, so a batch packs the same way every time.

    :raises ValueError: a sequence is longer than `width`.
    """
    if any(n > width for n in lengths):
        raise ValueError(f"a sequence of {max(lengths)} tokens does not fit a row of {width}")
    free: list[int] = []
    placed = [(0, 0)] * len(lengths)
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        n = lengths[i]
        row = next((r for r, room in enumerate(free) if room >= n), len(free))
        if row == len(free):
            free.append(width)
        placed[i] = (row, width - free[row])
        free[row] -= n
    return placed


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


@dataclasses.dataclass(frozen=True)
class TransformerConfig:
    vocab_size: int = ByteTokenizer.vocab_size
    d_model: int = 256
    n_layers: int = 4
    n_heads: int = 4
    max_len: int = 512

    def __post_init__(self) -> None:
        """:raises ValueError: naming the field that is out of range."""
        # The byte tokenizer's specials (pad 256, bos, eos) are model inputs: a smaller table
        # failed at the first padded batch with an index error (on CUDA, a device assert).
        if self.vocab_size < ByteTokenizer.vocab_size:
            raise ValueError(
                f"vocab_size: must be >= {ByteTokenizer.vocab_size} (the byte tokenizer's), "
                f"got {self.vocab_size}"
            )
        for name in ("d_model", "n_layers", "n_heads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be >= 1, got {getattr(self, name)}")
        if self.max_len < 2:  # a prompt token and a completion token
            raise ValueError(f"max_len: must be >= 2, got {self.max_len}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} must be a multiple of n_heads {self.n_heads}")
        if (self.d_model // self.n_heads) % 2:
            raise ValueError(
                f"d_model / n_heads must be even (rotary positions turn pairs), got "
                f"{self.d_model} / {self.n_heads}"
            )


ROPE_BASE = 10_000.0


def cpu_multiplies_bf16(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether this CPU multiplies bf16 matrices in hardware (AMX or AVX-512 BF16, read from
    the kernel's flags; False where they cannot be read). Without it bf16 is emulated and runs
    slower than fp32."""
    try:
        with open(cpuinfo, encoding="utf-8") as lines:
            for line in lines:
                if line.startswith("flags"):
                    return bool({"amx_bf16", "avx512_bf16"} & set(line.split()))
    except OSError:
        pass
    return False


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
        cache: _KeyStore | None,
        at: int,
    ) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        q, k = _rotate(q, *rotary), _rotate(k, *rotary)  # the cache holds rotated keys
        if cache is not None:
            k, v = cache.write(at, k, v)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        out: torch.Tensor = x + self.mlp(self.ln2(x))
        return out


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
        cache: Sequence[_KeyStore] | None = None,
        at: int = 0,
        segments: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits for `tokens` [B, T] at cache positions `at`..`at + T` (`cache` then holds
        their keys too); `key_valid` [B, at + T] marks real keys. `segments` [B, T] labels the
        sequences packed into a row: a token sees only the new keys of its own label, and every
        cached key before `at`."""
        t = tokens.shape[1]
        s = key_valid.shape[1]
        # Causal over the batch's shared timeline; pads are never keys, except that every query
        # sees itself so that a padded query row is never fully masked (SDPA would give NaN).
        timeline = torch.arange(s, device=tokens.device)
        query_at = timeline[s - t :].unsqueeze(1)
        causal = timeline.unsqueeze(0) <= query_at
        mask = causal.unsqueeze(0) & key_valid.unsqueeze(1)
        if segments is not None:
            # A cached prefix (a rest pass's stem) is every query's; the new keys are only
            # their own sequence's.
            keys = torch.cat([segments.new_full((segments.shape[0], s - t), -2), segments], 1)
            mask = mask & ((segments.unsqueeze(2) == keys.unsqueeze(1)) | (timeline < s - t))
        mask = mask | (timeline.unsqueeze(0) == query_at).unsqueeze(0)
        x = self.tok(tokens)
        # Angles in fp32, then in the weights' dtype once for every layer's rotations.
        angles = positions.unsqueeze(-1).float() * self.inv_freq  # [B, T, D/2]
        rotary = (angles.cos().unsqueeze(1).to(x.dtype), angles.sin().unsqueeze(1).to(x.dtype))
        for i, block in enumerate(self.blocks):
            x = block(x, mask.unsqueeze(1), rotary, cache[i] if cache is not None else None, at)
        logits: torch.Tensor = self.head(self.ln(x)).float()
        return logits


@dataclasses.dataclass
class _Decoding:
    """A batch mid-decode (implements `policies.neural.Decoding`).

    Every per-step quantity stays on the device: the host reads the batch once per `advance`
    call (on a GPU each read is a synchronisation), not once per token.
    """

    cache: list[_LayerCache]
    key_valid: torch.Tensor  # [B, capacity]: which cache slots hold real keys
    filled: int  # cache slots written so far
    next_pos: torch.Tensor  # [B]: the position of the token fed next
    last: torch.Tensor  # [B]: the token fed next (the last one sampled)
    finished: torch.Tensor  # [B], bool
    tokens: torch.Tensor  # [B, max_new_tokens]: the completions so far
    logprobs: torch.Tensor  # [B, max_new_tokens]: the behaviour log-probability of each
    made: torch.Tensor  # [B]: tokens made per sequence
    versions: list[list[int]]  # host side: the weights' version of each token made
    max_new_tokens: int
    temperature: float
    generator: torch.Generator | None
    rows: torch.Tensor  # [B]: 0..B-1, for indexing each row's next column

    @property
    def done(self) -> bool:
        return bool(self.finished.all())

    @property
    def size(self) -> int:
        return len(self.versions)

    def samples(self, rows: Sequence[int] | None = None) -> list[Sample]:
        picked = list(range(self.size)) if rows is None else list(rows)
        index = torch.tensor(picked, dtype=torch.long, device=self.tokens.device)
        counts = self.made[index].tolist()
        tokens, logprobs = self.tokens[index].tolist(), self.logprobs[index].tolist()
        return [
            Sample(tokens[j][:n], logprobs[j][:n], list(self.versions[i]))
            for j, (i, n) in enumerate(zip(picked, counts, strict=True))
        ]

    def ended(self) -> list[int]:
        return [int(i) for i in self.finished.nonzero().flatten().tolist()]


class TransformerPolicy:
    """`NeuralPolicy` over `_Decoder`; CUDA with bf16 autocast when available, else CPU."""

    def __init__(
        self,
        config: TransformerConfig | None = None,
        *,
        device: str | torch.device | None = None,
        seed: int = 0,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        """`dtype`: the weights' dtype. bf16 is for a policy that only infers (generation,
        no-grad log-probabilities); loading fp32 weights into it rounds them. The rotary
        frequencies stay fp32: rounded to bf16, a position in the hundreds would turn by a
        radian more or less."""
        if dtype not in (torch.float32, torch.bfloat16):
            raise ValueError(f"dtype: float32 or bfloat16, got {dtype}")
        self.config = config or TransformerConfig()
        self._device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.model = _Decoder(self.config).to(self._device)
        frequencies = self.model.inv_freq
        self.model.to(dtype)
        self.model.inv_freq = frequencies  # computed in fp32, kept so (not rounded)
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
        # A GRPO group's first attempts are one prompt eight times: its pass runs once, and
        # its rows of the cache and the logits are copied to each request.
        first_of: dict[tuple[int, ...], int] = {}
        row_of = [first_of.setdefault(tuple(p), len(first_of)) for p in prompts]
        distinct = [list(p) for p in first_of]
        tokens = torch.tensor([[pad] * (longest - len(p)) + p for p in distinct], device=dev)
        valid = torch.tensor(
            [[False] * (longest - len(p)) + [True] * len(p) for p in distinct], device=dev
        )
        positions = (valid.long().cumsum(1) - 1).clamp(min=0)
        generator = None
        if seed is not None:
            generator = torch.Generator(device=dev)
            generator.manual_seed(seed)
        n = len(prompts)
        capacity = longest + max_new_tokens  # the prompt, then at most one key per new token
        cache = [_LayerCache(capacity) for _ in range(self.config.n_layers)]
        with self._autocast():
            logits = self.model(tokens, positions, valid, cache, 0)
        if len(distinct) < n:
            rows = torch.tensor(row_of, device=dev)
            logits, valid, positions = logits[rows], valid[rows], positions[rows]
            for layer in cache:
                layer.take(rows)
        key_valid = torch.zeros(n, capacity, dtype=torch.bool, device=dev)
        key_valid[:, :longest] = valid
        state = _Decoding(
            cache=cache,
            key_valid=key_valid,
            filled=longest,
            next_pos=positions[:, -1] + 1,
            last=torch.zeros(n, dtype=torch.long, device=dev),
            finished=torch.zeros(n, dtype=torch.bool, device=dev),
            tokens=torch.full((n, max_new_tokens), pad, dtype=torch.long, device=dev),
            logprobs=torch.zeros(n, max_new_tokens, device=dev),
            made=torch.zeros(n, dtype=torch.long, device=dev),
            versions=[[self._version] for _ in range(n)],  # the token sampled below
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            generator=generator,
            rows=torch.arange(n, device=dev),
        )
        self._sample(state, logits[:, -1])
        return state

    @torch.inference_mode()
    def join(
        self,
        decoding: object,
        keep: Sequence[int],
        prompts: Sequence[Sequence[int]],
        *,
        seed: int | None = None,
    ) -> _Decoding:
        """Continuous batching (`policies.neural.JoiningPolicy`): rows `keep` of `decoding`,
        then the new prompts. Each row's keys sit in the cache at slots of the batch's shared
        timeline; positions are each sequence's own (rotary), so a row's slots can move
        without changing what it attends to. The kept rows' keys and the new rows' prompt
        keys are copied right-aligned into a cache with room for `max_new_tokens` more."""
        old = _checked(decoding)
        if not prompts:
            raise ValueError("join needs at least one prompt")
        if len(set(keep)) != len(keep) or not all(0 <= i < old.size for i in keep):
            raise ValueError(f"keep: rows must be distinct and in 0..{old.size - 1}")
        new = self.start(
            prompts, max_new_tokens=old.max_new_tokens, temperature=old.temperature, seed=seed
        )
        dev = self._device
        rows = torch.tensor(list(keep), dtype=torch.long, device=dev)
        valid_old = old.key_valid[rows, : old.filled]
        # The kept rows' slots before their first real key hold nothing: leave them behind.
        used = valid_old.any(0).nonzero()
        first = int(used[0]) if len(used) else old.filled  # none kept: nothing to carry
        span_old, span_new = old.filled - first, new.filled
        span = max(span_old, span_new)
        capacity = span + old.max_new_tokens
        n_keep, n = len(keep), len(keep) + new.size
        key_valid = torch.zeros(n, capacity, dtype=torch.bool, device=dev)
        key_valid[:n_keep, span - span_old : span] = valid_old[:, first:]
        key_valid[n_keep:, span - span_new : span] = new.key_valid[:, :span_new]

        def merged(kept: torch.Tensor | None, fresh: torch.Tensor | None) -> torch.Tensor:
            if kept is None or fresh is None:  # pragma: no cover - `start` writes every layer
                raise RuntimeError("a decoding's cache was never written")
            out = fresh.new_zeros(n, fresh.shape[1], capacity, fresh.shape[3])
            out[:n_keep, :, span - span_old : span] = kept[rows, :, first : old.filled]
            out[n_keep:, :, span - span_new : span] = fresh[:, :, :span_new]
            return out

        cache = [
            _LayerCache(capacity, merged(a.k, b.k), merged(a.v, b.v))
            for a, b in zip(old.cache, new.cache, strict=True)
        ]
        return _Decoding(
            cache=cache,
            key_valid=key_valid,
            filled=span,
            next_pos=torch.cat([old.next_pos[rows], new.next_pos]),
            last=torch.cat([old.last[rows], new.last]),
            finished=torch.cat([old.finished[rows], new.finished]),
            tokens=torch.cat([old.tokens[rows], new.tokens]),
            logprobs=torch.cat([old.logprobs[rows], new.logprobs]),
            made=torch.cat([old.made[rows], new.made]),
            versions=[old.versions[i] for i in keep] + new.versions,
            max_new_tokens=old.max_new_tokens,
            temperature=old.temperature,
            generator=old.generator if old.generator is not None else new.generator,
            rows=torch.arange(n, device=dev),
        )

    @torch.inference_mode()
    def advance(self, decoding: object, steps: int) -> int:
        state = _checked(decoding)
        if state.done:
            return 0
        # On a GPU a host read per step would stall the pipeline, so a batch that finishes
        # mid-call runs out the call's steps (its outputs no longer change); on the CPU a read
        # is free and the loop stops at once.
        stop_early = self._device.type == "cpu"
        before = state.made.clone()
        for _ in range(min(steps, state.key_valid.shape[1] - state.filled)):
            at = state.filled
            state.key_valid[:, at] = ~state.finished
            with self._autocast():
                logits = self.model(
                    state.last.unsqueeze(1),
                    state.next_pos.unsqueeze(1),
                    state.key_valid[:, : at + 1],
                    state.cache,
                    at,
                )
            state.filled = at + 1
            state.next_pos = state.next_pos + 1
            self._sample(state, logits[:, -1])
            if stop_early and state.done:
                break
        if state.filled >= state.key_valid.shape[1]:
            # Unreachable as `start` sizes the cache, but a caller looping until `done` must
            # never spin on a full one.
            state.finished.fill_(True)
        added = (state.made - before).tolist()
        for row, n in zip(state.versions, added, strict=True):
            row.extend([self._version] * n)
        return sum(added)

    def _sample(self, state: _Decoding, logits: torch.Tensor) -> None:
        """Sample the next token of every unfinished sequence and record it, on the device."""
        if state.temperature > 0:
            logp = torch.log_softmax(logits / state.temperature, dim=-1)
            chosen = torch.multinomial(logp.exp(), 1, generator=state.generator).squeeze(1)
        else:  # greedy; the log-probability is the model's own (temperature 1)
            logp = torch.log_softmax(logits, dim=-1)
            chosen = logp.argmax(dim=-1)
        picked = logp.gather(1, chosen.unsqueeze(1)).squeeze(1)
        live = ~state.finished
        col = state.made.clamp(max=state.max_new_tokens - 1)
        rows = state.rows
        state.tokens[rows, col] = torch.where(live, chosen, state.tokens[rows, col])
        state.logprobs[rows, col] = torch.where(live, picked, state.logprobs[rows, col])
        state.made = state.made + live.long()
        ended = (chosen == self.tokenizer.eos) | (state.made >= state.max_new_tokens)
        state.finished = state.finished | (live & ended)
        state.last = chosen

    # -- training --------------------------------------------------------------------------------

    def token_logprobs(
        self,
        prompts: Sequence[Sequence[int]],
        completions: Sequence[Sequence[int]],
        *,
        temperature: float = 1.0,
        groups: Sequence[int] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if len(prompts) != len(completions):
            raise ValueError("prompts and completions differ in number")
        if not prompts:
            raise ValueError("token_logprobs needs at least one sequence")
        # A completion's first token is predicted at its prompt's last: with no prompt token
        # that index was -1, another sequence's or a pad's logits.
        empty = next((i for i, p in enumerate(prompts) if len(p) == 0), None)
        if empty is not None:
            raise ValueError(f"prompt {empty} is empty: every prompt needs at least one token")
        if groups is not None:
            stems, which = shared_stems(prompts, groups)
            if any(stems):
                return self._stemmed_logprobs(prompts, completions, stems, which, temperature)
        return self._packed_logprobs(prompts, completions, temperature)

    def _packed_logprobs(
        self,
        prompts: Sequence[Sequence[int]],
        completions: Sequence[Sequence[int]],
        temperature: float,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`token_logprobs` with the sequences packed into rows as wide as the longest, each
        seeing only its own tokens at its own positions: the same function as one padded row
        per sequence, without computing the pads (a third of a padded SFT batch here)."""
        seqs = [list(p) + list(c) for p, c in zip(prompts, completions, strict=True)]
        width = max(len(seq) for seq in seqs)
        placed = pack_rows([len(seq) for seq in seqs], width)
        tokens, positions, segments = self._rows(seqs, placed, [0] * len(seqs), width)
        with self._autocast():
            logits = self.model(tokens, positions, segments >= 0, segments=segments)
        # Completion token j of sequence i is predicted at start + len(prompt) - 1 + j of its row.
        firsts = [
            (row, start + len(p) - 1) for p, (row, start) in zip(prompts, placed, strict=True)
        ]
        return self._completion_logprobs(logits, firsts, completions, temperature)

    def _rows(
        self,
        seqs: Sequence[Sequence[int]],
        placed: Sequence[tuple[int, int]],
        first_positions: Sequence[int],
        width: int,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Tokens, positions and segment labels ([rows, width]; pads: label -1) of `seqs` laid
        out at their `placed` (row, start), sequence i's positions counted from
        `first_positions[i]`."""
        n_rows = max(row for row, _ in placed) + 1
        tokens = [[self.tokenizer.pad] * width for _ in range(n_rows)]
        positions = [[0] * width for _ in range(n_rows)]
        segments = [[-1] * width for _ in range(n_rows)]
        for i, (seq, (row, start)) in enumerate(zip(seqs, placed, strict=True)):
            end = start + len(seq)
            tokens[row][start:end] = seq
            positions[row][start:end] = range(first_positions[i], first_positions[i] + len(seq))
            segments[row][start:end] = [i] * len(seq)
        dev = self._device
        return (
            torch.tensor(tokens, device=dev),
            torch.tensor(positions, device=dev),
            torch.tensor(segments, device=dev),
        )

    def _completion_logprobs(
        self,
        logits: torch.Tensor,
        firsts: Sequence[tuple[int, int]],
        completions: Sequence[Sequence[int]],
        temperature: float,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(Log-probabilities, mask), [sequences, longest completion]: completion token j of
        sequence i, predicted by `logits` at row `firsts[i][0]`, column `firsts[i][1] + j`."""
        dev = self._device
        seq_of: list[int] = []
        row_of: list[int] = []
        at: list[int] = []
        col: list[int] = []
        target: list[int] = []
        for i, ((row, first), c) in enumerate(zip(firsts, completions, strict=True)):
            seq_of += [i] * len(c)
            row_of += [row] * len(c)
            at += range(first, first + len(c))
            col += range(len(c))
            target += c
        longest = max(max((len(c) for c in completions), default=0), 1)
        out = torch.zeros(len(completions), longest, device=dev)
        mask = torch.zeros(len(completions), longest, device=dev)
        if seq_of:
            scale = temperature if temperature > 0 else 1.0
            logp = torch.log_softmax(
                logits[torch.tensor(row_of, device=dev), torch.tensor(at, device=dev)] / scale,
                dim=-1,
            )
            wanted = torch.tensor(target, device=dev).clamp(max=self.config.vocab_size - 1)
            chosen = logp.gather(1, wanted.unsqueeze(1)).squeeze(1)
            out = out.index_put(
                (torch.tensor(seq_of, device=dev), torch.tensor(col, device=dev)), chosen
            )
            mask[seq_of, col] = 1.0
        return out, mask

    def _stemmed_logprobs(
        self,
        prompts: Sequence[Sequence[int]],
        completions: Sequence[Sequence[int]],
        stems: Sequence[Sequence[int]],
        which: Sequence[int],
        temperature: float,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`token_logprobs` in two passes: each shared stem once, then every sequence's rest
        attending to its stem's keys (the gradient of a stem sums over the rows that share
        it; a stem's rests are packed into rows). The same function of the weights as one
        pass over each whole sequence, at a fraction of the cost when a GRPO group's eight
        prompts are one."""
        dev = self._device
        pad = self.tokenizer.pad
        stem_tokens, stem_valid = _right_padded(stems, pad, dev)
        width = stem_tokens.shape[1]
        kept = [_KeepKeys() for _ in range(self.config.n_layers)]
        with self._autocast():
            self.model(
                stem_tokens,
                torch.arange(width, device=dev).expand(len(stems), width),
                stem_valid,
                kept,
            )
        starts = [len(stems[g]) for g in which]
        rests = [
            list(p[n:]) + list(c) for p, c, n in zip(prompts, completions, starts, strict=True)
        ]
        # Each stem's rests packed into rows of their own (a row attends to one stem), as wide
        # as the longest rest: a first attempt's rest is a token and the completion, a
        # revision's the feedback too, and padded to one width they were about 40 % pads.
        rest_width = max(len(rest) for rest in rests)
        placed: list[tuple[int, int]] = [(0, 0)] * len(rests)
        row_stem: list[int] = []
        for stem in dict.fromkeys(which):
            members = [i for i, w in enumerate(which) if w == stem]
            local = pack_rows([len(rests[i]) for i in members], rest_width)
            for i, (row, start) in zip(members, local, strict=True):
                placed[i] = (len(row_stem) + row, start)
            row_stem += [stem] * (1 + max(row for row, _ in local))
        tokens, positions, segments = self._rows(rests, placed, starts, rest_width)
        rows = torch.tensor(row_stem, device=dev)
        key_valid = torch.cat([stem_valid[rows], segments >= 0], dim=1)
        after = [_AfterStem(layer.k[rows], layer.v[rows]) for layer in kept]
        with self._autocast():
            logits = self.model(tokens, positions, key_valid, after, width, segments=segments)
        # Completion token j of sample i is predicted at index len(prompt) - start - 1 + j of
        # its rest (>= 0: a stem leaves every prompt a token of its own), past the rest's
        # offset in its row.
        firsts = [
            (row, offset + len(p) - start - 1)
            for p, (row, offset), start in zip(prompts, placed, starts, strict=True)
        ]
        return self._completion_logprobs(logits, firsts, completions, temperature)

    def parameters(self) -> Iterator[nn.Parameter]:
        return self.model.parameters()

    def train(self, mode: bool = True) -> object:
        return self.model.train(mode)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def load_state_dict(self, state: Mapping[str, torch.Tensor], version: int) -> None:
        self.model.load_state_dict(dict(state))
        self._version = version


def _right_padded(
    seqs: Sequence[Sequence[int]], pad: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """`seqs` right-padded to the longest with `pad`, and the mask of their real tokens."""
    width = max(len(seq) for seq in seqs)
    tokens = torch.tensor([list(seq) + [pad] * (width - len(seq)) for seq in seqs], device=device)
    valid = torch.tensor(
        [[True] * len(seq) + [False] * (width - len(seq)) for seq in seqs], device=device
    )
    return tokens, valid


def _checked(decoding: object) -> _Decoding:
    if not isinstance(decoding, _Decoding):
        raise TypeError(f"not a decoding started by TransformerPolicy: {type(decoding).__name__}")
    return decoding


def param_count_label(policy: TransformerPolicy) -> str:
    """'3.2M' style, for tables."""
    n = policy.num_parameters()
    return f"{n / 1e6:.1f}M" if n >= 1e5 else f"{n / 1e3:.0f}k" if n >= 1e3 else str(n)
