import pytest

import kiln
from kiln.error import DeviceError
from kiln.runtime import Device


def test_cpu_device():
    d = kiln.cpu(0)
    assert str(d) == "cpu(0)" and repr(d) == "cpu(0)"
    assert d.device_type == Device.kDLCPU == 1 and d.device_id == 0
    assert d.exist
    d.sync()
    assert d == kiln.device("cpu", 0) == kiln.device("llvm") == kiln.device("c") == Device(1, 0)
    assert d == kiln.device("llvm -mcpu=skylake")
    assert hash(d) == hash(kiln.cpu())
    assert d != kiln.cpu(1)


def test_cuda_device():
    d = kiln.cuda(0)
    assert str(d) == "cuda(0)" and d.device_type == 2
    assert not d.exist
    assert kiln.gpu(1) == kiln.device("cuda", 1)
    with pytest.raises(DeviceError):
        d.sync()


def test_context_alias():
    assert kiln.context("llvm", 0) == kiln.cpu(0)
    assert kiln.context("cuda", 2) == kiln.cuda(2)


def test_unknown_device():
    with pytest.raises(DeviceError, match="unknown device type 'tpu'"):
        kiln.device("tpu")
    with pytest.raises(DeviceError):
        Device(99, 0)
