"""Text classifier: token embedding (padding_idx 0), two-layer batch_first nn.GRU, last time
step of the output, dropout, linear head."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, vocab_size=30, embed_dim=8, hidden_size=16, num_layers=2, num_classes=4,
                 dropout=0.2):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        self.gru = nn.GRU(embed_dim, hidden_size, num_layers=num_layers, batch_first=True,
                          dropout=dropout if num_layers > 1 else 0.0)
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(hidden_size, num_classes)
        self.eval()  # an inference model: compiled for eval mode

    def forward(self, tokens):
        embedded = self.embedding(tokens)
        output, hidden = self.gru(embedded)
        last = output[:, -1, :]
        return self.fc(self.dropout(last))


def get_inputs():
    return [torch.randint(0, 30, (3, 7))]


def get_init_inputs():
    return [30, 8, 16, 2, 4, 0.2]
