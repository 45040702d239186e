"""The output channel: outputs as one descriptor over the job's socket, only with the job's nonce.
"""

from __future__ import annotations

import os
import socket
import struct

import pytest
import torch

from drtriton.judge.channel import OUTPUTS_SOCKET, ChannelError, OutputChannel, encode_header
from drtriton.judge.pair import _load_outputs, _tensor_from


def _send(path: str, nonce: str, data: bytes, wait_ack: bool) -> bytes:
    fd = os.memfd_create("test")
    os.write(fd, data)
    header = encode_header({"nonce": nonce, "nbytes": len(data), "size": len(data)})
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(path)
        socket.send_fds(s, [header], [fd])
        os.close(fd)
        return s.recv(1) if wait_ack else b""


def test_channel_takes_only_the_jobs_nonce(tmp_path):
    channel = OutputChannel(tmp_path, "a" * 32, "cpu")
    path = str(tmp_path / OUTPUTS_SOCKET)
    assert _send(path, "b" * 32, b"forged!!", wait_ack=False) == b""
    assert _send(path, "a" * 32, b"genuine!", wait_ack=True) == b"k"
    blob = channel.close()
    assert blob is not None and bytes(blob.numpy()) == b"genuine!"


def test_channel_without_a_message_gives_none(tmp_path):
    assert OutputChannel(tmp_path, "a" * 32, "cpu").close() is None


def test_channel_refuses_a_socket_path_too_long(tmp_path):
    deep = tmp_path / ("d" * 120)
    deep.mkdir()
    with pytest.raises(ChannelError, match="too long for a Unix socket"):
        OutputChannel(deep, "a" * 32, "cpu")


def test_outputs_are_views_of_the_blob_as_the_report_lays_them_out():
    values = torch.arange(6, dtype=torch.float32)
    blob = torch.zeros(128, dtype=torch.uint8)
    blob[64 : 64 + 24] = values.view(torch.uint8)
    report = {"outputs": [["torch.float32", [2, 3], 64, 24]], "trial_outputs": [[0]]}
    (trial,) = _load_outputs(blob, report)
    assert torch.equal(trial[0], values.reshape(2, 3))


@pytest.mark.parametrize("spec", [
    ["torch.float32", [2, 3], 66, 24],     # misaligned for its dtype
    ["torch.float32", [2, 3], 120, 24],    # past the end of the blob
    ["torch.float32", [2, 4], 64, 24],     # bytes disagree with the shape
    ["os.system", [1], 0, 4],              # not a dtype
])
def test_bad_output_records_are_refused(spec):
    with pytest.raises(ValueError):
        _tensor_from(torch.zeros(128, dtype=torch.uint8), *spec)
    assert _load_outputs(torch.zeros(128, dtype=torch.uint8),
                         {"outputs": [spec], "trial_outputs": [[0]]}) is None


def test_header_is_length_prefixed_json():
    header = encode_header({"nonce": "x"})
    assert struct.unpack(">I", header[:4])[0] == len(header) - 4
