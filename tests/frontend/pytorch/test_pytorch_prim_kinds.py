"""TorchScript prim:: kinds: the importer supports exactly the kinds it has a ``prim_<Kind>`` method for."""
from __future__ import annotations

import pytest

pytest.importorskip("torch")

from kiln.relay.frontend.pytorch import TorchScriptImporter  # noqa: E402


class _WithNewKind(TorchScriptImporter):
    def prim_KilnTestKind(self, node):
        self.env["out"] = node


def _importer(cls):
    return cls(None, [])


def test_a_prim_method_is_all_a_new_kind_needs():
    assert not _importer(TorchScriptImporter)._supported("prim::KilnTestKind")
    imp = _importer(_WithNewKind)
    assert imp._supported("prim::KilnTestKind")
    imp._convert_node(_FakeNode("prim::KilnTestKind"))
    assert imp.env["out"].kind() == "prim::KilnTestKind"


@pytest.mark.parametrize("kind", ["Constant", "ListConstruct", "TupleUnpack", "GetAttr", "If", "dtype",
                                  "unchecked_cast", "data", "is_cuda", "SetAttr", "Loop"])
def test_builtin_kinds_are_supported(kind):
    assert _importer(TorchScriptImporter)._supported(f"prim::{kind}")


def test_unknown_kinds_are_not():
    imp = _importer(TorchScriptImporter)
    assert not imp._supported("prim::NoSuchKind")  # (prim::Loop is supported: scripted loops, pytorch_script.py)


class _FakeNode:
    def __init__(self, kind):
        self._kind = kind

    def kind(self):
        return self._kind
