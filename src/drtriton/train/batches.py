"""Batches for policy-gradient updates: prompt + completion rows and their token log-probabilities.

Prompts are left-padded to end at one column and completions right-padded after it, so one
``logits_to_keep`` slice of the model's output covers every completion (``token_logps``).
"""

from __future__ import annotations

import torch


def build_batch(prompts: list[list[int]], completions: list[list[int]], pad: int) -> dict:
    """Prompts left-padded to end at one column, completions right-padded after it.

    Only the completion columns need logits (``logits_to_keep``).
    """
    p_width = max(len(p) for p in prompts)
    c_width = max(1, max(len(c) for c in completions))
    rows, masks, cmask = [], [], []
    for p, c in zip(prompts, completions, strict=True):
        left, right = p_width - len(p), c_width - len(c)
        rows.append([pad] * left + p + c + [pad] * right)
        masks.append([0] * left + [1] * (len(p) + len(c)) + [0] * right)
        cmask.append([1] * len(c) + [0] * right)
    ids = torch.tensor(rows)
    attention = torch.tensor(masks)
    return {
        "input_ids": ids,
        "attention_mask": attention,
        "position_ids": (attention.cumsum(-1) - 1).clamp(min=0),
        "targets": ids[:, p_width:],
        "completion_mask": torch.tensor(cmask, dtype=torch.float32),
    }


def token_logps(model, batch: dict, device: str) -> torch.Tensor:
    """log pi(token) for every completion column (rows: answers), float32."""
    width = batch["targets"].shape[1]
    logits = model(
        input_ids=batch["input_ids"].to(device),
        attention_mask=batch["attention_mask"].to(device),
        position_ids=batch["position_ids"].to(device),
        logits_to_keep=width + 1,
        use_cache=False,
    ).logits[:, :-1].float()
    targets = batch["targets"].to(device)
    picked = logits.gather(-1, targets[..., None]).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


def slice_rows(batch: dict, rows: list[int]) -> dict:
    """The batch's rows ``rows``, without completion columns that are padding in all of them."""
    index = torch.tensor(rows)
    sliced = {k: v[index] for k, v in batch.items()}
    # Drop columns that are padding in every selected row (saves compute on short answers).
    width = int(sliced["completion_mask"].sum(-1).max().item()) or 1
    extra = sliced["targets"].shape[1] - width
    if extra:
        for key in ("input_ids", "attention_mask", "position_ids"):
            sliced[key] = sliced[key][:, :-extra]
        sliced["targets"] = sliced["targets"][:, :width]
        sliced["completion_mask"] = sliced["completion_mask"][:, :width]
    return sliced


def pad_rows(rows: list[torch.Tensor], width: int) -> torch.Tensor:
    """Per-answer vectors of different lengths as one zero-padded [answers, width] tensor."""
    out = torch.zeros(len(rows), width)
    for i, r in enumerate(rows):
        out[i, : r.numel()] = r
    return out
