"""MLP VAE: encoder to mu/logvar, reparameterisation that returns mu outside training, decoder to
logits; returns the reconstruction and the loss (BCE-with-logits summed plus the KL term)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, input_dim=64, hidden_dim=32, latent_dim=8):
        super().__init__()
        self.fc1 = nn.Linear(input_dim, hidden_dim)
        self.fc_mu = nn.Linear(hidden_dim, latent_dim)
        self.fc_logvar = nn.Linear(hidden_dim, latent_dim)
        self.fc3 = nn.Linear(latent_dim, hidden_dim)
        self.fc4 = nn.Linear(hidden_dim, input_dim)
        self.eval()  # an inference model: compiled for eval mode

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc_mu(h1), self.fc_logvar(h1)

    def reparameterize(self, mu, logvar):
        if self.training:
            std = torch.exp(0.5 * logvar)
            eps = torch.randn_like(std)
            return mu + eps * std
        return mu

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return self.fc4(h3)

    def loss_function(self, recon_logits, x, mu, logvar):
        bce = F.binary_cross_entropy_with_logits(recon_logits, x, reduction="sum")
        kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        return (bce + kld) / x.size(0)

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, self.fc1.in_features))
        z = self.reparameterize(mu, logvar)
        recon_logits = self.decode(z)
        loss = self.loss_function(recon_logits, x, mu, logvar)
        return torch.sigmoid(recon_logits), loss


def get_inputs():
    return [torch.rand(4, 64)]


def get_init_inputs():
    return [64, 32, 8]
