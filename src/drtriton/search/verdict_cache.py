"""The search's verdict cache: SQLite, keyed by content, judging settings, GPU and versions."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3

from drtriton.judge import JudgeConfig, Verdict


class VerdictCache:
    """SQLite cache of verdicts keyed by (reference, candidate, device, versions, judge
    settings)."""

    def __init__(self, path: str | None, environment: dict) -> None:
        self.db = sqlite3.connect(path) if path else None
        self.salt = json.dumps(environment, sort_keys=True)
        if self.db is not None:
            self.db.execute(
                "CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, verdict TEXT)"
            )

    def key(self, reference: str, candidate: str) -> str:
        return hashlib.sha256("\0".join((self.salt, reference, candidate)).encode()).hexdigest()

    def get(self, reference: str, candidate: str) -> Verdict | None:
        if self.db is None:
            return None
        row = self.db.execute(
            "SELECT verdict FROM verdicts WHERE key = ?", (self.key(reference, candidate),)
        ).fetchone()
        return Verdict.from_dict(json.loads(row[0])) if row else None

    def put(self, reference: str, candidate: str, verdict: Verdict) -> None:
        if self.db is not None:
            self.db.execute(
                "INSERT OR REPLACE INTO verdicts VALUES (?, ?)",
                (self.key(reference, candidate), verdict.to_json()),
            )
            self.db.commit()


# JudgeConfig fields that do not change what a verdict means (where and how long it may run)
_NOT_JUDGING = ("device", "timeout_s", "reference_timeout_s", "baseline_timeout_s", "seed",
                "memory_limit_gb", "output_cap_bytes", "scratch_dir", "extra", "baseline_cache",
                "fresh_baselines", "jobs_per_gpu")


def judging_settings(config: JudgeConfig) -> str:
    """Every judge setting a cached verdict depends on (trials, timing, baselines, preset, mode),
    as text for the cache key: a verdict cached under other settings is not reused."""
    fields = {k: v for k, v in dataclasses.asdict(config).items() if k not in _NOT_JUDGING}
    return json.dumps(fields, sort_keys=True, default=str)
