"""Complex tensors as (real, imaginary) pairs of real expressions (``lower.Complex``): made by
``view_as_complex``, ``torch.complex`` and ``torch.polar``, ended by ``view_as_real``. This is
how a rotary embedding written with complex products (``xq_ * freqs_cis``) converts."""

from __future__ import annotations

import torch

from drtriton.compiler import ir
from drtriton.compiler.lower import Complex, Unsupported, select_last
from drtriton.compiler.lowerings.registry import fn


@fn(torch.view_as_complex)
def _view_as_complex(L, x):
    x = L.t(x)
    if not x.shape or x.shape[-1] != 2:
        raise Unsupported("view_as_complex of a tensor whose last dim is not 2")
    return Complex(select_last(x, 0), select_last(x, 1))


@fn(torch.view_as_real)
def _view_as_real(L, z):
    if not isinstance(z, Complex):
        raise Unsupported("view_as_real of a real tensor")
    dtype = ir.promote(z.re.dtype, z.im.dtype)
    parts = tuple(ir.cast(ir.reshape(ir.broadcast_to(p, z.shape), z.shape + (1,)), dtype)
                  for p in (z.re, z.im))
    return ir.Cat(z.shape + (2,), dtype, parts, len(z.shape), (0, 1))


@fn(torch.complex)
def _complex(L, real, imag):
    re, im = L.t(real), L.t(imag)
    shape = torch.broadcast_shapes(re.shape, im.shape)
    return Complex(ir.broadcast_to(re, shape), ir.broadcast_to(im, shape))


@fn(torch.polar)
def _polar(L, abs, angle):  # noqa: A002 - torch's own argument name
    r, theta = L.t(abs), L.t(angle)
    return Complex(ir.op("mul", r, ir.op("cos", theta)), ir.op("mul", r, ir.op("sin", theta)))
