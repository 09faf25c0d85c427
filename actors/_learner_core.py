"""The learner's state and its two operations: one optimizer step, and a checkpoint.

Kept apart from the actor so that a step can be run, checkpointed and resumed in a plain test,
and so the actor is only plumbing (mailbox, staleness, publishing).
"""

from __future__ import annotations

import copy
import dataclasses
import os
import pickle
import random
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import torch
import torch._dynamo  # (see below)

from actors._grpo import (
    LossConfig,
    LossStats,
    check_advantage_scale,
    combine_stats,
    combine_steps,
    grpo_advantages,
    grpo_loss,
    micro_batches,
    split_groups,
)
from actors._imitation import ImitationBuffer, Kept, imitation_loss
from policies.neural import NeuralPolicy, use_threads
from policies.staleness import make_correction

# AdamW's constructor imports torch._dynamo lazily: about 3 s of pure-Python import that would
# otherwise hold the GIL on the event loop the first time a learner is spawned.

__all__ = [
    "Checkpoint",
    "CorruptCheckpointError",
    "LearnerConfig",
    "LearnerCore",
    "StepStats",
    "Trajectory",
    "episode_of",
    "episodes_in",
    "group_advantages",
    "load_checkpoint",
    "stem_labels",
    "turn_of",
]


class Trajectory(msgspec.Struct, frozen=True):
    """One scored model turn: prompt, sampled completion with its behaviour log-probabilities
    and the version of each token, and the reward of its episode."""

    rollout_id: str
    prompt: list[int]
    completion: list[int]
    logprobs: list[float]
    versions: list[int]
    reward: float
    #: The completion was sampled for another prompt (a revision that passed, set as the answer
    #: to the first attempt's prompt): its behaviour log-probabilities under this prompt are
    #: unknown, so it trains as if the current weights had sampled it (importance weight 1).
    relabelled: bool = False
    #: The id of the task this sample answers when it is not its group's (a failed program
    #: that passed another task's tests, a hindsight task): its prompt shares nothing with
    #: the group's, so it gets a stem of its own in the learner's shared-stem pass.
    goal: str = ""

    def __post_init__(self) -> None:
        if not self.prompt:
            raise ValueError(f"{self.rollout_id}: empty prompt")
        if not (len(self.completion) == len(self.logprobs) == len(self.versions)):
            raise ValueError(
                f"{self.rollout_id}: completion, logprobs and versions differ in length "
                f"({len(self.completion)}, {len(self.logprobs)}, {len(self.versions)})"
            )

    @property
    def oldest_version(self) -> int:
        return min(self.versions) if self.versions else 1 << 62


def stem_labels(groups: Sequence[Sequence[Trajectory]]) -> list[int]:
    """Each sample's label for the shared-stem pass: one per group, and one per hindsight
    task within it (`Trajectory.goal`: its prompt is another task's)."""
    keys = [(g, t.goal) for g, group in enumerate(groups) for t in group]
    label = {key: i for i, key in enumerate(dict.fromkeys(keys))}
    return [label[key] for key in keys]


def episode_of(sample_id: str) -> str:
    """The episode a sample comes from: each model turn of a multi-turn episode is a sample,
    named `episode#turn`; a sample without `#` is a whole episode."""
    head, sep, _ = sample_id.rpartition("#")
    return head if sep else sample_id


BASELINES = ("group", "turn")


def _check_baseline(name: str) -> None:
    if name not in BASELINES:
        raise ValueError(f"unknown baseline {name!r}; choose one of {', '.join(BASELINES)}")


def turn_of(sample_id: str) -> int:
    """The model turn a sample is (0 for the first attempt, or a sample without `#`)."""
    _, sep, turn = sample_id.rpartition("#")
    return int(turn) if sep and turn.isdigit() else 0


def group_advantages(group: Sequence[Trajectory], baseline: str, scale: str = "std") -> list[float]:
    """GRPO advantages of a group's samples, relative to the whole group ("group") or to the
    samples of the same model turn ("turn").

    With per-turn rewards, the whole group's mean is a baseline that depends on the action
    being judged: a first attempt that fails brings revision samples (of lower reward) into
    the group, one that passes does not. Per turn, the first attempts (one prompt, one sample
    per episode) are compared only with each other, as in single-turn GRPO; a revision turn
    alone in its group has no baseline and gets 0. `scale`: `grpo_advantages`'.

    A hindsight sample (`Trajectory.goal`: it answers another task's prompt) is judged
    against the whole group, but the group's own samples are judged without it: their
    baseline estimates their own prompt's value. Counted in, a pass of another prompt raised
    their mean, so their advantages summed to a push down on their own prompt that none of
    them earned (docs/learning.md).
    """
    _check_baseline(baseline)
    advantages = _advantages([t.reward for t in group], group, baseline, scale)
    own = [i for i, t in enumerate(group) if not t.goal]
    if len(own) < len(group):
        hosts = [group[i] for i in own]
        host_advantages = _advantages([t.reward for t in hosts], hosts, baseline, scale)
        for i, a in zip(own, host_advantages, strict=True):
            advantages[i] = a
    return advantages


def _advantages(
    rewards: Sequence[float], group: Sequence[Trajectory], baseline: str, scale: str
) -> list[float]:
    if baseline == "group":
        return grpo_advantages(rewards, scale=scale)
    out = [0.0] * len(group)
    by_turn: dict[int, list[int]] = {}
    for i, t in enumerate(group):
        by_turn.setdefault(turn_of(t.rollout_id), []).append(i)
    for members in by_turn.values():
        turn_rewards = [rewards[i] for i in members]
        for i, a in zip(members, grpo_advantages(turn_rewards, scale=scale), strict=True):
            out[i] = a
    return out


def episodes_in(group: Sequence[Trajectory]) -> int:
    """How many episodes a group's samples come from (the unit of the learner's batch)."""
    return len({episode_of(t.rollout_id) for t in group})


@dataclasses.dataclass(frozen=True)
class LearnerConfig:
    # Episodes per version (each trains on all its model turns): the unit admission counts,
    # so the batch is what the staleness bound lets in per version.
    batch_size: int = 32
    # Optimizer steps per version, each on a share of the batch's groups (PPO's minibatches).
    # A big batch lets many episodes run at once (admission allows (k + 1) * batch_size) and
    # minibatches keep the number of steps that a batch of that size would cut.
    minibatches: int = 1
    lr: float = 3e-4
    # Linear warm-up over the first steps: a fresh Adam moves every weight by about `lr` on
    # its first steps whatever the gradient's noise (its second moment is still unknown).
    warmup_steps: int = 0
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.99)
    max_grad_norm: float = 1.0
    correction: str = "decoupled"
    baseline: str = "group"  # GRPO's baseline: "group", or "turn" (see `group_advantages`)
    advantage_scale: str = "std"  # "std" (GRPO) or "none" (Dr. GRPO; `grpo_advantages`)
    is_cap: float | None = None
    loss: LossConfig = dataclasses.field(default_factory=LossConfig)
    k: int = 2  # staleness bound
    checkpoint_every: int = 0  # learner versions (each `minibatches` optimizer steps); 0: never
    checkpoint_dir: str | None = None
    keep_checkpoints: int = 2
    # Padded tokens per forward pass: the batch is cut into micro-batches of similar length
    # (the same gradient, far less padding; docs/benchmarks.md).
    micro_batch_tokens: int = 4096
    # Each group's prompt stem (its task's prompt) runs once per micro-batch and its rows
    # attend to it: the same gradient, about half the compute (docs/benchmarks.md).
    shared_stems: bool = True
    # torch intra-op threads of the step (0: torch's default; `policies.neural.use_threads`).
    threads: int = 0
    # Decay of an exponential moving average of the weights, updated after every step (0: none).
    # The iterates of a short RL phase swing by several held-out points from one version to
    # the next; their average is steadier and is what the caller evaluates (docs/learning.md).
    average_decay: float = 0.0
    # Self-imitation (actors/_imitation.py): the weight of a likelihood term on a draw of
    # `imitation_batch` remembered positive-advantage samples per step (0: off).
    imitation_coef: float = 0.0
    imitation_capacity: int = 1024
    imitation_batch: int = 32
    # Rehearsal of the demonstrations (PPO-ptx, Ouyang et al. 2022): the weight of their
    # mean negative log-likelihood on `demo_batch` pairs drawn per step (0: off). RL's updates
    # for the levels without demonstrations drift the demonstrated ones; with this term and
    # a lighter KL anchor they ended higher than with the anchor alone (docs/learning.md).
    demo_coef: float = 0.0
    demo_batch: int = 16
    # A watchdog on each thread call (step, publication's copy, checkpoint): past it the call
    # is logged and counted, never abandoned (actors/learner.py says why).
    step_timeout_s: float = 600.0
    publish_timeout_s: float = 120.0  # per try of the publication's ask
    publish_attempts: int = 3
    seed: int = 0


@dataclasses.dataclass(frozen=True)
class StepStats:
    version: int
    samples: int
    reward_mean: float
    grad_norm: float
    seconds: float
    loss: LossStats
    # The self-imitation term (before its coefficient; the steps' mean); 0 when off.
    imitation_loss: float = 0.0
    imitation_kept: int = 0  # samples in the self-imitation buffer after the step
    # The demonstrations' mean negative log-likelihood per token (the steps' mean); 0 when off.
    demo_loss: float = 0.0
    optimizer_steps: int = 1  # the version's minibatches


@dataclasses.dataclass
class Checkpoint:
    """What a checkpoint file holds; `curriculum` is the caller's opaque blob."""

    model: dict[str, torch.Tensor]
    optimizer: dict[str, Any]
    version: int
    torch_rng: torch.Tensor
    python_rng: Any
    consumed: list[str]
    curriculum: bytes
    cuda_rng: list[torch.Tensor] = dataclasses.field(default_factory=list)
    average: dict[str, torch.Tensor] | None = None  # the weights' moving average, if kept
    imitation: list[Any] = dataclasses.field(default_factory=list)  # the replay buffer
    path: Path | None = None


@dataclasses.dataclass(frozen=True)
class _Snapshot:
    """The learner's state before an update, to undo one that raised part way."""

    model: dict[str, torch.Tensor]
    optimizer: dict[str, Any]
    average: dict[str, torch.Tensor] | None
    imitation: list[Any]
    python_rng: Any
    torch_rng: torch.Tensor


class LearnerCore:
    """The model being trained, its optimizer and RNGs, and the ids consumed so far."""

    def __init__(
        self,
        policy: NeuralPolicy,
        config: LearnerConfig,
        *,
        reference: NeuralPolicy | None = None,
        resume: Checkpoint | None = None,
        demonstrations: Sequence[tuple[Sequence[int], Sequence[int]]] = (),
    ) -> None:
        """`demonstrations`: (prompt, completion) token pairs for the rehearsal term (the
        completion ends with EOS, as in SFT); needed when `config.demo_coef` > 0."""
        _check_baseline(config.baseline)
        check_advantage_scale(config.advantage_scale)
        if config.micro_batch_tokens < 1:
            raise ValueError(f"micro_batch_tokens must be >= 1, got {config.micro_batch_tokens}")
        if config.minibatches < 1:
            raise ValueError(f"minibatches must be >= 1, got {config.minibatches}")
        if config.publish_attempts < 1:
            raise ValueError(f"publish_attempts must be >= 1, got {config.publish_attempts}")
        if not 0.0 <= config.average_decay < 1.0:
            raise ValueError(f"average_decay must be in [0, 1), got {config.average_decay}")
        if config.imitation_coef < 0:
            raise ValueError(f"imitation_coef must be >= 0, got {config.imitation_coef}")
        if config.demo_coef < 0:
            raise ValueError(f"demo_coef must be >= 0, got {config.demo_coef}")
        if config.demo_batch < 1:
            raise ValueError(f"demo_batch must be >= 1, got {config.demo_batch}")
        if config.demo_coef > 0 and not demonstrations:
            raise ValueError("demo_coef > 0 needs demonstrations to rehearse; none were given")
        self.demonstrations = [
            Kept(tuple(prompt), tuple(completion), 1.0) for prompt, completion in demonstrations
        ]
        for index, demo in enumerate(self.demonstrations):
            if not demo.prompt or not demo.completion:
                raise ValueError(f"demonstration {index}: empty prompt or completion")
        self.policy = policy
        self.config = config
        self.reference = reference
        self.correction = make_correction(
            config.correction, eps=config.loss.clip_eps, cap=config.is_cap
        )
        self.optimizer = torch.optim.AdamW(
            policy.parameters(), lr=config.lr, betas=config.betas, weight_decay=config.weight_decay
        )
        self.rng = random.Random(config.seed)
        self.consumed: set[str] = set()
        self.version = policy.version
        self.curriculum = b""
        self.average: dict[str, torch.Tensor] | None = None
        self.imitation = ImitationBuffer(config.imitation_capacity, self.rng)
        if resume is not None:
            self.restore(resume)
        if config.average_decay > 0 and self.average is None:
            self.average = policy.state_dict()  # starts at the weights RL starts from

    def update(self, groups: Sequence[Sequence[Trajectory]]) -> StepStats:
        """One version: `minibatches` optimizer steps on `groups` (each a GRPO group: samples
        of one task), split by group so that advantages stay within their group."""
        started = time.perf_counter()
        use_threads(self.config.threads)
        parts = split_groups(groups, self.config.minibatches) or [[]]
        losses: list[LossStats] = []
        grad_norm = imitation = rehearsal = 0.0  # the steps' means, as the loss's
        # All or nothing: a version whose third minibatch raises must not leave the first two
        # applied, or the retried batch would train their samples twice (the caller puts the
        # batch back and retries it). The copy costs well under 1 % of a step here
        # (docs/learning.md, "Failures").
        before = self._snapshot()
        try:
            for part in parts:
                loss, part_norm, imitated, rehearsed = self._optimizer_step(part)
                losses.append(loss)
                grad_norm += part_norm / len(parts)
                imitation += imitated / len(parts)
                rehearsal += rehearsed / len(parts)
        except BaseException:
            self._roll_back(before)
            raise
        self.version += 1
        # The model object outlives a learner restart: it must carry its own version.
        self.policy.version = self.version
        batch = [t for group in groups for t in group]
        self.consumed.update(t.rollout_id for t in batch)
        return StepStats(
            version=self.version,
            samples=len(batch),
            reward_mean=sum(t.reward for t in batch) / max(1, len(batch)),
            grad_norm=grad_norm,
            seconds=time.perf_counter() - started,
            loss=combine_steps(losses),
            imitation_loss=imitation,
            imitation_kept=len(self.imitation),
            demo_loss=rehearsal,
            optimizer_steps=len(parts),
        )

    def _snapshot(self) -> _Snapshot:
        """What an update changes, copied (weights, optimizer, average, buffer, draws)."""
        return _Snapshot(
            model=self.policy.state_dict(),
            optimizer=copy.deepcopy(self.optimizer.state_dict()),
            average=(
                None if self.average is None else {k: v.clone() for k, v in self.average.items()}
            ),
            imitation=self.imitation.state(),
            python_rng=self.rng.getstate(),
            torch_rng=torch.get_rng_state(),
        )

    def _roll_back(self, before: _Snapshot) -> None:
        """Undo a partly applied update: the state `_snapshot` copied."""
        self.policy.load_state_dict(before.model, self.version)
        self.optimizer.load_state_dict(before.optimizer)
        self.optimizer.zero_grad(set_to_none=True)
        self.average = before.average
        self.imitation.restore(before.imitation)
        self.rng.setstate(before.python_rng)
        torch.set_rng_state(before.torch_rng)

    def _optimizer_step(
        self, groups: Sequence[Sequence[Trajectory]]
    ) -> tuple[LossStats, float, float, float]:
        """One gradient step on `groups`: (loss statistics, gradient norm, imitation term,
        rehearsal term)."""
        batch = [t for group in groups for t in group]
        base, scale = self.config.baseline, self.config.advantage_scale
        advantages = [a for group in groups for a in group_advantages(group, base, scale)]
        self.policy.train(True)
        self.optimizer.zero_grad(set_to_none=True)
        total = float(max(1, sum(len(t.completion) for t in batch)))
        parts: list[LossStats] = []
        lengths = [len(t.prompt) + len(t.completion) for t in batch]
        group_of = stem_labels(groups)
        for chunk in micro_batches(lengths, self.config.micro_batch_tokens):
            loss, part = grpo_loss(
                self.policy,
                [batch[i].prompt for i in chunk],
                [batch[i].completion for i in chunk],
                [batch[i].logprobs for i in chunk],
                [advantages[i] for i in chunk],
                self.correction,
                self.config.loss,
                self.reference,
                normaliser=total,
                relabelled=[batch[i].relabelled for i in chunk],
                groups=[group_of[i] for i in chunk] if self.config.shared_stems else None,
            )
            loss.backward()  # type: ignore[no-untyped-call]  # gradients add up over chunks
            parts.append(part)
        imitation = self._imitate(batch, advantages) if self.config.imitation_coef > 0 else 0.0
        rehearsal = self._rehearse() if self.config.demo_coef > 0 else 0.0
        grad_norm = torch.nn.utils.clip_grad_norm_(
            list(self.policy.parameters()), self.config.max_grad_norm
        )
        for group in self.optimizer.param_groups:
            group["lr"] = self.lr_at(self.version)
        self.optimizer.step()
        if self.average is not None:
            self._update_average()
        return combine_stats(parts), float(grad_norm), imitation, rehearsal

    def _imitate(self, batch: Sequence[Trajectory], advantages: Sequence[float]) -> float:
        """Add the self-imitation term's gradient: a draw from the samples kept so far
        (this batch's positive-advantage samples join first, so a success trains at once).
        Returns the term's value before its coefficient."""
        self.imitation.add([t.prompt for t in batch], [t.completion for t in batch], advantages)
        kept = self.imitation.draw(self.config.imitation_batch)
        return self._likelihood_gradient(
            kept, self.config.imitation_coef, temperature=self.config.loss.temperature
        )

    def _rehearse(self) -> float:
        """Add the rehearsal term's gradient: the mean negative log-likelihood per token of
        `demo_batch` demonstrations drawn uniformly (SFT's loss, at temperature 1 as SFT
        trained it). Returns the term's value before its coefficient."""
        drawn = [
            self.demonstrations[self.rng.randrange(len(self.demonstrations))]
            for _ in range(self.config.demo_batch)
        ]
        return self._likelihood_gradient(drawn, self.config.demo_coef, temperature=1.0)

    def _likelihood_gradient(
        self, samples: Sequence[Kept], coef: float, *, temperature: float
    ) -> float:
        """Add `coef` times the weighted negative log-likelihood of `samples` (per token of
        the whole draw) to the gradients, in micro-batches; returns the term's value."""
        total = float(sum(len(k.completion) for k in samples))
        lengths = [len(k.prompt) + len(k.completion) for k in samples]
        value = 0.0
        for chunk in micro_batches(lengths, self.config.micro_batch_tokens):
            term = imitation_loss(
                self.policy, [samples[i] for i in chunk], normaliser=total, temperature=temperature
            )
            (coef * term).backward()  # type: ignore[no-untyped-call]
            value += float(term.detach())
        return value

    @torch.no_grad()
    def _update_average(self) -> None:
        assert self.average is not None
        keep = self.config.average_decay
        for name, value in self.policy.state_dict().items():
            mean = self.average[name]
            if mean.is_floating_point():
                mean.mul_(keep).add_(value.to(mean.device, mean.dtype), alpha=1.0 - keep)
            else:  # integer buffers (none in the default model) follow the weights
                mean.copy_(value)

    def lr_at(self, version: int) -> float:
        """The learning rate of the step that makes `version + 1` (it counts across resumes)."""
        warmup = self.config.warmup_steps
        return self.config.lr * min(1.0, (version + 1) / warmup) if warmup > 0 else self.config.lr

    def publishable_state(self) -> dict[str, torch.Tensor]:
        """A copy of the weights, safe to hand to another thread."""
        return self.policy.state_dict()

    # -- checkpoints ---------------------------------------------------------------------------

    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Write `ckpt-<version>.pt` atomically (temp file, fsync, rename); prune old ones."""
        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"ckpt-{self.version:08d}.pt"
        payload = {
            "model": self.policy.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "version": self.version,
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "python_rng": self.rng.getstate(),
            "consumed": sorted(self.consumed),
            "curriculum": self.curriculum,
            "average": self.average,
            "imitation": self.imitation.state(),
        }
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".ckpt-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                torch.save(payload, handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        old = sorted(folder.glob("ckpt-*.pt"))[: -self.config.keep_checkpoints or None]
        for path in old:
            path.unlink(missing_ok=True)
        return target

    def restore(self, ckpt: Checkpoint) -> None:
        self.policy.load_state_dict(ckpt.model, ckpt.version)
        self.optimizer.load_state_dict(ckpt.optimizer)
        self.version = ckpt.version
        torch.set_rng_state(ckpt.torch_rng)
        if ckpt.cuda_rng and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(ckpt.cuda_rng)
        self.rng.setstate(ckpt.python_rng)
        self.consumed = set(ckpt.consumed)
        self.curriculum = ckpt.curriculum
        # A checkpoint without an average (written with averaging off) restarts it here.
        if self.config.average_decay > 0 and ckpt.average is not None:
            self.average = {k: v.clone() for k, v in ckpt.average.items()}
        self.imitation.restore(ckpt.imitation)


class CorruptCheckpointError(ValueError):
    """A checkpoint file that cannot be used (empty, truncated, not a checkpoint, or missing a
    field); the message names the file and what is wrong with it."""


#: What `save` writes and a resume cannot do without (later additions have defaults).
_CHECKPOINT_KEYS = (
    "model",
    "optimizer",
    "version",
    "torch_rng",
    "python_rng",
    "consumed",
    "curriculum",
)


def load_checkpoint(path: str | os.PathLike[str]) -> Checkpoint:
    """A checkpoint file, or the newest `ckpt-*.pt` in a directory.

    :raises FileNotFoundError: no checkpoint there.
    :raises CorruptCheckpointError: the file is there but unusable (a `ValueError`, as
        `roost.train.phases.load_weights` raises for a weights file).
    """
    target = Path(path)
    if target.is_dir():
        found = sorted(target.glob("ckpt-*.pt"))
        if not found:
            raise FileNotFoundError(f"no ckpt-*.pt in {target}")
        target = found[-1]
    elif not target.exists():
        raise FileNotFoundError(f"no checkpoint at {target}")
    if target.stat().st_size == 0:
        raise CorruptCheckpointError(f"{target}: empty checkpoint file")
    try:
        # Data only, never code; `bytes` (the curriculum blob, pickled as a call when empty)
        # is the one builtin a checkpoint needs beyond what weights_only allows by default.
        with torch.serialization.safe_globals([bytes]):
            data = torch.load(target, map_location="cpu", weights_only=True)
    except (FileNotFoundError, PermissionError):
        raise
    # A truncated archive raises OSError (errno 22), RuntimeError or EOFError; other bytes an
    # UnpicklingError. Their own messages name neither the file nor the cause.
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError) as exc:
        first_line = str(exc).splitlines()[0] if str(exc) else ""
        raise CorruptCheckpointError(
            f"{target}: unreadable checkpoint, truncated or corrupt "
            f"({type(exc).__name__}: {first_line})"
        ) from None
    if not isinstance(data, dict):
        raise CorruptCheckpointError(f"{target}: holds a {type(data).__name__}, not a checkpoint")
    missing = [key for key in _CHECKPOINT_KEYS if key not in data]
    if missing:
        raise CorruptCheckpointError(f"{target}: incomplete checkpoint, no {', '.join(missing)}")
    try:
        return Checkpoint(
            model=data["model"],
            optimizer=data["optimizer"],
            version=int(data["version"]),
            torch_rng=data["torch_rng"],
            python_rng=data["python_rng"],
            consumed=list(data["consumed"]),
            curriculum=bytes(data["curriculum"]),
            cuda_rng=list(data.get("cuda_rng", [])),
            average=data.get("average"),
            imitation=list(data.get("imitation", [])),
            path=target,
        )
    except (TypeError, ValueError) as exc:
        raise CorruptCheckpointError(f"{target}: a field of the wrong type: {exc}") from None
