"""The judge: sandboxed, hack-resistant verification and timing of candidate Triton programs.

    from drtriton.judge import JudgeConfig, verify
    verdict = verify(reference_source, candidate_source, JudgeConfig(device="cpu"))
    print(verdict.status, verdict.reason)

See docs/judge.md for what is checked, the presets and modes, and the adversarial suite.
"""

from drtriton.judge.compare import compare_outputs
from drtriton.judge.config import PRESETS, TOLERANCES, JudgeConfig
from drtriton.judge.isolation import SandboxUnavailable
from drtriton.judge.pair import InvalidReferenceError
from drtriton.judge.pool import JudgePool, verify, verify_group, verify_many
from drtriton.judge.verdict import STATUSES, Verdict

__all__ = [
    "PRESETS",
    "STATUSES",
    "TOLERANCES",
    "InvalidReferenceError",
    "JudgeConfig",
    "JudgePool",
    "SandboxUnavailable",
    "Verdict",
    "compare_outputs",
    "verify",
    "verify_group",
    "verify_many",
]
