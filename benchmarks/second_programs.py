"""Write the programs of a JSONL file without the first one of each level (a second GPU's share).

    python3 benchmarks/second_programs.py IN.jsonl OUT.jsonl
"""

import json
import sys

seen: dict[int, int] = {}
with open(sys.argv[1]) as src, open(sys.argv[2], "w") as out:
    for line in src:
        level = json.loads(line)["level"]
        seen[level] = seen.get(level, 0) + 1
        if seen[level] > 1:
            out.write(line)
