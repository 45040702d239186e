"""List the programs of a hand-written suite whose GPU candidates differ between a commit and
the working tree: the ones a GPU call has to judge again (a plan's ``only``).

    .venv/bin/python benchmarks/changed.py da06ed4 [--suite benchmarks/suites/real]
        [--precision fp32|tf32]

Each tree compiles every program for CUDA on the CPU (shapes on the meta device: no GPU, no
tuning), in a process of its own, so the two trees' modules never mix. The old tree is a
temporary ``git worktree``. Prints one name per changed program, then the ``only = [...]`` line.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# run in a child with the tree's src first on sys.path: argv = tree, precision, programs...
_DIGESTS = r"""
import hashlib, json, sys
sys.path.insert(0, sys.argv[1] + "/src")
from drtriton.compiler import CompilerConfig, compile_program
digests = {}
for path in sys.argv[3:]:
    try:
        config = CompilerConfig(device="cuda", precision=sys.argv[2])
        candidate = compile_program(open(path).read(), config)
        digests[path] = hashlib.sha1(candidate.encode()).hexdigest()
    except Exception as exc:  # a program one tree cannot compile differs from one it can
        digests[path] = "error: " + type(exc).__name__
print(json.dumps(digests))
"""


def digests(tree: Path, precision: str, programs: list[Path]) -> dict[str, str]:
    """Program path -> digest of the candidate ``tree`` compiles for it."""
    done = subprocess.run([sys.executable, "-c", _DIGESTS, str(tree), precision,
                           *map(str, programs)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"changed.py: compiling in {tree} failed: {done.stderr.strip()[-300:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rev", help="the commit to compare the working tree with")
    parser.add_argument("--suite", type=Path, default=ROOT / "benchmarks" / "suites" / "real")
    parser.add_argument("--precision", choices=("fp32", "tf32"), default="fp32")
    args = parser.parse_args()
    programs = sorted(p for p in args.suite.glob("*.py") if not p.name.startswith("_"))
    if not programs:
        sys.exit(f"changed.py: no programs in {args.suite}")
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "old"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(old),
                        args.rev], check=True)
        try:
            before = digests(old, args.precision, programs)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)],
                           check=False)
    after = digests(ROOT, args.precision, programs)
    changed = [p.stem for p in programs if before[str(p)] != after[str(p)]]
    for name in changed:
        print(name)
    print("only = " + json.dumps(changed))


if __name__ == "__main__":
    main()
