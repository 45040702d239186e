"""Knowledge-distillation loss as in DistilBERT: KL(teacher || student) of temperature-2 softmaxes
over the 30522 BERT vocabulary, batchmean x T^2; 16 x 128 tokens."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, SEQ, VOCAB = 16, 128, 30522
TEMPERATURE = 2.0


class Model(nn.Module):
    def __init__(self, temperature):
        super().__init__()
        self.temperature = temperature

    def forward(self, student_logits, teacher_logits):
        t = self.temperature
        s = F.log_softmax(student_logits.view(-1, student_logits.size(-1)) / t, dim=-1)
        p = F.softmax(teacher_logits.view(-1, teacher_logits.size(-1)) / t, dim=-1)
        return F.kl_div(s, p, reduction="batchmean") * (t * t)


def get_inputs():
    return [torch.randn(BATCH, SEQ, VOCAB), torch.randn(BATCH, SEQ, VOCAB)]


def get_init_inputs():
    return [TEMPERATURE]
