"""Quality filters: a drawn program is kept only if it runs with the expected shapes and dtypes,
its outputs are finite and not constant, every input changes an output, and its float32 result is
its float64 one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from drtriton.synth.programs import SynthProgram

if TYPE_CHECKING:  # the filters run stored programs where CP-SAT (OR-Tools) may be missing
    from drtriton.synth.dag import _Draft


# ----------------------------------------------------------------------------- quality filters
def check_program(
    draft: _Draft | SynthProgram, mode: str, device: str = "cpu", seed: int = 0
) -> str | None:
    """Why the program must be rejected, or None if it passes. Mode: run, meta or none."""
    if mode == "none":
        return None
    import torch

    from drtriton.program import as_output_tuple, load_program

    module = load_program(draft.source, "synth")
    try:
        if mode == "meta":
            with torch.device("meta"):
                outputs = as_output_tuple(module.Model()(*module.get_inputs()))
        else:
            runs = _Runs(module, device, seed)
            outputs = runs.outputs
    except Exception as exc:  # a shape rule the catalogue got wrong: report, never hide
        return f"error:{type(exc).__name__}: {str(exc)[:200]}"
    if [list(o.shape) for o in outputs] != draft.output_shapes:
        return "shape_mismatch"
    if [str(o.dtype).removeprefix("torch.") for o in outputs] != draft.output_dtypes:
        return "dtype_mismatch"
    if mode == "meta":
        return None
    if not all(torch.isfinite(o).all() for o in outputs if o.is_floating_point()):
        return "nonfinite"
    if any(bool((o == o.flatten()[0]).all()) for o in outputs):
        return "constant_output"
    return runs.unused_input() or runs.ill_conditioned()


class _Runs:
    """A program run on seeded inputs, with the follow-up runs the filters need."""

    def __init__(self, module, device: str, seed: int) -> None:
        import torch

        self.generator = torch.Generator(device=device).manual_seed(seed)
        self.shapes = [tuple(x.shape) for x in module.get_inputs()]
        self.device = device
        self.inputs = [self._randn(s) for s in self.shapes]
        self.model = module.Model().to(device)
        self.outputs = self.run(self.inputs)

    def _randn(self, shape):
        import torch

        return torch.randn(shape, generator=self.generator, device=self.device)

    def run(self, inputs):
        import torch

        from drtriton.program import as_output_tuple

        with torch.no_grad():
            return as_output_tuple(self.model(*inputs))

    def unused_input(self) -> str | None:
        """Reject a program with an input that changes no output."""
        import torch

        for i, shape in enumerate(self.shapes):
            changed = list(self.inputs)
            changed[i] = self._randn(shape)
            again = self.run(changed)
            if all(torch.equal(a, b) for a, b in zip(self.outputs, again, strict=True)):
                return "unused_input"
        return None

    def ill_conditioned(self) -> str | None:
        """Reject a program whose float32 result is not its float64 result (e.g. argmax ties).

        A candidate cannot be expected to reproduce rounding accidents: where float32 and float64
        disagree beyond a tenth of the judge's tolerance, the reference itself is unreliable.
        Programs that cast explicitly to float32 are compared with a run on inputs perturbed by
        one part in a million instead.
        """
        import torch

        try:
            exact = self.run([x.double() for x in self.inputs])
        except RuntimeError:  # an explicit .float() cast meets a float64 tensor: perturb instead
            exact = self.run([x * (1 + 1e-6 * self._randn(x.shape)) for x in self.inputs])
            exact = [o.double() if o.is_floating_point() else o for o in exact]
        for out32, out64 in zip(self.outputs, exact, strict=True):
            if out32.is_floating_point():
                ok = torch.allclose(out32.double(), out64.double(), atol=1e-3, rtol=1e-3)
            else:
                ok = torch.equal(out32, out64)
            if not ok:
                return "ill_conditioned"
        return None
