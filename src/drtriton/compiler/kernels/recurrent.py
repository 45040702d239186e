"""One time step of an LSTM or GRU layer: the recurrent product ``h_prev @ W_hh^T`` of every gate
and the cell update, fused, for a [BB batch rows x BH hidden units] tile.

The input projection of every step (``x @ W_ih^T + b_ih``) is one GEMM before the loop; this
kernel runs once per step inside a Python loop in ``forward``, reading the previous step's hidden
state from the sequence buffer it writes (``hs[s - 1]``, or ``h0`` at the first step), so no
program reads what another writes in the same launch. The cell state (LSTM) is updated in
place: each element is read and written by the same program only.
"""

from __future__ import annotations

from drtriton.compiler.kernels.writer import Kernel, fp32_dot

# gate order of PyTorch's weights: LSTM (i, f, g, o), GRU (r, z, n)
GATES = {"lstm": 4, "gru": 3}
BLOCK_BATCH = 16  # tl.dot's smallest tile side
BLOCK_HIDDEN = 32
BLOCK_K = 32


def step_kernel(cell: str, name: str, batch: int, hidden: int, precision: str) -> Kernel:
    """The step kernel of ``cell`` ("lstm" or "gru") for one (layer, direction)."""
    gates = GATES[cell]
    B, H = batch, hidden
    helpers = {"_tanh"}
    dots = "\n".join(
        f"        w{q} = tl.load(whh_ptr + ({q * H} + rj[None, :]) * {H} + rk[:, None], "
        f"mask=wmask, other=0)\n"
        f"        acc{q} += {fp32_dot('hp', f'w{q}', precision, helpers)}"
        for q in range(gates))
    pre = "\n".join(
        f"    a{q} = acc{q} + tl.load(bhh_ptr + {q * H} + rj, mask=jm, other=0)[None, :]"
        for q in range(gates))
    gx = "\n".join(
        f"    x{q} = tl.load(gx_ptr + t * {B * gates * H} + rb[:, None] * {gates * H} + "
        f"{q * H} + rj[None, :], mask=tile, other=0)" for q in range(gates))
    if cell == "lstm":
        update = f"""\
    c_prev = tl.load(c_ptr + rb[:, None] * {H} + rj[None, :], mask=tile, other=0)
    i = tl.sigmoid(x0 + a0)
    f = tl.sigmoid(x1 + a1)
    g = _tanh(x2 + a2)
    o = tl.sigmoid(x3 + a3)
    c = f * c_prev + i * g
    tl.store(c_ptr + rb[:, None] * {H} + rj[None, :], c, mask=tile)
    h = o * _tanh(c)"""
    else:
        update = """    r = tl.sigmoid(x0 + a0)
    z = tl.sigmoid(x1 + a1)
    n = _tanh(x2 + r * a2)
    h = (1.0 - z) * n + z * h_old"""
    h_old = "" if cell == "lstm" else f"""
    if s == 0:
        h_old = tl.load(h0_ptr + rb[:, None] * {H} + rj[None, :], mask=tile, other=0)
    else:
        h_old = tl.load(hs_ptr + (s - 1) * {B * H} + rb[:, None] * {H} + rj[None, :],
                        mask=tile, other=0)"""
    accs = "\n".join(f"    acc{q} = tl.zeros([BB, BH], dtype=tl.float32)" for q in range(gates))
    source = f'''@triton.jit
def {name}(gx_ptr, whh_ptr, bhh_ptr, h0_ptr, hs_ptr, c_ptr, s, t, N, BB: tl.constexpr,
        BH: tl.constexpr, BK: tl.constexpr):
    """{cell.upper()} step s (time t): h_prev @ W_hh^T per gate, then the cell update."""
    rb = tl.program_id(0) * BB + tl.arange(0, BB)
    rj = tl.program_id(1) * BH + tl.arange(0, BH)
    bm = rb < {B}
    jm = rj < {H}
    tile = bm[:, None] & jm[None, :]
{accs}
    for k0 in range(0, {H}, BK):
        rk = k0 + tl.arange(0, BK)
        hmask = bm[:, None] & (rk[None, :] < {H})
        wmask = (rk[:, None] < {H}) & jm[None, :]
        if s == 0:
            hp = tl.load(h0_ptr + rb[:, None] * {H} + rk[None, :], mask=hmask, other=0)
        else:
            hp = tl.load(hs_ptr + (s - 1) * {B * H} + rb[:, None] * {H} + rk[None, :],
                         mask=hmask, other=0)
{dots}
{pre}
{gx}{h_old}
{update}
    tl.store(hs_ptr + s * {B * H} + rb[:, None] * {H} + rj[None, :], h, mask=tile)
'''
    grid = f"({-(-B // BLOCK_BATCH)}, {-(-H // BLOCK_HIDDEN)})"
    consts = {"BB": BLOCK_BATCH, "BH": BLOCK_HIDDEN, "BK": BLOCK_K}
    return Kernel(name, source, ["gx", "whh", "bhh", "h0", "hs", "c"], grid, consts, B * H,
                  helpers, warps=4)
