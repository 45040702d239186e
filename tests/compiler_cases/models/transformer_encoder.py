"""Sequence classifier: input projection, learned positions, nn.TransformerEncoder of two
nn.TransformerEncoderLayer (batch_first=True, GELU), mean pooling, linear head."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features=12, d_model=32, nhead=4, dim_feedforward=64, num_layers=2,
                 max_len=16, num_classes=5, dropout=0.1):
        super().__init__()
        self.input_proj = nn.Linear(in_features, d_model)
        self.pos_embedding = nn.Parameter(torch.randn(1, max_len, d_model) * 0.02)
        encoder_layer = nn.TransformerEncoderLayer(d_model=d_model, nhead=nhead,
                                                   dim_feedforward=dim_feedforward,
                                                   dropout=dropout, activation="gelu",
                                                   batch_first=True)
        self.encoder = nn.TransformerEncoder(encoder_layer, num_layers=num_layers,
                                             enable_nested_tensor=False)
        self.head = nn.Linear(d_model, num_classes)
        self.eval()  # an inference model: compiled for eval mode

    def forward(self, x):
        x = self.input_proj(x)
        x = x + self.pos_embedding[:, : x.size(1)]
        x = self.encoder(x)
        return self.head(x.mean(dim=1))


def get_inputs():
    return [torch.randn(2, 10, 12)]


def get_init_inputs():
    return [12, 32, 4, 64, 2, 16, 5, 0.1]
