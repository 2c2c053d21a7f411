"""fsdp_mlir.opset.convert on models whose tensors are stored outside, and on
opset-18 nodes the version converter cannot convert (Col2Im, Pad with axes)."""

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



def _knows_opset_18() -> bool:
    try:
        import onnx.reference  # noqa: F401
    except ImportError:
        return False
    return onnx.defs.onnx_opset_version() >= 18


@unittest.skipUnless(_knows_opset_18(), f"onnx {onnx.__version__} has no opset 18 or no "
                     "onnx.reference (torch 2.x's environment, .venv-torch2, has both)")
class ConvertCol2ImAndPadTest(unittest.TestCase):
    """An opset-18 Col2Im (torch's fold) becomes a Reshape and a grouped
    ConvTranspose, and a Pad with `axes` a Pad of every axis, both at
    opset 17 (the version converter has no adapter for Pad from 18). The
    converted model gives onnx.reference's outputs of the original: run by
    onnx.reference (Pad) or, for Col2Im, compiled and run by a session
    (onnx.reference's grouped ConvTranspose slices the weight by output
    channels, wrong when they are fewer than the input's)."""

    def convert(self, graph, work):
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
        onnx.checker.check_model(model, full_check=True)
        path, out = work / "in.onnx", work / "out.onnx"
        onnx.save(model, str(path))
        opset.convert(path, out)
        converted = onnx.load(str(out))
        self.assertEqual(opset._default_opset(converted), 17)
        onnx.checker.check_model(converted, full_check=True)
        return model, out, converted

    def test_col2im_becomes_a_conv_transpose(self):
        import os

        import fsdp_mlir
        from onnx.reference import ReferenceEvaluator

        os.environ.setdefault(fsdp_mlir._tools.TOOLS_DIR_ENV,
                              str(Path(__file__).resolve().parents[2] / "build" / "bin"))
        # (channels, image, block, attributes): non-overlapping 2x2 blocks;
        # overlapping 3x3 with padding; a 2x3 kernel with dilation,
        # asymmetric pads and strides leaving a row past the last block.
        cases = [(2, [4, 4], [2, 2], dict(strides=[2, 2])),
                 (1, [5, 5], [3, 3], dict(pads=[1, 1, 1, 1])),
                 (3, [5, 6], [2, 3], dict(dilations=[1, 2], pads=[1, 0, 1, 1],
                                          strides=[2, 1]))]
        rng = np.random.default_rng(0)
        for channels, image, block, attrs in cases:
            with self.subTest(image=image, block=block, **attrs), \
                    tempfile.TemporaryDirectory() as tmp:
                pads = attrs.get("pads", [0] * 4)
                dil, strides = attrs.get("dilations", [1, 1]), attrs.get("strides", [1, 1])
                blocks = [(image[d] + pads[d] + pads[2 + d] - dil[d] * (block[d] - 1) - 1)
                          // strides[d] + 1 for d in range(2)]
                cols, length = channels * block[0] * block[1], blocks[0] * blocks[1]
                x = rng.standard_normal((2, cols, length)).astype(np.float32)
                graph = helper.make_graph(
                    [helper.make_node("Constant", [], ["block"],
                                      value=numpy_helper.from_array(np.array(block, np.int64))),
                     helper.make_node("Col2Im", ["x", "image", "block"], ["y"], name="fold",
                                      **attrs)],
                    "col2im",
                    [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                   ["batch", cols, length])],
                    [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                   ["batch", channels] + image)],
                    [numpy_helper.from_array(np.array(image, np.int64), "image")])
                model, out, converted = self.convert(graph, Path(tmp))
                ops = [n.op_type for n in converted.graph.node]
                self.assertEqual(ops, ["Constant", "Reshape", "ConvTranspose"])
                want = ReferenceEvaluator(model).run(None, {"x": x})[0]
                plan = fsdp_mlir.compile(out, batch_size=2)
                with fsdp_mlir.Session(plan, threads=1) as session:
                    got = session.forward({"x": x})["y"]
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)

    def test_pad_axes_are_written_for_every_axis(self):
        from onnx.reference import ReferenceEvaluator

        # Constant pads (written expanded) and computed ones (gathered),
        # negative axes; a Pad without axes is converted as it is.
        x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
        graph = helper.make_graph(
            [helper.make_node("Pad", ["x", "pads", "value", "axes"], ["p"], name="pad"),
             helper.make_node("Identity", ["pads2"], ["computed"]),
             helper.make_node("Pad", ["p", "computed", "", "axes2"], ["q"], name="pad2",
                              mode="edge"),
             helper.make_node("Pad", ["q", "pads3"], ["y"], name="pad3", mode="reflect")],
            "pad",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5, 8, 9])],
            [numpy_helper.from_array(np.array([1, 0, 2, 3], np.int64), "pads"),
             numpy_helper.from_array(np.array(-1.5, np.float32), "value"),
             numpy_helper.from_array(np.array([-1, 0], np.int64), "axes"),
             numpy_helper.from_array(np.array([2, 1], np.int64), "pads2"),
             numpy_helper.from_array(np.array([1], np.int64), "axes2"),
             numpy_helper.from_array(np.array([0, 1, 1, 0, 1, 1], np.int64), "pads3")])
        with tempfile.TemporaryDirectory() as tmp:
            model, _, converted = self.convert(graph, Path(tmp))
        pads = [n for n in converted.graph.node if n.op_type == "Pad"]
        self.assertEqual([len(n.input) for n in pads], [3, 3, 2])
        want = ReferenceEvaluator(model).run(None, {"x": x})[0]
        np.testing.assert_array_equal(ReferenceEvaluator(converted).run(None, {"x": x})[0], want)

    def test_what_cannot_be_converted_is_refused_naming_the_node(self):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 4])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b", "c", "d"])
        ints = helper.make_tensor_value_info
        cases = [
            (helper.make_graph(
                [helper.make_node("Col2Im", ["x", "image", "block"], ["y"], name="fold")],
                "g", [x, ints("image", TensorProto.INT64, [2])], [y],
                [numpy_helper.from_array(np.array([2, 2], np.int64), "block")]),
             r"node 'fold' \(Col2Im\): its image_shape and block_shape are not constants"),
            (helper.make_graph(
                [helper.make_node("Pad", ["x", "pads", "", "axes"], ["y"], name="pad")],
                "g", [x, ints("axes", TensorProto.INT64, [1])], [y],
                [numpy_helper.from_array(np.array([1, 1], np.int64), "pads")]),
             r"node 'pad' \(Pad\): its axes are not a constant"),
        ]
        for graph, message in cases:
            with self.subTest(message=message), tempfile.TemporaryDirectory() as tmp:
                model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
                onnx.save(model, str(Path(tmp) / "in.onnx"))
                with self.assertRaisesRegex(ValueError, message):
                    opset.convert(Path(tmp) / "in.onnx", Path(tmp) / "out.onnx")


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
