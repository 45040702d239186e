"""drtriton: turn PyTorch programs into fast, verified Triton kernels; train the LLMs that do it.

Pipeline stages talk through small frozen records saved as JSONL. The package is layered: a
module imports modules of its own layer or of layers below it, never above (checked, with the
absence of import cycles, by ``tests/test_structure.py``). Top to bottom:

Commands

- ``cli``        the ``drtriton`` command (typer): options, input checks, messages
- ``commands``   the bodies of commands that span layers: ``convert`` (compile, verify, search)

Stages the commands run

- ``search``     test-time fragment search; takes its candidate generators as arguments
- ``bench``      benchmarks: problems, a policy's candidates judged, KernelBench metrics, reports
- ``train``      warm-up pairs, SFT (TRL) and curriculum RL with DRPO

Policies: program in, candidate sources out

- ``policy``     one interface over the built-in compiler and model clients (HF, OpenAI-compatible);
  one spec names a policy everywhere: ``compiler``, ``hf:MODEL_DIR``, ``openai:BASE_URL#MODEL``
- ``prompts``    the one prompt and answer format: task prompt, ``format_answer``, ``parse_answer``

Verification, translation, synthesis

- ``judge``      sandboxed, hack-resistant verification and GPU timing of candidates
- ``compiler``   the built-in compiler: KernelBench program -> standalone Triton candidate
- ``synth``      CSP-DAG synthesis of KernelBench-format programs with OR-Tools CP-SAT

Shared helpers

- ``ops``        the catalogue of the 61 operators (PyTorch spelling, CP-SAT shape rules, FLOPs)
- ``program``    loading and running KernelBench-format programs (``Model``, ``get_inputs``, ...)
- ``devices``    device names resolved one way (``auto``, ``cpu``, ``cuda``, ``cuda:N``)
- ``gpu_gate``   how a judge child that compiles, then times, asks for its GPU alone
- ``stats``      summary statistics shared by benchmark and training reports
- ``scratch``    scratch directories that a killed run does not leave behind; the cache folder
- ``provenance`` where and with what something ran: machine, library and commit records
"""

__version__ = "0.1.0"
