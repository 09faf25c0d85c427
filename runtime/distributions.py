"""Seeded random distributions, described as data so they can live in config files.

    latency = Distribution.parse({"dist": "lognormal", "median": 0.2, "sigma": 0.8})
    latency.sample(rng)

Used by simulations (latencies, episode lengths); every draw takes the caller's
`random.Random`, so a seed fixes every outcome.
"""

from __future__ import annotations

import math
import random
from typing import Any, Literal

import msgspec

__all__ = ["Distribution", "DistributionError"]


class DistributionError(ValueError):
    """A distribution spec that names an unknown kind or lacks or misuses a parameter."""


Kind = Literal["constant", "uniform", "exponential", "lognormal", "pareto"]

_PARAMS: dict[str, tuple[str, ...]] = {
    "constant": ("value",),
    "uniform": ("low", "high"),
    "exponential": ("mean",),
    "lognormal": ("median", "sigma"),
    "pareto": ("scale", "alpha"),
}


class Distribution(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One distribution of non-negative values. Parameters by kind:

    constant(value); uniform(low, high); exponential(mean); lognormal(median, sigma);
    pareto(scale, alpha) - heavy-tailed, minimum `scale`. `cap` bounds every draw.
    """

    dist: Kind
    value: float | None = None
    low: float | None = None
    high: float | None = None
    mean: float | None = None
    median: float | None = None
    sigma: float | None = None
    scale: float | None = None
    alpha: float | None = None
    cap: float | None = None

    def __post_init__(self) -> None:
        needed = _PARAMS[self.dist]
        for name in needed:
            value = getattr(self, name)
            if value is None:
                raise DistributionError(f"{self.dist} needs {name!r}")
            if value < 0 or not math.isfinite(value):
                raise DistributionError(f"{self.dist}: {name} must be finite and >= 0, got {value}")
        for name in ("value", "low", "high", "mean", "median", "sigma", "scale", "alpha"):
            if name not in needed and getattr(self, name) is not None:
                raise DistributionError(f"{self.dist} takes {', '.join(needed)}, not {name!r}")
        if self.dist == "uniform" and self.low > self.high:  # type: ignore[operator]
            raise DistributionError(f"uniform: low {self.low} > high {self.high}")
        if self.dist == "lognormal" and not self.median:
            raise DistributionError("lognormal: median must be > 0")
        if self.dist == "pareto" and not self.alpha:
            raise DistributionError("pareto: alpha must be > 0")

    @classmethod
    def parse(cls, data: Any, *, where: str = "distribution") -> Distribution:
        """From a mapping, or a bare number meaning a constant.

        :raises DistributionError: naming `where` and what is wrong.
        """
        if isinstance(data, int | float) and not isinstance(data, bool):
            data = {"dist": "constant", "value": float(data)}
        try:
            return msgspec.convert(data, cls)
        except (msgspec.ValidationError, DistributionError) as exc:
            raise DistributionError(f"{where}: {exc}") from None

    @classmethod
    def constant(cls, value: float) -> Distribution:
        return cls(dist="constant", value=value)

    def sample(self, rng: random.Random) -> float:
        match self.dist:
            case "constant":
                draw = self.value
            case "uniform":
                draw = rng.uniform(self.low, self.high)  # type: ignore[arg-type]
            case "exponential":
                draw = rng.expovariate(1.0 / self.mean) if self.mean else 0.0
            case "lognormal":
                draw = rng.lognormvariate(math.log(self.median), self.sigma)  # type: ignore[arg-type]
            case "pareto":
                draw = self.scale * rng.paretovariate(self.alpha)  # type: ignore[operator,arg-type]
        assert draw is not None
        return draw if self.cap is None else min(draw, self.cap)

    def expected(self) -> float:
        """The mean (capped draws make it an upper bound); inf for a pareto with alpha <= 1."""
        match self.dist:
            case "constant":
                return self.value  # type: ignore[return-value]
            case "uniform":
                return (self.low + self.high) / 2  # type: ignore[operator]
            case "exponential":
                return self.mean  # type: ignore[return-value]
            case "lognormal":
                return self.median * math.exp(self.sigma**2 / 2)  # type: ignore[operator]
            case "pareto":
                alpha = self.alpha or 0.0
                return math.inf if alpha <= 1 else self.scale * alpha / (alpha - 1)  # type: ignore[operator]
