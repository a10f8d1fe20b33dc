import pytest

from kiln.error import ModuleLoadError
from kiln.runtime import blob


def _sample():
    return blob.pack([("a", {"x": 1}, {"p": b"hello", "q": bytes(range(200))}, [1]),
                      ("b", {"y": [1, 2]}, {}, [])])


def test_round_trip():
    root, mods = blob.unpack(_sample())
    assert root == 0
    assert mods[0] == ("a", {"x": 1}, {"p": b"hello", "q": bytes(range(200))}, [1])
    assert mods[1] == ("b", {"y": [1, 2]}, {}, [])


@pytest.mark.parametrize("cut", [0, 5, 63, 64, 100, -1])
def test_truncated(cut):
    data = _sample()
    with pytest.raises(ModuleLoadError, match="truncated"):
        blob.unpack(data[:cut])


def test_every_byte_flip_is_caught():
    data = _sample()
    for i in range(0, len(data), 7):
        bad = bytearray(data)
        bad[i] ^= 0x01
        with pytest.raises(ModuleLoadError):
            blob.unpack(bytes(bad))


def test_bad_magic_and_version():
    data = bytearray(_sample())
    with pytest.raises(ModuleLoadError, match="magic"):
        blob.unpack(b"XXXXXXXX" + bytes(data[8:]))
    data[8] = 9
    with pytest.raises(ModuleLoadError, match="version 9"):
        blob.unpack(bytes(data))
