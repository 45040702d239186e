"""Training: warm-up pairs, SFT (TRL) and curriculum RL with DRPO. See docs/training.md.

Submodules import their heavy dependencies (transformers, trl, peft) themselves; importing this
package imports nothing heavy.
"""
