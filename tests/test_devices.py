from drtriton.devices import device_kind, is_device_name, resolve_device


def test_device_names_are_read_one_way():
    assert all(is_device_name(d) for d in ("auto", "cpu", "cuda", "cuda:0", "cuda:12"))
    assert not any(is_device_name(d) for d in ("tpu", "cuda:", "cuda:x", "cpu:0", "CUDA", ""))
    assert not is_device_name("auto", auto=False) and is_device_name("cuda:1", auto=False)
    assert device_kind("cuda:3") == "cuda" and device_kind("cpu") == "cpu"
    assert resolve_device("cpu") == "cpu" and resolve_device("auto") in ("cpu", "cuda")
