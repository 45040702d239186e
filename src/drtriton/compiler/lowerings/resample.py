"""Lowerings of resampling and rearranging ops (interpolate, pixel shuffle, roll)."""

from __future__ import annotations
