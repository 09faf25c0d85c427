"""`roost profile`: where rollout time went, which actor was busy, what the learner waited on.

`sources` reads a run directory (or records handed over in memory), `analyze` turns them into a
`Profile` (plain data), and `render` prints it as a table and writes PNGs and an HTML page.
"""

from roost.profile.analyze import Profile, analyze
from roost.profile.model import PHASES, LearnerStep, RolloutTiming, timing_from_finished
from roost.profile.render import print_profile, write_profile
from roost.profile.sources import ProfileInputError, load_run

__all__ = [
    "PHASES",
    "LearnerStep",
    "Profile",
    "ProfileInputError",
    "RolloutTiming",
    "analyze",
    "load_run",
    "print_profile",
    "timing_from_finished",
    "write_profile",
]
