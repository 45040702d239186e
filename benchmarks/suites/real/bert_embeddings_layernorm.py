"""BERT-base embeddings: word (30522 x 768) + learned position (512) + token type (2) embeddings,
LayerNorm eps 1e-12; 32 x 512 token ids."""
import torch
import torch.nn as nn

BATCH, SEQ, VOCAB, MAX_POS, TYPE_VOCAB, DIM = 32, 512, 30522, 512, 2, 768


class Model(nn.Module):
    def __init__(self, vocab, max_pos, type_vocab, dim):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, dim)
        self.position_embeddings = nn.Embedding(max_pos, dim)
        self.token_type_embeddings = nn.Embedding(type_vocab, dim)
        self.LayerNorm = nn.LayerNorm(dim, eps=1e-12)
        self.register_buffer("position_ids", torch.arange(max_pos).unsqueeze(0))

    def forward(self, input_ids, token_type_ids):
        s = input_ids.shape[1]
        x = self.word_embeddings(input_ids)
        x = x + self.token_type_embeddings(token_type_ids)
        x = x + self.position_embeddings(self.position_ids[:, :s])
        return self.LayerNorm(x)


def get_inputs():
    return [torch.randint(0, VOCAB, (BATCH, SEQ)), torch.randint(0, TYPE_VOCAB, (BATCH, SEQ))]


def get_init_inputs():
    return [VOCAB, MAX_POS, TYPE_VOCAB, DIM]
