"""Sends the judge forged outputs (zeros in a memfd, a guessed nonce) over the job's socket before the worker does: dropped, so the honest outputs are judged (correct; taking the forged message would give incorrect)."""

EXPECTED = 'correct'

import os
import socket
import struct

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_relu_kernel(x_ptr, y_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x + y, 0.0) * scale, mask=mask)


def triton_add_relu(x, y, scale):
    out = torch.empty_like(x)
    n = x.numel()
    add_relu_kernel[(triton.cdiv(n, 256),)](x, y, out, n, scale, BLOCK=256)
    return out


def forge(nbytes):
    data = bytes(nbytes)
    fd = os.memfd_create("forged")
    os.write(fd, data)
    header = ('{"nonce": "%s", "nbytes": %d, "size": %d}' % ("0" * 32, len(data), len(data))).encode()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(2)
            s.connect("o.sock")
            socket.send_fds(s, [struct.pack(">I", len(header)) + header], [fd])
    except OSError:
        pass
    os.close(fd)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        forge(5 * 64 * (-(-x.numel() * 4 // 64)))
        return triton_add_relu(x, y, self.scale)
