"""drtriton: turn PyTorch programs into fast, verified Triton kernels; train the LLMs that do it.

Pipeline stages, one module each, talking through small frozen records saved as JSONL:

- ``ops``      the catalogue of the 61 operators (PyTorch spelling, CP-SAT shape rules, FLOP models)
- ``synth``    CSP-DAG synthesis of KernelBench-format programs with OR-Tools CP-SAT
- ``program``  loading and running KernelBench-format programs (``Model``, ``get_inputs``, ...)
- ``judge``    sandboxed, hack-resistant verification and GPU timing of candidates
- ``cli``      the ``drtriton`` command
"""

__version__ = "0.1.0"
