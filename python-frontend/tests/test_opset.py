"""fsdp_mlir.opset.convert on models whose tensors are stored outside."""

from __future__ import annotations

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


def dft20_model(directory: Path, axis_input: str | None) -> Path:
    """An opset-20 DFT of x [2, 8, 3, 1], as torch 2.x's dynamo exporter
    writes torch.fft's: its axis an input (`axis_input`: "constant", a
    graph input "given", or None for the default -2)."""
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8, 3, 1])]
    initializers, dft_inputs = [], ["x"]
    if axis_input == "constant":
        initializers.append(numpy_helper.from_array(np.array(1, np.int64), "axis"))
    elif axis_input == "given":
        inputs.append(helper.make_tensor_value_info("axis", TensorProto.INT64, []))
    if axis_input:
        dft_inputs += ["", "axis"]
    graph = helper.make_graph(
        [helper.make_node("DFT", dft_inputs, ["y"], name="the_dft", onesided=0)], "g",
        inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8, 3, 2])],
        initializers)
    path = directory / f"dft-{axis_input}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]), str(path))
    return path


@unittest.skipIf(onnx.defs.onnx_opset_version() < 20,
                 f"onnx {onnx.__version__} does not know opset 20 (torch 2.x's environment does)")
class ConvertDFTTest(unittest.TestCase):
    """DFT-20 takes its axis as an input, DFT-17 (the compiler's) as an
    attribute: ONNX's version converter moves a constant one."""

    def converted_axis(self, axis_input):
        with tempfile.TemporaryDirectory() as tmp:
            out = opset.convert(dft20_model(Path(tmp), axis_input), Path(tmp) / "out.onnx")
            (node,) = onnx.load(str(out)).graph.node
            self.assertEqual([i for i in node.input if i], ["x"])
            return {a.name: helper.get_attribute_value(a) for a in node.attribute}["axis"]

    def test_a_constant_axis_becomes_the_attribute(self):
        self.assertEqual(self.converted_axis("constant"), 1)

    def test_no_axis_is_opset_20s_default(self):
        self.assertEqual(self.converted_axis(None), -2)

    def test_an_axis_given_at_run_time_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            with self.assertRaisesRegex(ValueError, "Axis input must be a constant"):
                opset.convert(dft20_model(Path(tmp), "given"), Path(tmp) / "out.onnx")


if __name__ == "__main__":
    unittest.main()
