"""How a child's outputs reach the judge: one file descriptor over a Unix socket, no files.

The judge listens on ``OUTPUTS_SOCKET`` in the job directory before the child starts. At its
end the child sends one message: a header (the job's nonce, the number of bytes) and one
descriptor holding every output back to back, as the report lays them out. On the CPU the
descriptor is a memfd; on CUDA an exported VMM allocation of the child's GPU
(``cuda_share.py``), which the judge maps and copies on its own GPU, so outputs never cross the
host. The child waits for the judge's acknowledgement before it exits, so the judge has its own
copy while the child still holds the allocation.

Messages without the job's nonce (read from ``job.json``, which candidate code cannot open) are
dropped: a candidate can connect to the socket, but cannot pass off data as the worker's.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import threading
from pathlib import Path

import torch

OUTPUTS_SOCKET = "o.sock"
HEADER_MAX_BYTES = 4096
ACK = b"k"
_UNIX_PATH_MAX = 107  # sun_path holds 108 bytes with the terminating NUL


class ChannelError(RuntimeError):
    """The output channel cannot be set up (a socket path too long for AF_UNIX, say)."""


def encode_header(header: dict) -> bytes:
    data = json.dumps(header).encode()
    return struct.pack(">I", len(data)) + data


def _fds_of(ancillary: list) -> list[int]:
    fds: list[int] = []
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            usable = len(data) - len(data) % 4
            fds.extend(struct.unpack(f"{usable // 4}i", data[:usable]))
    return fds


def _read_memfd(fd: int, nbytes: int) -> torch.Tensor:
    if os.fstat(fd).st_size < nbytes:
        raise ValueError("descriptor holds fewer bytes than its header says")
    data = bytearray(nbytes)
    view, done = memoryview(data), 0
    while done < nbytes:
        got = os.preadv(fd, [view[done:]], done)
        if got <= 0:
            raise ValueError("descriptor ended early")
        done += got
    if not nbytes:
        return torch.empty(0, dtype=torch.uint8)
    return torch.frombuffer(data, dtype=torch.uint8)


class OutputChannel:
    """Receives one job's outputs (``blob``: a uint8 tensor on ``device``) while the job runs."""

    def __init__(self, job_dir: Path, nonce: str, device: str) -> None:
        path = str(job_dir / OUTPUTS_SOCKET)
        if len(path.encode()) > _UNIX_PATH_MAX:
            raise ChannelError(f"the judge's scratch path is too long for a Unix socket ({path});"
                               " set TMPDIR to a shorter directory")
        self.nonce, self.device = nonce, torch.device(device)
        self.blob: torch.Tensor | None = None
        self.error = ""
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(8)
        self.listener.settimeout(0.2)
        self.closed = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
            torch.cuda.synchronize(self.device)  # the device's context is current in this thread
        while not self.closed.is_set() and self.blob is None:
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    self._receive(conn)
                except (OSError, ValueError, RuntimeError) as exc:
                    self.error = f"{type(exc).__name__}: {exc}"[:300]

    def _receive(self, conn: socket.socket) -> None:
        data, ancillary, _, _ = conn.recvmsg(HEADER_MAX_BYTES, socket.CMSG_SPACE(4 * 4))
        fds = _fds_of(ancillary)
        try:
            while len(data) < 4 or len(data) < 4 + struct.unpack(">I", data[:4])[0]:
                more = conn.recv(HEADER_MAX_BYTES)
                if not more or len(data) > HEADER_MAX_BYTES:
                    raise ValueError("incomplete output header")
                data += more
            header = json.loads(data[4 : 4 + struct.unpack(">I", data[:4])[0]])
            if not isinstance(header, dict) or header.get("nonce") != self.nonce or len(fds) != 1:
                return  # not the worker's message
            nbytes, size = int(header["nbytes"]), int(header.get("size", 0))
            if nbytes < 0 or (self.device.type == "cuda" and not 0 <= nbytes <= size):
                raise ValueError("bad output header")
            if self.device.type == "cuda":
                from drtriton.judge.cuda_share import import_tensor

                fd = fds.pop()
                self.blob = import_tensor(fd, nbytes, size, self.device)
            else:
                self.blob = _read_memfd(fds[0], nbytes)
            conn.sendall(ACK)
        finally:
            for fd in fds:
                os.close(fd)

    def close(self) -> torch.Tensor | None:
        """Stop listening; the outputs received, or None."""
        self.closed.set()
        self.thread.join()
        self.listener.close()
        return self.blob
