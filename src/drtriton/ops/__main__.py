"""``python -m drtriton.ops``: print the operator catalogue."""

from drtriton.ops import OPS

if __name__ == "__main__":
    for op in OPS:
        print(f"{op.name:14s} {op.category:11s} arity={op.arity} ranks={op.ranks} {op.torch_fn}")
    print(f"{len(OPS)} operators")
