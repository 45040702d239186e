"""GPU buffers passed between processes as file descriptors (CUDA virtual memory management).

A candidate child runs in its own PID namespace, where legacy CUDA IPC handles
(``cudaIpcGetMemHandle``) cannot be opened: the driver checks the exporter's pid. A VMM
allocation exported as a POSIX file descriptor can: the descriptor travels over a Unix socket
(``SCM_RIGHTS``), and the receiver imports and maps it. So outputs reach the judge's GPU without
a host round trip.

``Exported`` (the child) copies tensors into a fresh allocation and hands out its descriptor;
``import_tensor`` (the judge) maps one, copies it into memory of its own and unmaps it again.
Both call the driver API through ctypes; nothing here runs in a sealed child after the seal
except calls through functions bound before it.
"""

from __future__ import annotations

import ctypes
import os

import torch

_POSIX_FD = 1  # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
_PINNED = 1  # CU_MEM_ALLOCATION_TYPE_PINNED
_ON_DEVICE = 1  # CU_MEM_LOCATION_TYPE_DEVICE
_READ_WRITE = 3  # CU_MEM_ACCESS_FLAGS_PROT_READWRITE


# Bound at import (before any candidate code runs in a sealed child): the export runs there
# after the candidate, and must call nothing that a candidate could have patched.
_byref, _c_size_t, _c_uint64, _c_int, _c_void_p = (
    ctypes.byref, ctypes.c_size_t, ctypes.c_uint64, ctypes.c_int, ctypes.c_void_p,
)
_as_tensor = torch.as_tensor
_empty = torch.empty
_uint8 = torch.uint8
_narrow = torch._C.TensorBase.narrow
_copy = torch._C.TensorBase.copy_
_numel = torch._C.TensorBase.numel
_cuda_sync = getattr(torch._C, "_cuda_synchronize", None)


class CudaShareError(RuntimeError):
    """The driver refused a VMM call (its name and error code are in the message)."""


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _AllocationProp(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int),
                ("location", _Location), ("win32HandleMetaData", ctypes.c_void_p),
                ("allocFlags", _AllocFlags)]


class _AccessDesc(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


class _Driver:
    """The few driver entry points VMM sharing needs, looked up once."""

    NAMES = ("cuMemGetAllocationGranularity", "cuMemCreate", "cuMemExportToShareableHandle",
             "cuMemImportFromShareableHandle", "cuMemAddressReserve", "cuMemMap",
             "cuMemSetAccess", "cuMemUnmap", "cuMemAddressFree", "cuMemRelease")

    def __init__(self) -> None:
        lib = ctypes.CDLL("libcuda.so.1")
        self.calls = {name: getattr(lib, name) for name in self.NAMES}

    def addresses(self) -> frozenset[int]:
        """The entry points' addresses (a sealed child's audit hook lets exactly these through)."""
        return frozenset(ctypes.cast(f, ctypes.c_void_p).value for f in self.calls.values())

    def __call__(self, name: str, *args) -> None:
        code = self.calls[name](*args)
        if code != 0:
            what = " (out of memory)" if code == _CUDA_ERROR_OUT_OF_MEMORY else ""
            raise CudaShareError(f"{name} failed with CUDA driver error {code}{what}")


_CUDA_ERROR_OUT_OF_MEMORY = 2
_DRIVER: list[_Driver] = []


def driver() -> _Driver:
    if not _DRIVER:
        _DRIVER.append(_Driver())
    return _DRIVER[0]


def _prop(device_index: int) -> _AllocationProp:
    prop = _AllocationProp()
    prop.type, prop.requestedHandleTypes = _PINNED, _POSIX_FD
    prop.location = _Location(_ON_DEVICE, device_index)
    return prop


def _rounded(nbytes: int, device_index: int) -> int:
    granularity = _c_size_t()
    driver()("cuMemGetAllocationGranularity", _byref(granularity),
             _byref(_prop(device_index)), 0)
    g = granularity.value
    return max(g, -(-nbytes // g) * g)


def _map(handle: int, size: int, device_index: int) -> int:
    """Reserve ``size`` bytes of address space, map ``handle`` there, make it read-write."""
    cu = driver()
    ptr = _c_uint64()
    cu("cuMemAddressReserve", _byref(ptr), _c_size_t(size), _c_size_t(0),
       _c_uint64(0), _c_uint64(0))
    cu("cuMemMap", ptr, _c_size_t(size), _c_size_t(0), _c_uint64(handle),
       _c_uint64(0))
    access = _AccessDesc(_Location(_ON_DEVICE, device_index), _READ_WRITE)
    cu("cuMemSetAccess", ptr, _c_size_t(size), _byref(access), _c_size_t(1))
    return ptr.value


def _unmap(ptr: int, size: int) -> None:
    cu = driver()
    cu("cuMemUnmap", _c_uint64(ptr), _c_size_t(size))
    cu("cuMemAddressFree", _c_uint64(ptr), _c_size_t(size))


class _Mapped:
    """A byte view of mapped device memory, for ``torch.as_tensor`` (no copy)."""

    def __init__(self, ptr: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {
            "shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 3,
        }


def _bytes_view(ptr: int, nbytes: int, device: torch.device) -> torch.Tensor:
    if nbytes == 0:
        return _empty(0, dtype=_uint8, device=device)
    return _as_tensor(_Mapped(ptr, nbytes), device=device)


class Exported:
    """One exported allocation holding ``nbytes`` bytes; alive until the process ends."""

    def __init__(self, parts: list[tuple[torch.Tensor, int]], nbytes: int,
                 device: torch.device) -> None:
        """``parts``: (flat uint8 tensor on ``device``, byte offset) pairs laid out in
        ``nbytes`` bytes."""
        index = device.index if device.index is not None else 0
        cu = driver()
        self.size = _rounded(nbytes, index)
        handle = _c_uint64()
        cu("cuMemCreate", _byref(handle), _c_size_t(self.size),
           _byref(_prop(index)), _c_uint64(0))
        self.handle = handle.value
        self.ptr = _map(self.handle, self.size, index)
        self.nbytes = nbytes
        if nbytes:
            whole = _bytes_view(self.ptr, nbytes, device)
            for part, offset in parts:
                _copy(_narrow(whole, 0, offset, _numel(part)), part)
        if _cuda_sync is not None:
            _cuda_sync()
        fd = _c_int(-1)
        cu("cuMemExportToShareableHandle", _byref(fd), _c_uint64(self.handle),
           _POSIX_FD, _c_uint64(0))
        self.fd = fd.value


def import_tensor(fd: int, nbytes: int, size: int, device: torch.device) -> torch.Tensor:
    """The ``nbytes`` bytes behind descriptor ``fd`` as a uint8 tensor in memory of the judge's
    own (``device``): imported, mapped, copied, unmapped and released. Closes ``fd``."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    cu = driver()
    handle = _c_uint64()
    try:
        cu("cuMemImportFromShareableHandle", _byref(handle), _c_void_p(fd),
           _POSIX_FD)
    finally:
        os.close(fd)
    try:
        ptr = _map(handle.value, size, index)
        try:
            copy = _bytes_view(ptr, nbytes, device).clone()
            torch.cuda.synchronize(device)
        finally:
            _unmap(ptr, size)
    finally:
        cu("cuMemRelease", _c_uint64(handle.value))
    return copy
