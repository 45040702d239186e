"""Lowerings of loss functions and gathers (cross entropy, KL divergence, gather)."""

from __future__ import annotations
