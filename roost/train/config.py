"""The experiment config of `roost train`: typed sections, embedded defaults, dotted-path errors.

`load_train_config(path, overrides)` layers the defaults below, the TOML file and `--set`
overrides (see `runtime/config.py`); every section forbids unknown keys, so a typo is an error
that names its key path rather than a setting silently ignored. The defaults are the default
experiment: procedural code tasks at levels 1-3 (demonstrations for 1-2 only), episodes of up
to 3 turns in process sandboxes, a 1.9M-parameter character model, an SFT warm start, then RL
with staleness bound k = 2 and a few hundred concurrent episodes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Literal, get_args

import msgspec

from policies.isolation import RISK_LEVELS
from roost.chaos.spec import ChaosSpec, ChaosSpecError, parse_chaos
from runtime.config import ConfigError, load_config
from tasks.procedural import MAX_LEVEL, SolutionStyle

__all__ = ["ConfigError", "TrainConfig", "check_resume", "load_train_config"]


class _Section(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    pass


def _positive(name: str, value: float) -> None:
    if not value > 0:
        raise ValueError(f"{name}: must be > 0, got {value}")


def _non_negative(name: str, value: float) -> None:
    if not value >= 0:
        raise ValueError(f"{name}: must be >= 0, got {value}")


def _fraction(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name}: must be in [0, 1], got {value}")


class TasksConfig(_Section):
    """Where tasks come from. `procedural`: generated levels; `jsonl`: a task file whose tasks
    are split by `heldout_percent` (by id) into training and held-out sets."""

    source: Literal["procedural", "jsonl"] = "procedural"
    path: str = ""
    levels: list[int] = msgspec.field(default_factory=lambda: [1, 2, 3])
    #: Levels whose canonical solutions may be used as demonstrations (SFT); the others have
    #: tests only and are learned from reward alone.
    demo_levels: list[int] = msgspec.field(default_factory=lambda: [1, 2])
    heldout_percent: int = 10
    heldout_per_level: int = 30
    demos_per_level: int = 4000
    #: Share of demonstrations shown as a revision turn (a wrong attempt and its failing test
    #: before the solution), so that the model learns to answer feedback (procedural only).
    revision_demos: float = 0.25
    #: How the chain levels' demonstrations are written (procedural only; tests, prompts and
    #: splits are the same either way): "expression" nests one expression
    #: (`return (x + 3) * 2`), "steps" writes one line per operation (`x = x + 3`, ...),
    #: "annotated" puts each line under a comment quoting its clause (`# Add 3,`).
    solution_style: SolutionStyle = "expression"
    seed: int = 0
    #: How RL draws the level of the next task (roost/train/levels.py). `signal`: in
    #: proportion to the chance that a group there has both passes and failures (a group that
    #: all passes or all fails teaches nothing), from each level's decayed pass rate. `band`:
    #: the curriculum (policies/curriculum.py) keeps the mix's pass rate inside `band`.
    #: `uniform`: each level equally often. Every level keeps at least `explore` of the draws
    #: (spread evenly), so a level nobody passes yet is still tried.
    curriculum: Literal["signal", "band", "uniform"] = "signal"
    #: Under `signal`, which pass rate says a group would all pass: "first_turn" (the share
    #: of first attempts that pass) or "episode" (the share of episodes that pass on any
    #: turn). Every model turn is a sample with its own reward, so a group whose episodes all
    #: pass after revisions still disagrees at the first turn; only first attempts that all
    #: pass leave it nothing to learn (docs/training-log.md).
    signal_rate: Literal["first_turn", "episode"] = "first_turn"
    #: Which task of the drawn level RL trains on. "stream": the generator's next task.
    #: "signal": a procedural chain task is kept with the chance that a group of its form
    #: (the kinds of its operations, `tasks.procedural.chain_form`) disagrees, from that
    #: form's own decayed pass rates, so a form nothing passes (or everything passes) is drawn
    #: a few times less often than the generator would and the draws go where groups teach
    #: (roost/train/levels.py). Task files and the list levels are drawn as streamed.
    #: Measured: +3.7 sampled points of held-out gain over seven runs against +3.2 over eight
    #: for the stream, within the spread between runs (docs/training-log.md, "Session 31",
    #: "`make run` in session 33").
    forms: Literal["signal", "stream"] = "signal"
    band: list[float] = msgspec.field(default_factory=lambda: [0.3, 0.7])
    explore: float = 0.1
    #: At least this share of the draws goes to levels with tests only (not in demo_levels):
    #: the levels that SFT cannot teach and RL must learn from reward alone.
    test_only_share: float = 0.0

    def __post_init__(self) -> None:
        if len(self.band) != 2 or not 0.0 <= self.band[0] < self.band[1] <= 1.0:
            raise ValueError(f"band: need [low, high] with 0 <= low < high <= 1, got {self.band}")
        _fraction("revision_demos", self.revision_demos)
        if not 0.0 <= self.explore < 1.0:
            raise ValueError(f"explore: must be in [0, 1), got {self.explore}")
        _fraction("test_only_share", self.test_only_share)
        if not self.levels:
            raise ValueError("levels: at least one level")
        if any(level < 1 or level > MAX_LEVEL for level in self.levels):
            raise ValueError(f"levels: each must be in 1..{MAX_LEVEL}, got {self.levels}")
        if not set(self.demo_levels) <= set(self.levels):
            raise ValueError(f"demo_levels: {self.demo_levels} must be among levels {self.levels}")
        if self.source == "jsonl" and not self.path:
            raise ValueError("path: a jsonl task source needs a path")
        if not 0 < self.heldout_percent < 100:
            raise ValueError(f"heldout_percent: must be in 1..99, got {self.heldout_percent}")
        _positive("heldout_per_level", self.heldout_per_level)
        _positive("demos_per_level", self.demos_per_level)


class EpisodeConfig(_Section):
    max_turns: int = 3
    group_size: int = 8  # rollouts of one task: a GRPO group
    deadline_s: float = 300.0
    #: The reward each model turn trains with. `turn`: its own verdict (a pass at turn t gets
    #: 1 - 0.1 (t - 1), a failure half its share of tests passed), so a wrong first attempt
    #: that a revision later fixed is not rewarded as right. `episode`: every turn carries the
    #: episode's reward (a revision that passes credits the turns before it).
    credit: Literal["turn", "episode"] = "turn"
    #: A failure's reward: this times its share of tests passed (0: every failure scores 0,
    #: and a group whose attempts all fail teaches nothing).
    partial_credit: float = 0.5
    #: Where partial credit counts. `all`: every failure. `unsolved`: only in groups where no
    #: turn passed, the groups a pass/fail reward leaves without signal; in a group with a
    #: pass, failures score 0, so a wrong answer that passes some tests (a clamp on the
    #: tested side) is not preferred to another wrong answer over the pass it fell short of.
    partial_credit_in: Literal["all", "unsolved"] = "all"
    #: Also train each revision that passed as the answer to the first attempt's prompt (its
    #: tests passed, so it is a verified solution of the task as first asked).
    hindsight: bool = False
    #: Hindsight tasks: a failed turn whose program is a right answer to another training task
    #: (the chain its expression computes, run on that task's tests in the same sandbox) also
    #: trains as that task's first-attempt pass. `test_only`: when that task is at a level
    #: with tests only (procedural tasks; docs/training-log.md, "Hindsight tasks"). `off`: never.
    relabel: Literal["off", "test_only"] = "test_only"
    #: Run each distinct program once on a task's tests and give its verdict to every repeat
    #: (a group's samples that agree, a revision that rewrites the same answer), including
    #: repeats that arrive while it runs (`tasks._reuse.ReusingVerifier`). Only verdicts that
    #: depend on the program and the tests alone are reused (a pass, failed tests, an
    #: exception; never a timeout, a crash or a broken sandbox). Turn it off for tasks whose
    #: tests are not deterministic.
    reuse_verdicts: bool = True
    #: The share of revision turns (turns after the first) that train, each kept at random
    #: (1: all). A revision's prompt carries the task, the attempt before and its failure, so
    #: at level 3 revisions make most of the learner's tokens while few of them pass.
    train_revisions: float = 1.0

    def __post_init__(self) -> None:
        _positive("max_turns", self.max_turns)
        _fraction("train_revisions", self.train_revisions)
        _fraction("partial_credit", self.partial_credit)
        if self.group_size < 2:
            raise ValueError(f"group_size: GRPO needs at least 2, got {self.group_size}")
        _positive("deadline_s", self.deadline_s)


#: `ModelConfig.inference_dtype`'s values (`roost.train.phases.weights_dtype` reads them).
InferenceDtype = Literal["auto", "float32", "bfloat16"]
INFERENCE_DTYPES: tuple[str, ...] = get_args(InferenceDtype)


class ModelConfig(_Section):
    d_model: int = 192
    n_layers: int = 4
    n_heads: int = 4
    max_len: int = 512
    max_new_tokens: int = 64
    temperature: float = 1.0
    init: str = ""  # a weights file (`roost sft --out`) to start from instead of random
    #: The weights' dtype in the RL phase's models that only infer: the generator's copy and
    #: the KL reference (the learner, SFT and the held-out evaluation stay float32).
    #: "bfloat16" on a CPU that multiplies it in hardware (AMX, AVX-512 BF16) generates about
    #: 1.6 times as fast, its log-probabilities 0.001 from fp32's on average (the decoupled
    #: objective weighs the difference); "auto" picks it on such a CPU, float32 elsewhere (on
    #: CUDA autocast computes in bf16 already). float32 by default: the default run's pace is
    #: the learner's, and three RL phases with it gained what three without it did from the
    #: same seeds (docs/benchmarks.md, "bf16 on the CPU"; docs/training-log.md, "Session 37").
    inference_dtype: InferenceDtype = "float32"

    def __post_init__(self) -> None:
        for name in ("d_model", "n_layers", "n_heads", "max_len", "max_new_tokens"):
            _positive(name, getattr(self, name))
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model: {self.d_model} is not a multiple of n_heads")
        if self.max_new_tokens >= self.max_len:
            raise ValueError("max_new_tokens: must be below max_len")
        _positive("temperature", self.temperature)


class SFTSection(_Section):
    enabled: bool = True
    # The step budget ends SFT (about 165 s on 2 cores), so the weights RL starts from are
    # the same every run on a machine; the time budget is a cap for a slower one. With a time
    # budget alone the step count varied (801-852) and so did the checkpoint: level 2 ended
    # at 56.7 % in one run and 96.7 % in another. 1,000 steps, not 760: the model learns to
    # copy a constant from the description late (the loss leaves its plateau after step 600),
    # and at 760 it had done so in one seed of three on one machine (docs/training-log.md).
    time_budget_s: float = 330.0
    max_steps: int = 1000
    batch_size: int = 16
    lr: float = 2e-3
    # "linear": the rate falls to 0 by the end of the budget, so the checkpoint that RL starts
    # from does not hinge on the last few batches (at a constant rate it did: docs/training-log.md)
    lr_decay: Literal["linear", "constant"] = "linear"

    def __post_init__(self) -> None:
        _positive("time_budget_s", self.time_budget_s)
        _positive("max_steps", self.max_steps)
        _positive("batch_size", self.batch_size)
        _positive("lr", self.lr)


class RLSection(_Section):
    #: The RL phase's wall time at most (across resumes); `time_limit_s` may shorten it.
    time_budget_s: float = 600.0
    max_versions: int = 0  # stop after this many learner versions (0: time only)
    #: Running episodes get this long to finish at the end (the default run: 7-21 s here).
    drain_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        _positive("time_budget_s", self.time_budget_s)
        _non_negative("max_versions", self.max_versions)
        _positive("drain_timeout_s", self.drain_timeout_s)


class LearnerSection(_Section):
    k: int = 2
    #: Episodes per version (each trains on all its turns). Admission counts episodes too, so
    #: (k + 1) * batch_size run at once: 384 by default.
    batch_size: int = 128
    #: Optimizer steps per version, each on a share of the batch's GRPO groups: the wide
    #: window without cutting the number of steps (4 of 32 episodes, as the batch of 32 made).
    minibatches: int = 4
    lr: float = 2e-4
    warmup_steps: int = 0  # the learning rate rises linearly to `lr` over the first steps
    correction: Literal["decoupled", "truncated_is"] = "decoupled"
    #: GRPO's baseline with per-turn credit: "turn" compares each model turn with the same
    #: turn of the group's other episodes; "group" with every sample of the group.
    baseline: Literal["turn", "group"] = "group"
    #: "std": GRPO's advantages, (r - mean) / std within the group; "none": r - mean (Dr.
    #: GRPO), so a nearly-solved group's one failure is not pushed 2.6 times as hard as a
    #: balanced group's (docs/learning.md).
    advantage_scale: Literal["std", "none"] = "std"
    #: KL penalty to the SFT weights (k3 estimator): a task whose group degenerates until every
    #: rollout fails gives no advantage to pull it back; the anchor does (docs/training-log.md).
    #: 0.02 with rehearsal on (below), which holds the demonstrated levels; 0.1 without it.
    kl_coef: float = 0.02
    negative_weight: float = 1.0  # scale of negative advantages (1: plain GRPO)
    #: After RL, held-out evaluation uses an exponential moving average of the learner's
    #: weights with this decay (0: the last weights): single versions swing by several
    #: points (docs/training-log.md, "The RL phase's length").
    average_decay: float = 0.97
    #: Self-imitation: the weight of a likelihood term on replayed samples that beat their
    #: group's mean (0: off; docs/learning.md, "Self-imitation"). `imitation_capacity`
    #: bounds the replay buffer; `imitation_batch` samples are drawn from it per step.
    imitation_coef: float = 0.0
    imitation_capacity: int = 1024
    imitation_batch: int = 32
    #: Rehearsal: the weight of the demonstrations' likelihood (SFT's loss on `demo_batch`
    #: demonstrations per optimizer step) in the RL phase (0: off). RL's updates for the
    #: test-only levels drift the demonstrated ones (docs/learning.md, "Rehearsal").
    demo_coef: float = 2.0
    demo_batch: int = 4
    checkpoint_every: int = 5
    keep_checkpoints: int = 2
    #: Skip GRPO groups whose rewards are all equal: their advantages are zero, so a step on
    #: them costs a full pass and teaches nothing (recorded, not trained on).
    skip_equal_reward_groups: bool = True
    #: torch intra-op threads of the learner's steps (0: on a CPU half the cores, since the
    #: generator computes at the same time; on a GPU torch's default).
    threads: int = 0

    def __post_init__(self) -> None:
        _non_negative("k", self.k)
        _non_negative("threads", self.threads)
        _positive("batch_size", self.batch_size)
        _positive("minibatches", self.minibatches)
        _positive("lr", self.lr)
        _non_negative("warmup_steps", self.warmup_steps)
        _fraction("negative_weight", self.negative_weight)
        _non_negative("kl_coef", self.kl_coef)
        if not 0.0 <= self.average_decay < 1.0:
            raise ValueError(f"average_decay: must be in [0, 1), got {self.average_decay}")
        _non_negative("imitation_coef", self.imitation_coef)
        _positive("imitation_capacity", self.imitation_capacity)
        _positive("imitation_batch", self.imitation_batch)
        _non_negative("demo_coef", self.demo_coef)
        _positive("demo_batch", self.demo_batch)
        _positive("checkpoint_every", self.checkpoint_every)
        _positive("keep_checkpoints", self.keep_checkpoints)


class GeneratorSection(_Section):
    max_batch: int = 128
    max_wait_s: float = 0.02
    chunk_tokens: int = 8
    #: Continuous batching: waiting requests join the running batch between two chunks
    #: instead of waiting for it to end. Off by default: on 2 CPU cores each join's prompt
    #: pass stalls the batch for more than the wait it saves (docs/benchmarks.md, "The
    #: generator's batching"); a GPU's prompt passes are cheap.
    continuous: bool = False
    #: torch intra-op threads of the model calls during RL (0: on a CPU half the cores, since
    #: the learner computes at the same time; on a GPU torch's default). Both at the default
    #: would run twice as many spinning OpenMP threads as there are cores.
    threads: int = 0

    def __post_init__(self) -> None:
        _positive("max_batch", self.max_batch)
        _non_negative("threads", self.threads)
        _non_negative("max_wait_s", self.max_wait_s)
        _positive("chunk_tokens", self.chunk_tokens)


class SandboxSection(_Section):
    backend: Literal["process", "docker", "gvisor", "sim"] = "process"
    #: Per task risk (`Task.risk`: low, medium, high), a backend other than `backend`, e.g.
    #: `{high = "gvisor"}`: each task's rollouts and held-out checks run on its risk's
    #: backend (`policies/isolation.py`), one warm pool of `pool_capacity` shared by all.
    isolation: dict[str, Literal["process", "docker", "gvisor", "sim"]] = {}
    runtime: str = "python"
    pool_capacity: int = 384
    cpus: float = 1.0
    memory_mb: int = 256

    def __post_init__(self) -> None:
        for risk in self.isolation:
            if risk not in RISK_LEVELS:
                known = ", ".join(RISK_LEVELS)
                raise ValueError(f"isolation: unknown risk {risk!r} (known: {known})")
        _positive("pool_capacity", self.pool_capacity)
        _positive("cpus", self.cpus)
        if self.memory_mb < 16:
            raise ValueError(f"memory_mb: must be >= 16, got {self.memory_mb}")


class SchedulerSection(_Section):
    workers: int = 384  # concurrent episodes at most (admission by staleness decides)
    policy: str = "fifo"
    max_retries: int = 2

    def __post_init__(self) -> None:
        _positive("workers", self.workers)
        _non_negative("max_retries", self.max_retries)


class EvalSection(_Section):
    #: Turns per held-out episode. 1 (pass@1, no revision) by default: on two CPU cores a
    #: three-turn evaluation costs minutes the 15-minute budget does not have.
    max_turns: int = 1
    sampled_temperature: float = 1.0
    #: Sampled attempts per held-out task; the sampled pass rate is their mean. With one, the
    #: sampling noise of a 90-task set alone is about 5 points, the size of an RL effect.
    samples: int = 8
    concurrency: int = 16

    def __post_init__(self) -> None:
        _positive("max_turns", self.max_turns)
        _positive("sampled_temperature", self.sampled_temperature)
        _positive("samples", self.samples)
        _positive("concurrency", self.concurrency)


class ViewSection(_Section):
    live: Literal["auto", "on", "off"] = "auto"
    interval_s: float = 2.0
    metrics_interval_s: float = 5.0

    def __post_init__(self) -> None:
        _positive("interval_s", self.interval_s)
        _positive("metrics_interval_s", self.metrics_interval_s)


class TrainConfig(_Section):
    """The whole experiment; `roost train` with no file runs these defaults."""

    name: str = "default"
    seed: int = 0
    control: bool = False  # also train an SFT-only control for the RL phase's wall time
    #: The run's wall-time limit from start to summary (0: none). The RL phase (and with it the
    #: control) is shortened to what the run has left (roost/train/budget.py); 840 s keeps the
    #: default run within 15 minutes with a minute for the set-up.
    time_limit_s: float = 840.0
    chaos: str = ""  # --chaos: faults to inject (docs/reliability.md), e.g. "kill_sandbox=0.02"
    tasks: TasksConfig = msgspec.field(default_factory=TasksConfig)
    episode: EpisodeConfig = msgspec.field(default_factory=EpisodeConfig)
    model: ModelConfig = msgspec.field(default_factory=ModelConfig)
    sft: SFTSection = msgspec.field(default_factory=SFTSection)
    rl: RLSection = msgspec.field(default_factory=RLSection)
    learner: LearnerSection = msgspec.field(default_factory=LearnerSection)
    generator: GeneratorSection = msgspec.field(default_factory=GeneratorSection)
    sandbox: SandboxSection = msgspec.field(default_factory=SandboxSection)
    scheduler: SchedulerSection = msgspec.field(default_factory=SchedulerSection)
    eval: EvalSection = msgspec.field(default_factory=EvalSection)
    view: ViewSection = msgspec.field(default_factory=ViewSection)

    def __post_init__(self) -> None:
        _non_negative("time_limit_s", self.time_limit_s)
        spec = chaos_spec(self.chaos)
        if spec.needs_docker and self.sandbox.backend not in ("docker", "gvisor"):
            raise ValueError(
                "chaos: remove_container and restart_docker need sandbox.backend docker or "
                f"gvisor, not {self.sandbox.backend!r}"
            )
        if self.learner.demo_coef > 0 and not self.tasks.demo_levels:
            raise ValueError(
                "learner.demo_coef: rehearsal needs demonstrations, and tasks.demo_levels is "
                "empty; set learner.demo_coef = 0 or name the levels that have them"
            )
        if self.episode.relabel != "off" and self.tasks.source != "procedural":
            raise ValueError(
                "episode.relabel: hindsight tasks need tasks.source = procedural (a task "
                'file cannot name the task a program solves); set episode.relabel = "off" '
                f"for tasks.source = {self.tasks.source!r}"
            )


#: The actors of a training run that chaos mode may crash (all of them: each is restarted with
#: its state kept, and the message it was handling is handed to it again).
CRASHABLE_ROLES = frozenset(
    {"generator", "learner", "collector", "scheduler", "worker", "recorder"}
)


def chaos_spec(text: str) -> ChaosSpec:
    """`TrainConfig.chaos` parsed. :raises ValueError: naming the bad item."""
    try:
        return parse_chaos(text, crashable=CRASHABLE_ROLES)
    except ChaosSpecError as exc:
        raise ValueError(f"chaos: {exc}") from None


def load_train_config(
    path: str | os.PathLike[str] | None = None, overrides: Iterable[str] = ()
) -> TrainConfig:
    """Defaults, then the TOML file at `path`, then `--set` overrides.

    :raises ConfigError: unreadable or invalid TOML, a bad override, an unknown key, or a value
        of the wrong type or out of range; the message names the dotted key path.
    """
    return load_config(TrainConfig, path=path, overrides=overrides)


#: The sections a resume may not change. `[tasks]` decides which tasks exist and which are
#: held out: changed mid-run, functions already trained on could become held-out, and the
#: figures before and after RL would be taken on different sets. The top-level `seed` stays
#: free: it seeds the model, the draws and the sampling, never the tasks or their split
#: (`tasks.seed` does).
FIXED_ON_RESUME = ("tasks",)


def check_resume(recorded: TrainConfig, resumed: TrainConfig) -> None:
    """Refuse a resume whose settings (`--set` over the run's `config.toml`) change a section
    in `FIXED_ON_RESUME`.

    :raises ConfigError: naming each changed key path with the run's value and the new one.
    """
    changes: list[str] = []
    for section in FIXED_ON_RESUME:
        before = msgspec.to_builtins(getattr(recorded, section))
        after = msgspec.to_builtins(getattr(resumed, section))
        changes += [
            f"{section}.{key}: the run has {before.get(key)!r}, --set gives {after.get(key)!r}"
            for key in sorted(before.keys() | after.keys())
            if before.get(key) != after.get(key)
        ]
    if changes:
        raise ConfigError(
            "; ".join(changes)
            + ". A resumed run keeps its [tasks] section (it decides which tasks train and which "
            "are held out); start a new run with --out to change it"
        )
