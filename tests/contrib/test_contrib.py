import ctypes
import os
import tarfile

import pytest

from kiln.contrib import cc, tar, utils
from kiln.error import KilnError


def test_tempdir():
    tmp = utils.tempdir()
    path = tmp.path
    assert os.path.isdir(path)
    with open(tmp.relpath("a.txt"), "w") as f:
        f.write("x")
    assert tmp.listdir() == ["a.txt"]
    tmp.remove()
    assert not os.path.exists(path)
    with utils.tempdir() as t2:
        p2 = t2.path
        assert os.path.isdir(p2)
    assert not os.path.exists(p2)


def test_tempdir_keep_and_custom(tmp_path):
    t = utils.tempdir(keep_for_debug=True)
    p = t.path
    t.remove()
    assert os.path.isdir(p)
    os.rmdir(p)
    existing = tmp_path / "mine"
    existing.mkdir()
    t = utils.tempdir(custom_path=str(existing))
    assert t.relpath("f") == str(existing / "f")
    t.remove()
    assert existing.is_dir()  # a directory we did not create is left alone
    created = tmp_path / "new"
    t = utils.tempdir(custom_path=str(created))
    assert created.is_dir()
    t.remove()
    assert not created.exists()


def test_create_shared_and_executable(tmp_path):
    src = tmp_path / "k.c"
    src.write_text("int add3(int x) { return x + 3; }\n")
    so = tmp_path / "k.so"
    cc.create_shared(str(so), [str(src)])
    assert ctypes.CDLL(str(so)).add3(4) == 7
    assert cc.create_shared.output_format == "so"
    main = tmp_path / "main.c"
    main.write_text("#include <stdio.h>\nint main(void) { printf(\"hi\\n\"); return 0; }\n")
    exe = tmp_path / "main"
    cc.create_executable(str(exe), [str(main)])
    assert os.access(exe, os.X_OK)
    assert os.path.basename(cc.get_cc()) in ("gcc", "cc", "clang") or os.environ.get("CC")


def test_create_shared_error(tmp_path):
    src = tmp_path / "bad.c"
    src.write_text("int f( { }\n")
    with pytest.raises(KilnError):
        cc.create_shared(str(tmp_path / "bad.so"), [str(src)])


def test_get_cc_none(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CC", raising=False)
    assert cc.get_cc() is None


def test_tar_untar(tmp_path):
    files = []
    for name, data in [("a.o", b"\x01\x02"), ("b.json", b"{}")]:
        p = tmp_path / name
        p.write_bytes(data)
        files.append(str(p))
    out = tmp_path / "x.tar"
    tar.tar(str(out), files)
    assert tarfile.is_tarfile(out)
    dest = tmp_path / "dest"
    tar.untar(str(out), str(dest))
    assert sorted(os.listdir(dest)) == ["a.o", "b.json"]
    assert (dest / "a.o").read_bytes() == b"\x01\x02"
    with pytest.raises(KilnError, match="duplicate"):
        tar.tar(str(out), files + files)
    (tmp_path / "junk.tar").write_bytes(b"junk" * 10)
    with pytest.raises(KilnError):
        tar.untar(str(tmp_path / "junk.tar"), str(dest))
