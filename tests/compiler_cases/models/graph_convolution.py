"""Two-layer GCN (Kipf & Welling): self loops with torch.eye, symmetric degree normalisation
D^-1/2 (A + I) D^-1/2, log-softmax over classes."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class GraphConvolution(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = nn.Parameter(torch.empty(in_features, out_features))
        if bias:
            self.bias = nn.Parameter(torch.empty(out_features))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.weight.size(1))
        self.weight.data.uniform_(-stdv, stdv)
        if self.bias is not None:
            self.bias.data.uniform_(-stdv, stdv)

    def forward(self, input, adj):
        support = torch.mm(input, self.weight)
        output = torch.mm(adj, support)
        if self.bias is not None:
            return output + self.bias
        return output


class Model(nn.Module):
    def __init__(self, nfeat=8, nhid=16, nclass=4, dropout=0.5):
        super().__init__()
        self.gc1 = GraphConvolution(nfeat, nhid)
        self.gc2 = GraphConvolution(nhid, nclass)
        self.dropout = dropout
        self.eval()  # an inference model: compiled for eval mode

    @staticmethod
    def normalize(adj):
        n = adj.size(0)
        adj = adj + torch.eye(n, device=adj.device, dtype=adj.dtype)
        deg = adj.sum(dim=1)
        d_inv_sqrt = deg.pow(-0.5)
        d_inv_sqrt = torch.where(torch.isinf(d_inv_sqrt), torch.zeros_like(d_inv_sqrt), d_inv_sqrt)
        return d_inv_sqrt.unsqueeze(1) * adj * d_inv_sqrt.unsqueeze(0)

    def forward(self, x, adj):
        adj = self.normalize(adj)
        x = F.relu(self.gc1(x, adj))
        x = F.dropout(x, self.dropout, training=self.training)
        x = self.gc2(x, adj)
        return F.log_softmax(x, dim=1)


def get_inputs():
    a = (torch.rand(12, 12) > 0.7).float()
    a = ((a + a.t()) > 0).float()
    return [torch.randn(12, 8), a]


def get_init_inputs():
    return [8, 16, 4, 0.5]
