"""Tests of fsdp_mlir.export against torch itself: small models are exported
into a temporary directory and the ONNX file and its "fsdp_mlir" metadata
are compared with named_parameters(), named_buffers() and named_modules()."""

import json
import math
import tempfile
import unittest
from pathlib import Path

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper

import fsdp_mlir

torch.set_num_threads(2)


# --------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------


class Attention(nn.Module):
    def __init__(self, d, n_head, max_len):
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        mask = torch.tril(torch.ones(max_len, max_len, dtype=torch.bool))
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.n_head, -1).transpose(1, 2)
                   for t in self.qkv(x).split(C, dim=2))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.n_head)
        att = torch.softmax(att.masked_fill(~self.mask[:T, :T], float("-inf")), dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(B, T, C))


class Block(nn.Module):
    def __init__(self, d, n_head, max_len):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.attn = Attention(d, n_head, max_len)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln(x))
        return x + self.mlp(x)


class TinyGPT(nn.Module):
    def __init__(self, vocab=32, d=16, n_layer=2, n_head=2, max_len=8):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList([Block(d, n_head, max_len) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied

    def forward(self, idx):
        pos = torch.arange(idx.shape[1]).unsqueeze(0)
        x = self.wte(idx) + self.wpe(pos)
        for b in self.blocks:
            x = b(x)
        return self.lm_head(self.ln_f(x))


def lm_loss(logits, labels):
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1))


class FrozenTiedBN(nn.Module):
    """Frozen submodule, a weight tied across two Linears, BatchNorm1d, an
    unused parameter and an unused bfloat16 buffer; two outputs."""

    def __init__(self):
        super().__init__()
        self.frozen = nn.Sequential(nn.Linear(6, 8), nn.ReLU())
        self.frozen.requires_grad_(False)
        self.bn = nn.BatchNorm1d(8)
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)
        self.b.weight = self.a.weight
        self.unused = nn.Parameter(torch.full((3,), 0.25))
        self.register_buffer("scratch", torch.zeros(2, dtype=torch.bfloat16), persistent=False)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        h = self.b(torch.relu(self.a(self.bn(self.frozen(x)))))
        return self.head(h), h.sum()


def _gpt():
    torch.manual_seed(0)
    model = TinyGPT()
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, 32, (2, 8), generator=g)
    labels = torch.randint(0, 32, (2, 8), generator=g)
    return model, idx, labels


def _bn():
    torch.manual_seed(0)
    model = FrozenTiedBN()
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(1))
    return model, x


def metadata(proto):
    props = {p.key: p.value for p in proto.metadata_props}
    return json.loads(props[fsdp_mlir.METADATA_KEY])


def dims(value_info):
    return [d.dim_param if d.HasField("dim_param") else d.dim_value
            for d in value_info.type.tensor_type.shape.dim]


def as_numpy(t):
    return t.detach().numpy()


class ExportTestBase(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.tmp = Path(self._tmp.name)

    def tearDown(self):
        self._tmp.cleanup()


# --------------------------------------------------------------------------
# A model with a loss: TinyGPT + cross-entropy
# --------------------------------------------------------------------------


class StochasticDepthExportTest(ExportTestBase):
    def test_exports_as_a_dropout_of_per_sample_noise(self):
        # torch 1.13 cannot export bernoulli_ in training mode; the export
        # draws the noise with a Dropout, and the module is left as it was.
        import torchvision
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 4),
                                    torchvision.ops.StochasticDepth(0.25, "row"))
        forward = model[1].forward
        proto = onnx.load(str(fsdp_mlir.export(model, torch.randn(3, 4), self.tmp / "sd.onnx")))
        self.assertEqual(metadata(proto)["stochastic_depth"],
                         [{"fqn": "1", "p": 0.25, "mode": "row"}])
        dropouts = [n for n in proto.graph.node if n.op_type == "Dropout"]
        self.assertEqual(len(dropouts), 1)
        self.assertNotIn("forward", vars(model[1]))
        self.assertEqual(model[1].forward, forward)

    def test_hugging_face_drop_path_exports_as_a_dropout(self):
        # Hugging Face's (and timm's) DropPath: floor(keep + rand) per
        # sample, which would export as RandomUniform; it becomes the same
        # Dropout of per-sample ones. timm's scale_by_keep=False (no 1/keep
        # scaling) is another computation and is left alone.
        class SwinDropPath(torch.nn.Module):
            def __init__(self, drop_prob, scale_by_keep=True):
                super().__init__()
                self.drop_prob, self.scale_by_keep = drop_prob, scale_by_keep

            def forward(self, x):
                if self.drop_prob == 0.0 or not self.training:
                    return x
                keep = 1 - self.drop_prob
                noise = torch.floor(torch.rand((x.shape[0],) + (1,) * (x.ndim - 1)) + keep)
                return (x.div(keep) if self.scale_by_keep else x) * noise

        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), SwinDropPath(0.125),
                                    SwinDropPath(0.5, scale_by_keep=False))
        proto = onnx.load(str(fsdp_mlir.export(model, torch.randn(3, 2, 4),
                                               self.tmp / "dp.onnx")))
        self.assertEqual(metadata(proto)["stochastic_depth"],
                         [{"fqn": "1", "p": 0.125, "mode": "row"}])
        ops = [n.op_type for n in proto.graph.node]
        self.assertEqual(ops.count("Dropout"), 1)
        self.assertEqual(ops.count("RandomUniform") + ops.count("RandomUniformLike"), 1, ops)
        dropout = next(n for n in proto.graph.node if n.op_type == "Dropout")
        ones = next(i for i in proto.graph.initializer if i.name == dropout.input[0]) \
            if dropout.input[0] in {i.name for i in proto.graph.initializer} else None
        if ones is not None:  # a constant [3, 1, 1] of ones
            self.assertEqual(list(ones.dims), [3, 1, 1])
        self.assertNotIn("forward", vars(model[1]))
        x = torch.ones(1000, 4)
        model[1].train()
        kept = (model[1](x)[:, 0] != 0).float().mean().item()
        self.assertGreater(kept, 0.6)  # torch's own again: about 0.75 kept
        self.assertLess(kept, 0.9)


class LossExportTest(ExportTestBase):
    def setUp(self):
        super().setUp()
        self.model, self.idx, self.labels = _gpt()
        self.path = fsdp_mlir.export(self.model, (self.idx, self.labels),
                                     self.tmp / "gpt.onnx", loss_fn=lm_loss)
        self.proto = onnx.load(str(self.path))
        self.meta = metadata(self.proto)
        self.inits = {i.name: i for i in self.proto.graph.initializer}

    def test_returns_path_and_passes_checker(self):
        self.assertEqual(self.path, self.tmp / "gpt.onnx")
        self.assertIsInstance(self.path, Path)
        onnx.checker.check_model(str(self.path))
        onnx.shape_inference.infer_shapes(self.proto, check_type=True)
        self.assertEqual(self.proto.opset_import[0].version, 17)
        self.assertEqual(sorted(p.name for p in self.tmp.iterdir()), ["gpt.onnx"])

    def test_schema(self):
        self.assertEqual(self.meta["version"], 1)
        self.assertEqual(set(self.meta), {"version", "modules", "embeddings", "params",
                                          "buffers", "inputs", "outputs", "batch_dim",
                                          "loss", "stochastic_depth", "scope_prefix"})
        self.assertEqual(self.meta["stochastic_depth"], [])
        # The loss wrapper's name for the model, the first component of
        # every node scope.
        self.assertEqual(self.meta["scope_prefix"], "model")
        self.assertTrue(all(n.name.startswith("/model/") for n in self.proto.graph.node
                            if n.name.count("/") > 1))
        self.assertEqual(self.meta["embeddings"], [])  # no padding_idx
        self.assertEqual(set(self.meta["modules"][0]),
                         {"fqn", "class", "qualname", "children", "params", "buffers"})
        self.assertEqual(set(self.meta["params"][0]),
                         {"fqn", "initializer", "shape", "dtype", "requires_grad", "aliases"})
        self.assertEqual(set(self.meta["buffers"][0]),
                         {"fqn", "initializer", "shape", "dtype", "persistent"})

    def test_loss_graph_has_one_scalar_output(self):
        outs = self.proto.graph.output
        self.assertEqual([o.name for o in outs], ["loss"])
        self.assertEqual(dims(outs[0]), [])
        self.assertEqual(outs[0].type.tensor_type.elem_type, onnx.TensorProto.FLOAT)
        self.assertTrue(self.meta["loss"])
        self.assertEqual(self.meta["outputs"], ["loss"])
        ops = [n.op_type for n in self.proto.graph.node]
        self.assertIn("SoftmaxCrossEntropyLoss", ops)

    def test_inputs_have_dynamic_batch(self):
        self.assertEqual(self.meta["inputs"], ["input_0", "input_1"])
        self.assertEqual([i.name for i in self.proto.graph.input], ["input_0", "input_1"])
        for i in self.proto.graph.input:
            self.assertEqual(dims(i), ["batch", 8])
            self.assertEqual(i.type.tensor_type.elem_type, onnx.TensorProto.INT64)
        self.assertEqual(self.meta["batch_dim"], 0)

    def test_params_match_named_parameters(self):
        named = list(self.model.named_parameters())
        self.assertEqual([p["fqn"] for p in self.meta["params"]], [n for n, _ in named])
        for row, (fqn, p) in zip(self.meta["params"], named):
            self.assertEqual(row["shape"], list(p.shape), fqn)
            self.assertEqual(row["dtype"], "float32", fqn)
            self.assertEqual(row["requires_grad"], p.requires_grad, fqn)

    def test_initializers_are_prefixed_and_hold_the_tensors(self):
        named = dict(self.model.named_parameters())
        for row in self.meta["params"]:
            self.assertFalse(row["fqn"].startswith("model."), row)
            self.assertEqual(row["initializer"], "model." + row["fqn"])
            init = self.inits[row["initializer"]]
            self.assertEqual(list(init.dims), row["shape"])
            np.testing.assert_array_equal(numpy_helper.to_array(init),
                                          as_numpy(named[row["fqn"]]))
        # Every initializer is a parameter or a buffer of the table.
        claimed = {r["initializer"] for r in self.meta["params"] + self.meta["buffers"]}
        self.assertEqual(set(self.inits), claimed - {None})

    def test_tied_weight_appears_once_with_its_alias(self):
        rows = {r["fqn"]: r for r in self.meta["params"]}
        self.assertNotIn("lm_head.weight", rows)
        self.assertEqual(rows["wte.weight"]["aliases"], ["lm_head.weight"])
        self.assertNotIn("model.lm_head.weight", self.inits)
        for fqn, row in rows.items():
            if fqn != "wte.weight":
                self.assertEqual(row["aliases"], [], fqn)
        modules = {m["fqn"]: m for m in self.meta["modules"]}
        self.assertEqual(modules["lm_head"]["params"], ["lm_head.weight"])
        self.assertEqual(modules["wte"]["params"], ["wte.weight"])

    def test_modules_follow_named_modules(self):
        expected = list(self.model.named_modules())
        self.assertEqual([m["fqn"] for m in self.meta["modules"]], [f for f, _ in expected])
        for row, (fqn, m) in zip(self.meta["modules"], expected):
            self.assertEqual(row["class"], type(m).__name__)
            self.assertEqual(row["qualname"], f"{type(m).__module__}.{type(m).__qualname__}")
            pre = fqn + "." if fqn else ""
            self.assertEqual(row["children"], [pre + n for n, _ in m.named_children()])
            self.assertEqual(row["params"],
                             [pre + n for n, _ in m.named_parameters(recurse=False)])
            self.assertEqual(row["buffers"],
                             [pre + n for n, _ in m.named_buffers(recurse=False)])
        root = self.meta["modules"][0]
        self.assertEqual((root["fqn"], root["class"]), ("", "TinyGPT"))
        self.assertEqual(root["children"], ["wte", "wpe", "blocks", "ln_f", "lm_head"])
        attn = next(m for m in self.meta["modules"] if m["fqn"] == "blocks.1.attn")
        self.assertEqual(attn["class"], "Attention")
        self.assertEqual(attn["buffers"], ["blocks.1.attn.mask"])

    def test_non_persistent_mask_is_recorded(self):
        self.assertEqual([b["fqn"] for b in self.meta["buffers"]],
                         [n for n, _ in self.model.named_buffers()])
        for b in self.meta["buffers"]:
            self.assertEqual((b["dtype"], b["shape"], b["persistent"]),
                             ("bool", [8, 8], False))
            # Not in the state dict: torch 1.13 folds it into a Constant.
            self.assertIsNone(b["initializer"])


# --------------------------------------------------------------------------
# Frozen, tied, BatchNorm, unused, two outputs, no loss
# --------------------------------------------------------------------------


class InferenceExportTest(ExportTestBase):
    def setUp(self):
        super().setUp()
        self.model, self.x = _bn()
        self.model.eval()  # export runs training mode and must restore eval
        self.before = {k: v.clone() for k, v in self.model.state_dict().items()}
        self.path = fsdp_mlir.export(self.model, self.x, self.tmp / "sub" / "bn.onnx",
                                     input_names=["features"])
        self.proto = onnx.load(str(self.path))
        self.meta = metadata(self.proto)
        self.inits = {i.name: i for i in self.proto.graph.initializer}
        self.params = {r["fqn"]: r for r in self.meta["params"]}
        self.buffers = {r["fqn"]: r for r in self.meta["buffers"]}

    def test_outputs_and_names(self):
        self.assertFalse(self.meta["loss"])
        self.assertEqual(self.meta["scope_prefix"], "")  # no wrapper
        self.assertEqual(self.meta["inputs"], ["features"])
        self.assertEqual(self.meta["outputs"], ["output_0", "output_1"])
        out = {o.name: o for o in self.proto.graph.output}
        self.assertEqual(dims(out["output_0"]), ["batch", 3])
        self.assertEqual(dims(out["output_1"]), [])  # a scalar: no batch dim
        self.assertEqual(dims(self.proto.graph.input[0]), ["batch", 6])

    def test_frozen_params_keep_requires_grad(self):
        for fqn, p in self.model.named_parameters():
            self.assertEqual(self.params[fqn]["requires_grad"], p.requires_grad, fqn)
        self.assertFalse(self.params["frozen.0.weight"]["requires_grad"])
        self.assertTrue(self.params["head.weight"]["requires_grad"])
        self.assertEqual(self.params["frozen.0.weight"]["initializer"], "frozen.0.weight")

    def test_tied_linears(self):
        self.assertEqual(self.params["a.weight"]["aliases"], ["b.weight"])
        self.assertNotIn("b.weight", self.params)
        self.assertEqual(self.params["a.weight"]["initializer"], "a.weight")
        self.assertIn("b.bias", self.params)

    def test_unused_param_gets_an_initializer(self):
        # No node reads it, so torch's exporter drops it; export adds it
        # back, so the plan's state dict and checkpoints carry it.
        self.assertEqual(self.params["unused"]["initializer"], "unused")
        self.assertEqual(self.params["unused"]["shape"], [3])
        self.assertTrue(self.params["unused"]["requires_grad"])
        np.testing.assert_array_equal(numpy_helper.to_array(self.inits["unused"]),
                                      np.full(3, 0.25, np.float32))

    def test_buffers(self):
        self.assertEqual(list(self.buffers), [n for n, _ in self.model.named_buffers()])
        self.assertEqual(self.buffers["bn.running_mean"]["initializer"], "bn.running_mean")
        self.assertEqual(self.buffers["bn.running_var"]["initializer"], "bn.running_var")
        self.assertTrue(self.buffers["bn.running_mean"]["persistent"])
        nbt = self.buffers["bn.num_batches_tracked"]
        self.assertEqual((nbt["dtype"], nbt["shape"], nbt["persistent"]), ("int64", [], True))
        # No node reads it; export adds its initializer so the plan counts it.
        self.assertEqual(nbt["initializer"], "bn.num_batches_tracked")
        init = next(i for i in self.proto.graph.initializer
                    if i.name == "bn.num_batches_tracked")
        self.assertEqual(numpy_helper.to_array(init).item(),
                         int(self.model.bn.num_batches_tracked))
        scratch = self.buffers["scratch"]
        self.assertEqual((scratch["dtype"], scratch["persistent"], scratch["initializer"]),
                         ("bfloat16", False, None))
        bn = next(n for n in self.proto.graph.node if n.op_type == "BatchNormalization")
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in bn.attribute}
        self.assertEqual(attrs["training_mode"], 1)

    def test_file_holds_the_state_from_before_the_call(self):
        # torch 1.13 would store BatchNorm statistics after the tracing
        # forward; export() stores (and leaves) the model's own state.
        for name in ("bn.running_mean", "bn.running_var", "frozen.0.weight", "a.weight"):
            np.testing.assert_array_equal(numpy_helper.to_array(self.inits[name]),
                                          self.before[name].numpy(), name)
        after = self.model.state_dict()
        for k, v in self.before.items():
            self.assertTrue(torch.equal(after[k], v), k)
        self.assertFalse(self.model.training)
        self.assertFalse(any(m.training for m in self.model.modules()))

    def test_modules_class_names(self):
        self.assertEqual([(m["fqn"], m["class"]) for m in self.meta["modules"]],
                         [(f, type(m).__name__) for f, m in self.model.named_modules()])
        frozen = next(m for m in self.meta["modules"] if m["fqn"] == "frozen")
        self.assertEqual(frozen["children"], ["frozen.0", "frozen.1"])
        self.assertEqual(frozen["qualname"], "torch.nn.modules.container.Sequential")
        root = self.meta["modules"][0]
        self.assertEqual(root["params"], ["unused"])
        self.assertEqual(root["buffers"], ["scratch"])


class ExpertsHintTest(ExportTestBase):
    """A Hugging Face Mixture-of-Experts model whose experts loop over the
    routed experts (transformers 5's "grouped_mm" and "eager") fails in
    torch.export; the ExportError then says how to make it traceable. The
    exporter's failure is simulated: transformers is not installed here."""

    class Moe(nn.Module):
        def __init__(self, implementation):
            super().__init__()
            self.config = type("Config", (), {"_experts_implementation": implementation})()
            self.proj = nn.Linear(4, 4)

        def _can_set_experts_implementation(self):
            return True

        def forward(self, x):
            return self.proj(x)

    def export_failing(self, model):
        from unittest import mock

        with mock.patch("fsdp_mlir.export._export_with",
                        side_effect=RuntimeError("data-dependent expression")):
            with self.assertRaises(fsdp_mlir.ExportError) as caught:
                fsdp_mlir.export(model, torch.randn(2, 4), self.tmp / "moe.onnx",
                                 exporter="torchscript")
        return str(caught.exception)

    def test_the_error_names_batched_mm(self):
        text = self.export_failing(self.Moe("grouped_mm"))
        self.assertIn("RuntimeError: data-dependent expression", text)
        self.assertIn("hint: this Hugging Face Mixture-of-Experts model runs its experts "
                      "with experts_implementation='grouped_mm'", text)
        self.assertIn("model.set_experts_implementation('batched_mm')", text)

    def test_no_hint_once_batched_mm_or_for_other_models(self):
        for model in (self.Moe("batched_mm"), nn.Linear(4, 4)):
            self.assertNotIn("hint:", self.export_failing(model))


class OptionsTest(ExportTestBase):
    def test_static_batch(self):
        model, x = _bn()
        proto = onnx.load(str(fsdp_mlir.export(model, (x,), self.tmp / "s.onnx",
                                                dynamic_batch=False)))
        self.assertEqual(dims(proto.graph.input[0]), [4, 6])
        self.assertEqual(dims(proto.graph.output[0]), [4, 3])
        self.assertIsNone(metadata(proto)["batch_dim"])

    def test_custom_input_names_with_loss(self):
        model, idx, labels = _gpt()
        proto = onnx.load(str(fsdp_mlir.export(model, (idx, labels), self.tmp / "n.onnx",
                                                loss_fn=lm_loss,
                                                input_names=["input_ids", "labels"])))
        meta = metadata(proto)
        self.assertEqual(meta["inputs"], ["input_ids", "labels"])
        self.assertEqual([i.name for i in proto.graph.input], ["input_ids", "labels"])

    def test_external_data(self):
        model, idx, labels = _gpt()
        path = self.tmp / "ext.onnx"
        for _ in range(2):  # re-exporting replaces the data file, never appends
            self.assertEqual(fsdp_mlir.export(model, (idx, labels), path, loss_fn=lm_loss,
                                              external_data=True), path)
        data = self.tmp / "ext.onnx.data"
        self.assertTrue(data.is_file())
        distinct = sum(p.numel() for p in model.parameters())
        self.assertEqual(data.stat().st_size, 4 * distinct)
        self.assertEqual(sorted(p.name for p in self.tmp.iterdir()),
                         ["ext.onnx", "ext.onnx.data"])
        onnx.checker.check_model(str(path))
        bare = onnx.load(str(path), load_external_data=False)
        for init in bare.graph.initializer:
            self.assertEqual(init.data_location, onnx.TensorProto.EXTERNAL, init.name)
            self.assertEqual(init.raw_data, b"")
            location = {e.key: e.value for e in init.external_data}["location"]
            self.assertEqual(location, "ext.onnx.data")
        full = onnx.load(str(path))
        meta = metadata(full)
        inits = {i.name: i for i in full.graph.initializer}
        named = dict(model.named_parameters())
        for row in meta["params"]:
            np.testing.assert_array_equal(numpy_helper.to_array(inits[row["initializer"]]),
                                          as_numpy(named[row["fqn"]]))

    def test_exporting_twice_in_one_process_is_stable(self):
        model, idx, labels = _gpt()
        a = onnx.load(str(fsdp_mlir.export(model, (idx, labels), self.tmp / "a.onnx",
                                            loss_fn=lm_loss)))
        b = onnx.load(str(fsdp_mlir.export(model, (idx, labels), self.tmp / "b.onnx",
                                            loss_fn=lm_loss)))
        self.assertEqual(metadata(a), metadata(b))
        self.assertEqual([n.name for n in a.graph.node], [n.name for n in b.graph.node])


class ErrorTest(ExportTestBase):
    def assertExportFails(self, pattern, *args, **kwargs):
        with self.assertRaisesRegex(RuntimeError, pattern) as cm:
            fsdp_mlir.export(*args, **kwargs)
        self.assertIsInstance(cm.exception, fsdp_mlir.ExportError)
        self.assertTrue(str(cm.exception).startswith("fsdp_mlir.export: "))
        return cm.exception

    def test_inputs_that_do_not_fit_the_model(self):
        model, x = _bn()
        err = self.assertExportFails(
            r"running the model on example_inputs .* failed: RuntimeError: .*shapes",
            model, torch.randn(4, 5), self.tmp / "bad.onnx")
        self.assertEqual(err.step, "running the model on example_inputs (in training mode)")
        self.assertIsNotNone(err.__cause__)
        self.assertFalse((self.tmp / "bad.onnx").exists())
        self.assertEqual(list(self.tmp.iterdir()), [])

    def test_unknown_or_unavailable_exporter(self):
        model, x = _bn()
        self.assertExportFails(r"checking the arguments failed: ValueError: exporter must be "
                               r"one of auto, torchscript, dynamo, got 'onnxruntime'",
                               model, x, self.tmp / "bad.onnx", exporter="onnxruntime")
        if int(torch.__version__.split(".")[0]) < 2:
            self.assertExportFails(r"exporter='dynamo' needs torch 2.x; this is torch 1\.",
                                   model, x, self.tmp / "bad.onnx", exporter="dynamo")
        self.assertEqual(list(self.tmp.iterdir()), [])

    @unittest.skipIf(int(torch.__version__.split(".")[0]) < 2,
                     "torch 1.13 has only the TorchScript exporter")
    def test_auto_falls_back_to_dynamo(self):
        class Rot90(nn.Module):  # aten::rot90: TorchScript cannot export it
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                return torch.rot90(self.fc(x))

        x = torch.randn(2, 4)
        with self.assertWarnsRegex(UserWarning, r"the TorchScript exporter failed "
                                   r"\(.*aten::rot90.*\); exporting with dynamo instead"):
            path = fsdp_mlir.export(Rot90(), x, self.tmp / "rot.onnx")
        graph = onnx.load(str(path)).graph
        self.assertIn("fc.weight", [i.name for i in graph.initializer])
        self.assertNotIn("ATen", [n.op_type for n in graph.node])
        with self.assertRaisesRegex(fsdp_mlir.ExportError, r"torch\.onnx\.export "
                                    r"\(torchscript\) failed: .*aten::rot90"):
            fsdp_mlir.export(Rot90(), x, self.tmp / "rot2.onnx", exporter="torchscript")

    def test_diff_exports_and_the_symbolics_are_removed_after(self):
        """torch.diff (Hugging Face's mask code) exports through TorchScript
        with the symbolic export() registers for the call; torch's registry
        is as it was afterwards, and a symbolic of the user's is kept."""
        from fsdp_mlir.export import _has_user_symbolic

        class Diff(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                return torch.diff(self.fc(x), dim=-1)

        path = fsdp_mlir.export(Diff(), torch.randn(2, 4), self.tmp / "diff.onnx",
                                exporter="torchscript")
        self.assertIn("Sub", [n.op_type for n in onnx.load(str(path)).graph.node])
        self.assertFalse(_has_user_symbolic("aten::diff", 17))
        self.assertFalse(_has_user_symbolic("aten::cumsum", 17))

        def mine(g, x, n, dim, prepend, append):
            return g.op("Identity", x)

        torch.onnx.register_custom_op_symbolic("aten::diff", mine, 17)
        try:
            self.assertTrue(_has_user_symbolic("aten::diff", 17))
            path = fsdp_mlir.export(Diff(), torch.randn(2, 4), self.tmp / "mine.onnx",
                                    exporter="torchscript")
            self.assertNotIn("Sub", [n.op_type for n in onnx.load(str(path)).graph.node])
            self.assertTrue(_has_user_symbolic("aten::diff", 17))
        finally:
            torch.onnx.unregister_custom_op_symbolic("aten::diff", 17)

    def test_fold_sizes_without_a_block_grid_are_refused(self):
        """What fold's export (the aten::col2im symbolic, opset-18 Col2Im
        converted down) cannot write as a ConvTranspose is refused naming
        the sizes."""
        from fsdp_mlir.export import _fold_as_conv_transpose

        with self.assertRaisesRegex(ValueError, r"Col2Im of image \[4, 4\], kernel \[2, 2\], "
                                    r"dilations \[1, 1\], pads \[0, 0, 0, 0\], strides "
                                    r"\[1, 1\]: its input's 6 columns are not a known "
                                    r"multiple of the kernel's size"):
            _fold_as_conv_transpose(6, [4, 4], [2, 2], [1, 1], [0] * 4, [1, 1])
        with self.assertRaisesRegex(ValueError, r"Col2Im of image \[1, 4\], .*: no block fits "
                                    r"image axis 0"):
            _fold_as_conv_transpose(4, [1, 4], [2, 2], [1, 1], [0] * 4, [1, 1])

    def test_wrong_number_of_inputs(self):
        model, x = _bn()
        self.assertExportFails(r"example_inputs .* failed: TypeError: .*positional",
                               model, (x, x), self.tmp / "bad.onnx")

    def test_bad_arguments(self):
        model, x = _bn()
        out = self.tmp / "bad.onnx"
        self.assertExportFails(r"checking the arguments failed: TypeError: example_inputs\[1\]",
                               model, (x, 3), out)
        self.assertExportFails(r"checking the arguments failed: TypeError: example_inputs must",
                               model, {"x": x}, out)
        self.assertExportFails(r"checking the arguments failed: .*torch.nn.Module",
                               lambda t: t, x, out)
        self.assertExportFails(r"2 input_names for 1 example inputs",
                               model, x, out, input_names=["a", "b"])
        self.assertExportFails(r"at least two tensors", model, x, out, loss_fn=lm_loss)
        self.assertExportFails(r"dynamic_batch=False", model, torch.tensor(1.0), out)

    def test_loss_that_is_not_a_scalar(self):
        model, x = _bn()
        self.assertExportFails(r"loss_fn must return one scalar tensor",
                               model, (x, torch.zeros(4, 3)), self.tmp / "bad.onnx",
                               loss_fn=lambda out, y: out[0] - y)


class PaddedLM(nn.Module):
    def __init__(self, padding_idx=0, **embedding):
        super().__init__()
        self.tok = nn.Embedding(10, 4, padding_idx=padding_idx, **embedding)
        self.head = nn.Linear(4, 10)

    def forward(self, ids):
        return self.head(self.tok(ids))


class EmbeddingTest(ExportTestBase):
    """What ONNX's Gather drops: padding_idx goes into the metadata, the
    rest is refused naming the module."""

    def test_padding_idx_is_recorded_normalised(self):
        ids = torch.tensor([[1, 0, 9]])
        for given, recorded in ((0, 0), (-1, 9)):
            path = fsdp_mlir.export(PaddedLM(given), ids, self.tmp / "lm.onnx")
            self.assertEqual(metadata(onnx.load(str(path)))["embeddings"],
                             [{"module": "tok", "weight": "tok.weight",
                               "padding_idx": recorded}])

    def test_refused_options_name_the_module(self):
        ids = torch.tensor([[1, 0, 9]])
        for options, text in (({"max_norm": 1.0}, "Embedding 'tok' has max_norm=1.0"),
                              ({"scale_grad_by_freq": True},
                               "Embedding 'tok' has scale_grad_by_freq=True"),
                              ({"sparse": True}, "Embedding 'tok' has sparse=True")):
            with self.assertRaises(fsdp_mlir.ExportError) as cm:
                fsdp_mlir.export(PaddedLM(None, **options), ids, self.tmp / "lm.onnx")
            self.assertIn("reading the model's parameters and buffers failed", str(cm.exception))
            self.assertIn(text, str(cm.exception))
        self.assertEqual(list(self.tmp.iterdir()), [])


class WarningsTest(ExportTestBase):
    """torch's warnings about what export() handles are filtered; others
    are not."""

    def export_warnings(self, model, x):
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fsdp_mlir.export(model, x, self.tmp / "m.onnx")
        return [str(w.message) for w in caught]

    def test_handled_warnings_are_filtered(self):
        model, x = _bn()
        self.assertEqual([w for w in self.export_warnings(model, x)
                          if "num_batches_tracked" in w], [])
        for padding_idx in (0, 3):
            shown = self.export_warnings(PaddedLM(padding_idx), torch.tensor([[1, 0]]))
            self.assertEqual(shown, [])

    def test_other_warnings_stay(self):
        # momentum=None reads num_batches_tracked, which the trace freezes.
        model = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8, momentum=None))
        shown = self.export_warnings(model, torch.randn(4, 6))
        self.assertTrue(any("num_batches_tracked" in w for w in shown), shown)


if __name__ == "__main__":
    unittest.main()
