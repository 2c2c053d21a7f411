"""fsdp_mlir.opset.convert on models whose tensors are stored outside."""

import tempfile
import unittest
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from fsdp_mlir import opset


def small_external_model(directory: Path) -> tuple[Path, np.ndarray]:
    """An opset-17 model whose one initializer (16 bytes, under onnx's 1 KiB
    inline threshold) is stored in an external data file, as torch 2.x's
    exporter writes even small models."""
    w = np.arange(4, dtype=np.float32)
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = directory / "small.onnx"
    onnx.save(model, str(path), save_as_external_data=True, location="small.onnx.data",
              size_threshold=0)
    assert (directory / "small.onnx.data").exists()
    return path, w


class ConvertExternalTest(unittest.TestCase):
    def test_small_external_tensors_are_written_inline(self):
        with tempfile.TemporaryDirectory() as tmp:
            path, w = small_external_model(Path(tmp))
            out = Path(tmp) / "out.onnx"
            self.assertEqual(opset.convert(path, out), out)
            model = onnx.load(str(out))
            self.assertTrue(np.array_equal(numpy_helper.to_array(model.graph.initializer[0]), w))
            self.assertFalse((Path(tmp) / "out.onnx.data").exists())

    def test_a_stale_data_file_of_an_earlier_conversion_goes(self):
        with tempfile.TemporaryDirectory() as tmp:
            path, w = small_external_model(Path(tmp))
            out = Path(tmp) / "out.onnx"
            opset.convert(path, out)
            stale = Path(tmp) / "out.onnx.data"
            stale.write_bytes(b"\0" * 16)
            opset.convert(path, out)
            self.assertFalse(stale.exists())
            model = onnx.load(str(out))
            self.assertTrue(np.array_equal(numpy_helper.to_array(model.graph.initializer[0]), w))


if __name__ == "__main__":
    unittest.main()
