"""BERT-base pooler (BertPooler): [CLS] hidden state -> linear 768 -> 768 with bias -> tanh; batch
256 x 128 tokens (GLUE-length sequences)."""
import torch
import torch.nn as nn

BATCH, SEQ, HIDDEN = 256, 128, 768


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)

    def forward(self, hidden_states):
        return torch.tanh(self.dense(hidden_states[:, 0]))


def get_inputs():
    return [torch.randn(BATCH, SEQ, HIDDEN)]


def get_init_inputs():
    return [HIDDEN]
