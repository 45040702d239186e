# Sourced by the remote_*.sh scripts on a lent GPU machine, from the repository root of the
# working tree that travelled: bubblewrap from the carried .deb/*.deb (unpacked under /opt/bw),
# the packages the image lacks from scratch/whl/*.whl (under /opt/site), the tree of one commit
# from scratch/head-SHA.tar, else scratch/head.tar (`git archive SHA -o scratch/head.tar`), under
# F=/opt/frozen-SHA, and caches under XDG_CACHE_HOME=/opt/xdg. Needs SHA set; leaves ROOT (the
# travelled tree) and F.
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \
  NVSHMEM_DISABLE_NVLS=1
ROOT=$PWD
if [ -d .deb ] && [ ! -x /opt/bw/usr/bin/bwrap ]; then
  mkdir -p /opt/bw; for f in .deb/*.deb; do dpkg -x "$f" /opt/bw; done
fi
if [ -x /opt/bw/usr/bin/bwrap ]; then
  /opt/bw/usr/bin/bwrap --version >/dev/null 2>&1 \
    || export LD_LIBRARY_PATH=/opt/bw/lib/x86_64-linux-gnu:/opt/bw/usr/lib/x86_64-linux-gnu
  export DRTRITON_BWRAP=/opt/bw/usr/bin/bwrap
fi
if [ -d scratch/whl ] && [ ! -d /opt/site ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /opt/site \
    scratch/whl/*.whl
fi
F=/opt/frozen-$SHA
TAR=scratch/head-$SHA.tar; [ -f "$TAR" ] || TAR=scratch/head.tar
[ -d "$F" ] || { mkdir -p "$F" && tar -xf "$TAR" -C "$F"; }
export XDG_CACHE_HOME=/opt/xdg DRTRITON_COMMIT=$SHA PYTHONPATH=$F/src:/opt/site
mkdir -p /opt/xdg
