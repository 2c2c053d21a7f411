"""compile(), policies, Session (one rank and, through the launcher, two),
state dicts into torch, checkpoints and fsdp-compile, against the tools and
runtime the project built (found through $FSDP_MLIR_TOOLS_DIR, which ctest
sets, or the repository's build/bin)."""

import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path
from unittest import mock

import numpy as np
import torch

import fsdp_mlir
from fsdp_mlir._tools import run_tool
from fsdp_mlir.runtime import RuntimeError_

REPO = Path(__file__).resolve().parents[2]
os.environ.setdefault(fsdp_mlir._tools.TOOLS_DIR_ENV, str(REPO / "build" / "bin"))
sys.path.insert(0, str(REPO / "python-frontend" / "examples"))
from tiny_gpt import Block, TinyGPT, data, loss_fn  # noqa: E402

ADAMW = {"optimizer": "adamw", "max_grad_norm": 1.0}


class CompileAndRunTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.work = Path(cls.tmp.name)
        torch.manual_seed(0)
        cls.model = TinyGPT()
        cls.ids, cls.labels = data()
        cls.onnx = fsdp_mlir.export(cls.model, (cls.ids[:1], cls.labels[:1]),
                                    cls.work / "gpt.onnx", loss_fn=loss_fn,
                                    input_names=["input_ids", "labels"])
        cls.batch = {"input_ids": cls.ids.numpy(), "labels": cls.labels.numpy()}
        cls.plan1 = fsdp_mlir.compile(cls.onnx, batch_size=8, world_size=1,
                                      policy=fsdp_mlir.transformer_layers({Block}),
                                      optimizer=ADAMW, out=cls.work / "gpt1.plan")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def torch_steps(self, steps):
        model = copy.deepcopy(self.model)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
        losses = []
        for _ in range(steps):
            opt.zero_grad()
            loss = loss_fn(model(self.ids), self.labels)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses.append(float(loss))
        return losses, model

    def test_hostile_numbers_are_refused(self):
        # 65536 threads crashed inside OpenMP; a NaN deadline was none; a NaN
        # learning rate trained into NaN.
        for threads in (-1, 65536, 1.5):
            with self.assertRaisesRegex(ValueError, "threads must be an int from 0 to 1024"):
                fsdp_mlir.Session(self.plan1, threads=threads)
        for timeout in (float("nan"), float("inf"), -1.0):
            with self.assertRaisesRegex(ValueError, "timeout must be finite seconds >= 0"):
                fsdp_mlir.Session(self.plan1, timeout=timeout)
        for seed in (-1, 2**64, 1.5, True):
            with self.assertRaisesRegex(ValueError, "seed must be an int from 0 to 2\\*\\*64-1"):
                fsdp_mlir.Session(self.plan1, seed=seed)
        with fsdp_mlir.Session(self.plan1, threads=1) as session:
            # 1e39 rounded to float32's inf and trained into NaN; a
            # negative rate trained uphill (torch's AdamW refuses it).
            for lr in (float("nan"), float("inf"), 1e39):
                with self.assertRaisesRegex(ValueError, "lr must be a finite float32 number"):
                    session.step(self.batch, lr=lr)
            with self.assertRaisesRegex(ValueError, "lr must be >= 0"):
                session.step(self.batch, lr=-1e-3)
            # A left-out input ran on zeros (or on the last call's values).
            for given in ({"input_ids": self.batch["input_ids"]}, {}):
                with self.assertRaisesRegex(KeyError, "missing input .*labels"):
                    session.step(given, lr=1e-3)
                with self.assertRaisesRegex(KeyError, "missing input .*labels"):
                    session.forward(given)
            # Inputs that convert only by changing values were converted
            # silently: float token ids truncated, objects coerced, big
            # integers wrapped.
            ids = self.batch["input_ids"]
            for bad in (ids + 0.7, ids.astype(object), ids.astype(str)):
                with self.assertRaisesRegex(TypeError, "input 'input_ids' is .*; the plan "
                                                       "takes int64"):
                    session.step({**self.batch, "input_ids": bad}, lr=1e-3)
            loss = session.step({**self.batch, "input_ids": ids.astype(np.int32)}, lr=1e-3)
            self.assertTrue(np.isfinite(loss))

    def test_seed_decides_the_dropout_masks(self):
        # The same seed trains the same (the masks are a function of seed,
        # step, op and element); another seed draws other masks.
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Dropout(0.5),
                                    torch.nn.Linear(32, 1))
        x, y = torch.randn(4, 8), torch.randn(4, 1)
        onnx = fsdp_mlir.export(model, (x, y), self.work / "drop.onnx",
                                loss_fn=lambda o, t: ((o - t) ** 2).mean())
        plan = fsdp_mlir.compile(onnx, batch_size=4, world_size=1, optimizer={"optimizer": "sgd"},
                                 out=self.work / "drop.plan")

        def losses(seed):
            with fsdp_mlir.Session(plan, seed=seed) as session:
                batch = {"input_0": x.numpy(), "input_1": y.numpy()}
                return [session.step(batch, lr=0.1) for _ in range(3)]

        first = losses(2**64 - 1)
        self.assertEqual(first, losses(2**64 - 1))
        self.assertNotEqual(first, losses(5))

    def test_step_equals_torch_and_state_dict_loads_strictly(self):
        with fsdp_mlir.Session(self.plan1) as session:
            losses = [session.step(self.batch, lr=3e-3) for _ in range(3)]
            state = session.state_dict()
            outputs = session.forward({**self.batch, "lr": np.float32(0),
                                       "step": np.float32(4)})
        want, trained = self.torch_steps(3)
        np.testing.assert_allclose(losses, want, rtol=1e-4, atol=1e-5)
        # Every parameter, tied ones under both names, loads into torch.
        model = TinyGPT()
        model.load_state_dict(state, strict=True)
        self.assertIs(state["lm_head.weight"], state["wte.weight"])
        for name, tensor in model.state_dict().items():
            self.assertTrue(torch.equal(tensor, state[name]), name)  # exact
        with torch.no_grad():
            ours = float(loss_fn(model(self.ids), self.labels))
        # The runtime's loss of the next forward (lr 0: no update) is the
        # loaded torch module's.
        self.assertAlmostEqual(float(outputs["loss"]), ours, places=4)
        for name, tensor in trained.state_dict().items():
            if name.endswith("in_proj_bias"):
                continue  # its key part has no gradient: AdamW steps on rounding noise
            np.testing.assert_allclose(state[name].numpy(), tensor.numpy(),
                                       rtol=1e-4, atol=1e-5, err_msg=name)

    def test_checkpoints_resume(self):
        with fsdp_mlir.Session(self.plan1) as session:
            first = [session.step(self.batch, lr=3e-3) for _ in range(2)]
            session.save(self.work / "ckpt")
            session.save(self.work / "full.safetensors", full=True)
            later = [session.step(self.batch, lr=3e-3) for _ in range(2)]
        with fsdp_mlir.Session(self.plan1, load_weights=False) as resumed:
            resumed.load(self.work / "ckpt")
            again = [resumed.step(self.batch, lr=3e-3) for _ in range(2)]
        np.testing.assert_allclose(again, later, rtol=1e-6)
        with fsdp_mlir.Session(self.plan1, load_weights=False) as loaded:
            loaded.load(self.work / "full.safetensors")
            self.assertGreater(len(loaded.state_dict()), 0)
        self.assertEqual(len(first), 2)

    def test_saves_refuse_foreign_files_and_an_interrupted_save_resumes(self):
        notes = self.work / "experiment"
        notes.mkdir()
        (notes / "notes.txt").write_text("x")
        (self.work / "mine.safetensors").write_text("mine")
        with fsdp_mlir.Session(self.plan1) as session:
            session.step(self.batch, lr=3e-3)
            with self.assertRaisesRegex(RuntimeError_, "holds 'notes.txt'"):
                session.save(notes)
            with self.assertRaisesRegex(RuntimeError_, "refusing to overwrite"):
                session.save(self.work / "mine.safetensors", full=True)
            session.save(self.work / "killed")
        self.assertEqual((notes / "notes.txt").read_text(), "x")
        self.assertEqual((self.work / "mine.safetensors").read_text(), "mine")
        # Killed between the save's renames: only the finished .tmp is left.
        (self.work / "killed").rename(self.work / "killed.tmp")
        with fsdp_mlir.Session(self.plan1, load_weights=False) as resumed:
            resumed.load(self.work / "killed")
            resumed.step(self.batch, lr=3e-3)

    def test_two_ranks_through_the_launcher_equal_one(self):
        plan2 = fsdp_mlir.compile(self.onnx, batch_size=4, world_size=2,
                                  policy=fsdp_mlir.transformer_layers({Block}),
                                  optimizer=ADAMW, out=self.work / "gpt2.plan")
        script = self.work / "two.py"
        script.write_text(textwrap.dedent(f"""
            import json, numpy as np, fsdp_mlir
            session = fsdp_mlir.Session({str(plan2)!r}, threads=1)
            batch = {{"input_ids": np.load({str(self.work / 'ids.npy')!r}),
                      "labels": np.load({str(self.work / 'labels.npy')!r})}}
            losses = [session.step(batch, lr=3e-3) for _ in range(3)]
            state = session.state_dict()
            if session.rank == 0:
                print(json.dumps({{"losses": losses,
                                   "wte": state["wte.weight"].numpy().tolist()}}))
        """))
        np.save(self.work / "ids.npy", self.batch["input_ids"])
        np.save(self.work / "labels.npy", self.batch["labels"])
        result = subprocess.run([sys.executable, "-m", "fsdp_mlir.launch", "-n", "2",
                                 str(script)], capture_output=True, text=True, timeout=300,
                                env=dict(os.environ))
        self.assertEqual(result.returncode, 0, (result.stdout + result.stderr)[-3000:])
        report = json.loads(result.stdout.strip().splitlines()[-1])
        want, trained = self.torch_steps(3)
        np.testing.assert_allclose(report["losses"], want, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(report["wte"], trained.wte.weight.detach().numpy(),
                                   rtol=1e-4, atol=1e-5)

    def test_the_device_is_an_option_and_unknown_ones_are_named(self):
        with fsdp_mlir.Session(self.plan1, device="cpu") as session:
            self.assertEqual(session.world_size, 1)
        with self.assertRaisesRegex(RuntimeError_, "unknown device 'tpu'"):
            fsdp_mlir.Session(self.plan1, device="tpu")

    def test_a_plan_for_other_world_sizes_is_refused(self):
        plan2 = fsdp_mlir.compile(self.onnx, batch_size=4, world_size=2,
                                  optimizer=ADAMW, out=self.work / "other.plan")
        with self.assertRaisesRegex(RuntimeError_, "sharded over 2 ranks but this job "
                                    "has 1; run it with mpirun -np 2"):
            fsdp_mlir.Session(plan2)
        with self.assertRaisesRegex(RuntimeError_, "world_size 4 was asked for, but this "
                                    "process is world_size 1"):
            fsdp_mlir.Session(self.plan1, world_size=4)

    def test_a_memory_budget_below_the_plans_peak_is_refused(self):
        with self.assertRaisesRegex(RuntimeError_, r"the plan needs \d+ bytes per rank "
                                    r"\(activations \d+, .*more than the memory budget "
                                    r"of 1000 bytes"):
            fsdp_mlir.Session(self.plan1, memory_budget=1000)
        session = fsdp_mlir.Session(self.plan1, memory_budget=1 << 30)
        session.close()

    def test_policies(self):
        with self.assertRaisesRegex(fsdp_mlir.PolicyError, "no module of class Nope; "
                                    "its classes: .*Block"):
            fsdp_mlir.compile(self.onnx, batch_size=8,
                              policy=fsdp_mlir.transformer_layers({"Nope"}))
        with self.assertRaisesRegex(fsdp_mlir.PolicyError, "min_num_params"):
            fsdp_mlir.size_based(-1)
        with self.assertRaisesRegex(fsdp_mlir.PolicyError, "policy must come from"):
            fsdp_mlir.compile(self.onnx, batch_size=8, policy="size")
        with self.assertRaisesRegex(ValueError, "unknown strategy"):
            fsdp_mlir.compile(self.onnx, batch_size=8, strategy="SHARD_EVERYTHING")
        # A lambda on FQNs becomes the file-level policy: blocks.0 alone.
        plan = fsdp_mlir.compile(self.onnx, batch_size=8, world_size=2,
                                 policy=fsdp_mlir.by_fqn(lambda fqn, cls: fqn == "blocks.0"),
                                 out=self.work / "lambda.plan")
        described = json.loads(fsdp_mlir.run_tool("fsdp-run", [plan, "--describe", "--json"]))
        self.assertEqual(sorted(u["module"] for u in described["units"]), ["", "blocks.0"])
        plan = fsdp_mlir.compile(self.onnx, batch_size=8, world_size=2,
                                 policy=fsdp_mlir.size_based(10_000),
                                 out=self.work / "size.plan")
        described = json.loads(fsdp_mlir.run_tool("fsdp-run", [plan, "--describe", "--json"]))
        self.assertEqual(sorted(u["module"] for u in described["units"]),
                         ["", "blocks.0", "blocks.1"])

    def test_auto_policy(self):
        # The compiler's choice compiles, runs and trains as torch does.
        plan = fsdp_mlir.compile(self.onnx, batch_size=8, world_size=1,
                                 policy=fsdp_mlir.auto("64M"), optimizer=ADAMW,
                                 out=self.work / "auto.plan")
        session = fsdp_mlir.Session(plan, threads=1)
        losses = [session.step(self.batch, lr=3e-3) for _ in range(3)]
        session.close()
        want, _ = self.torch_steps(3)
        np.testing.assert_allclose(losses, want, rtol=1e-4, atol=1e-5)
        with self.assertRaisesRegex(fsdp_mlir.ToolError, "no configuration fits the "
                                    "memory budget of 1024 bytes"):
            fsdp_mlir.compile(self.onnx, batch_size=8, world_size=2,
                              policy=fsdp_mlir.auto(1024), optimizer=ADAMW,
                              out=self.work / "tiny-budget.plan")
        with self.assertRaisesRegex(fsdp_mlir.PolicyError, "memory_budget"):
            fsdp_mlir.auto(-5)

    def test_tool_failures_carry_the_command(self):
        with self.assertRaises(fsdp_mlir.ToolError) as caught:
            fsdp_mlir.compile(self.onnx, batch_size=8, optimizer=ADAMW, loss="hinge")
        self.assertIn("reproduce with:", str(caught.exception))
        self.assertIn("fsdp-opt", caught.exception.command)
        with mock.patch.dict(os.environ, {fsdp_mlir._tools.TOOLS_DIR_ENV: str(self.work),
                                          "PATH": str(self.work)}):
            with self.assertRaises(fsdp_mlir.ToolNotFoundError):
                fsdp_mlir.compile(self.onnx, batch_size=8)

    def test_fsdp_run_reports_its_own_peak_not_its_launchers(self):
        # getrusage's peak survives exec: a large Python parent's was
        # reported as fsdp-run's (1.4 GB for SqueezeNet).
        ballast = np.ones(64 << 20)  # 512 MiB, touched
        np.save(self.work / "ids.npy", self.batch["input_ids"])
        np.save(self.work / "labels.npy", self.batch["labels"])
        report = json.loads(fsdp_mlir.run_tool("fsdp-run", [
            self.plan1, "--input", f"input_ids={self.work / 'ids.npy'}",
            "--input", f"labels={self.work / 'labels.npy'}", "--steps", "1", "--lr", "1e-3",
            "--threads", "1", "--json"]))
        memory = report["memory"]
        self.assertGreater(ballast.nbytes, 500 << 20)
        self.assertLess(memory["peak_rss_bytes"], 256 << 20, memory)
        self.assertGreaterEqual(memory["peak_rss_bytes"], memory["rss_before_session_bytes"])
        self.assertGreaterEqual(memory["peak_rss_bytes"],
                                memory["weight_bytes"] + memory["activation_bytes"])

    def test_fsdp_compile_command(self):
        out = self.work / "cli.plan"
        result = subprocess.run([sys.executable, "-m", "fsdp_mlir.cli", str(self.onnx),
                                 "--batch-size", "4", "--world-size", "2",
                                 "--transformer-layers", "Block", "--optimizer", "adamw",
                                 "-o", str(out)], capture_output=True, text=True)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.strip(), str(out))
        bad = subprocess.run([sys.executable, "-m", "fsdp_mlir.cli", str(self.onnx),
                              "--batch-size", "4", "--transformer-layers", "Nope"],
                             capture_output=True, text=True)
        self.assertEqual(bad.returncode, 1)
        self.assertIn("no module of class Nope", bad.stderr)


class FrozenBackbone(torch.nn.Module):
    """A frozen two-layer backbone under a trainable head."""

    def __init__(self):
        super().__init__()
        self.backbone = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(),
                                            torch.nn.Linear(16, 16))
        self.backbone.requires_grad_(False)
        self.head = torch.nn.Linear(16, 3)

    def forward(self, x):
        return self.head(torch.relu(self.backbone(x)))


def frozen_loss(logits, labels):
    return torch.nn.functional.cross_entropy(logits, labels)


class FrozenParametersTest(unittest.TestCase):
    """compile() without a policy on a model with frozen parameters: the
    frozen backbone is a unit of its own, trains as torch does and does not
    change; the work directory goes away on success and stays on failure."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.work = Path(cls.tmp.name)
        torch.manual_seed(0)
        cls.model = FrozenBackbone()
        cls.x = torch.randn(8, 6)
        cls.y = torch.randint(0, 3, (8,))
        cls.onnx = fsdp_mlir.export(cls.model, (cls.x[:1], cls.y[:1]), cls.work / "frozen.onnx",
                                    loss_fn=frozen_loss, input_names=["x", "y"])
        cls.batch = {"x": cls.x.numpy(), "y": cls.y.numpy()}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def leftovers(self):
        return sorted(p.name for p in self.work.iterdir() if p.name.startswith("fsdp-compile-"))

    def torch_steps(self, steps):
        model = copy.deepcopy(self.model)
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
        losses = []
        for _ in range(steps):
            opt.zero_grad()
            loss = frozen_loss(model(self.x), self.y)
            loss.backward()
            opt.step()
            losses.append(float(loss))
        return losses, model

    def test_trains_as_torch_with_the_frozen_backbone_unchanged(self):
        plan = fsdp_mlir.compile(self.onnx, batch_size=8, optimizer={"optimizer": "adamw"},
                                 out=self.work / "train.plan")
        self.assertEqual(self.leftovers(), [])
        described = json.loads(fsdp_mlir.run_tool("fsdp-run", [plan, "--describe", "--json"]))
        self.assertEqual(sorted(u["module"] for u in described["units"]), ["", "backbone"])
        with fsdp_mlir.Session(plan, threads=1) as session:
            losses = [session.step(self.batch, lr=1e-2) for _ in range(3)]
            state = session.state_dict()
        want, trained = self.torch_steps(3)
        np.testing.assert_allclose(losses, want, rtol=1e-4, atol=1e-5)
        for name, tensor in trained.state_dict().items():
            if name.startswith("backbone."):  # frozen: bit for bit the start
                self.assertTrue(torch.equal(state[name], self.model.state_dict()[name]), name)
            np.testing.assert_allclose(state[name].numpy(), tensor.numpy(),
                                       rtol=1e-4, atol=1e-5, err_msg=name)
        self.assertFalse(torch.equal(state["head.weight"], self.model.head.weight.detach()))

    def test_two_ranks_through_the_launcher(self):
        plan = fsdp_mlir.compile(self.onnx, batch_size=4, world_size=2,
                                 optimizer={"optimizer": "adamw"}, out=self.work / "train2.plan")
        np.save(self.work / "x.npy", self.batch["x"])
        np.save(self.work / "y.npy", self.batch["y"])
        script = self.work / "frozen2.py"
        script.write_text(textwrap.dedent(f"""
            import json, numpy as np, fsdp_mlir
            session = fsdp_mlir.Session({str(plan)!r}, threads=1)
            batch = {{"x": np.load({str(self.work / 'x.npy')!r}),
                      "y": np.load({str(self.work / 'y.npy')!r})}}
            losses = [session.step(batch, lr=1e-2) for _ in range(3)]
            state = session.state_dict()
            if session.rank == 0:
                print(json.dumps({{"losses": losses, "state": {{
                    k: v.numpy().tolist() for k, v in state.items()}}}}))
        """))
        result = subprocess.run([sys.executable, "-m", "fsdp_mlir.launch", "-n", "2",
                                 str(script)], capture_output=True, text=True, timeout=300,
                                env=dict(os.environ))
        self.assertEqual(result.returncode, 0, (result.stdout + result.stderr)[-3000:])
        report = json.loads(result.stdout.strip().splitlines()[-1])
        want, trained = self.torch_steps(3)
        np.testing.assert_allclose(report["losses"], want, rtol=1e-4, atol=1e-5)
        for name, tensor in trained.state_dict().items():
            np.testing.assert_allclose(np.array(report["state"][name], np.float32),
                                       tensor.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)
            if name.startswith("backbone."):
                np.testing.assert_array_equal(np.array(report["state"][name], np.float32),
                                              self.model.state_dict()[name].numpy())

    def test_inference_at_world_size_one(self):
        plan = fsdp_mlir.compile(self.onnx, batch_size=8, out=self.work / "infer.plan")
        with fsdp_mlir.Session(plan, threads=1) as session:
            loss = float(session.forward(self.batch)["loss"])
        with torch.no_grad():
            want = float(frozen_loss(self.model(self.x), self.y))
        self.assertAlmostEqual(loss, want, places=5)

    def test_without_wrap_frozen_the_error_names_the_kept_work_directory(self):
        with self.assertRaises(fsdp_mlir.ToolError) as caught:
            fsdp_mlir.compile(self.onnx, batch_size=8, wrap_frozen=False,
                              out=self.work / "mixed.plan")
        message = str(caught.exception)
        self.assertIn("mixes frozen and trainable parameters", message)
        kept = self.leftovers()
        self.assertEqual(len(kept), 1, kept)
        self.assertIn(f"intermediate files kept in {self.work / kept[0]}", message)
        shutil.rmtree(self.work / kept[0])
        # use_orig_params reaches fsdp-auto-wrap (the mix is a warning there)
        # and fsdp-flatten, whose one flat buffer cannot hold the mix.
        with self.assertRaises(fsdp_mlir.ToolError) as caught:
            fsdp_mlir.compile(self.onnx, batch_size=8, wrap_frozen=False,
                              use_orig_params=True, out=self.work / "orig.plan")
        self.assertIn("use-orig-params=true", caught.exception.command)
        self.assertIn("warning: fsdp-auto-wrap: unit (root) mixes frozen", str(caught.exception))
        self.assertIn("'fsdp.flat_param' op mixes frozen and trainable parameters",
                      str(caught.exception))
        shutil.rmtree(self.work / self.leftovers()[0])

    def test_fsdp_compile_command_options(self):
        cli = [sys.executable, "-m", "fsdp_mlir.cli", str(self.onnx), "--batch-size", "8",
               "--optimizer", "sgd"]
        ok = subprocess.run(cli + ["-o", str(self.work / "cli.plan")],
                            capture_output=True, text=True)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        bad = subprocess.run(cli + ["--no-wrap-frozen", "-o", str(self.work / "cli2.plan")],
                             capture_output=True, text=True)
        self.assertEqual(bad.returncode, 1)
        self.assertIn("mixes frozen and trainable parameters", bad.stderr)
        self.assertIn("intermediate files kept in", bad.stderr)
        for kept in self.leftovers():
            shutil.rmtree(self.work / kept)
        ignored = subprocess.run(cli + ["--no-wrap-frozen", "--ignored-modules", "backbone",
                                        "-o", str(self.work / "cli3.plan")],
                                 capture_output=True, text=True)
        self.assertEqual(ignored.returncode, 0, ignored.stderr)
        self.assertEqual(self.leftovers(), [])

    def test_ignored_modules_pass_through(self):
        plan = fsdp_mlir.compile(self.onnx, batch_size=8, world_size=2,
                                 ignored_modules=["backbone"], out=self.work / "ignored.plan")
        described = json.loads(fsdp_mlir.run_tool("fsdp-run", [plan, "--describe", "--json"]))
        members = [m["fqn"] if isinstance(m, dict) else m
                   for u in described["units"] for m in u.get("members", u.get("params", []))]
        self.assertEqual([u["module"] for u in described["units"]], [""])
        self.assertFalse(any(str(m).startswith("backbone.") for m in members), members)
        with self.assertRaisesRegex(ValueError, "ignored_modules must be a list of FQNs"):
            fsdp_mlir.compile(self.onnx, batch_size=8, ignored_modules="backbone")


class BatchNormCounterTest(unittest.TestCase):
    """num_batches_tracked is counted by the training plan and returned by
    state_dict(), so load_state_dict does not reset it."""

    def test_counter_round_trips(self):
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            torch.manual_seed(0)
            model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.BatchNorm1d(8),
                                        torch.nn.ReLU(), torch.nn.Linear(8, 3))
            model[1].num_batches_tracked.fill_(5)  # a model trained before
            x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
            onnx_path = fsdp_mlir.export(model, (x[:2], y[:2]), work / "bn.onnx",
                                         loss_fn=frozen_loss, input_names=["x", "y"])
            train = fsdp_mlir.compile(onnx_path, batch_size=8,
                                      optimizer={"optimizer": "sgd"}, out=work / "t.plan")
            batch = {"x": x.numpy(), "y": y.numpy()}
            with fsdp_mlir.Session(train, threads=1) as session:
                for _ in range(3):
                    session.step(batch, lr=0.1)
                state = session.state_dict()
            ref = copy.deepcopy(model)
            opt = torch.optim.SGD(ref.parameters(), lr=0.1)
            for _ in range(3):
                opt.zero_grad()
                frozen_loss(ref(x), y).backward()
                opt.step()
            self.assertEqual(state["1.num_batches_tracked"].dtype, torch.int64)
            self.assertEqual(int(state["1.num_batches_tracked"]), 8)
            loaded = copy.deepcopy(model)
            loaded.load_state_dict(state, strict=True)
            for name, tensor in ref.state_dict().items():
                np.testing.assert_allclose(loaded.state_dict()[name].numpy(), tensor.numpy(),
                                           rtol=1e-4, atol=1e-5, err_msg=name)
            # A forward (inference) plan reads the running statistics and
            # leaves the counter as exported.
            infer = fsdp_mlir.compile(onnx_path, batch_size=8, out=work / "i.plan")
            with fsdp_mlir.Session(infer, threads=1) as session:
                self.assertEqual(int(session.state_dict()["1.num_batches_tracked"]), 5)


    def test_a_norm_called_twice_updates_its_statistics_twice(self):
        """A BatchNorm module called twice in one forward (a shared norm,
        a siamese branch) updates its running statistics and its counter
        twice, in order, as torch's does: the second call starts from the
        first's new values. Its two calls, fused (the default) and
        decomposed, give torch's loss, parameters and buffers after 3 SGD
        steps."""
        for fuse in (True, False):
            with self.subTest(fuse_batch_norm=fuse), tempfile.TemporaryDirectory() as tmp:
                work = Path(tmp)
                torch.manual_seed(0)
                model = TwiceNormed()
                x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
                onnx_path = fsdp_mlir.export(model, (x[:2], y[:2]), work / "bn.onnx",
                                             loss_fn=frozen_loss, input_names=["x", "y"])
                train = work / "t.plan"
                if fuse:
                    fsdp_mlir.compile(onnx_path, batch_size=8,
                                      optimizer={"optimizer": "sgd"}, out=train)
                else:  # the pipeline's option compile() does not take
                    run_tool("fsdp-opt", [
                        onnx_path, "--batch-size=8", "--fsdp-train-pipeline=world-size=1 "
                        "auto-wrap={policy=none} autodiff={fuse-batch-norm=false} "
                        "optimizer={optimizer=sgd}", "-o", work / "t.mlir"])
                    run_tool("fsdp-translate", ["--mlir-to-plan", work / "t.mlir", "-o", train])
                with fsdp_mlir.Session(train, threads=1) as session:
                    losses = [float(np.asarray(session.step({"x": x.numpy(), "y": y.numpy()},
                                                            lr=0.1))) for _ in range(3)]
                    state = session.state_dict()
                ref, want = torch_sgd_steps(model, x, y, 3)
                np.testing.assert_allclose(losses, want, rtol=1e-5)
                self.assertEqual(int(state["norm.num_batches_tracked"]), 6)
                for name, tensor in ref.state_dict().items():
                    np.testing.assert_allclose(state[name].numpy(), tensor.numpy(),
                                               rtol=1e-4, atol=1e-5, err_msg=name)


def torch_sgd_steps(model, x, y, steps, lr=0.1):
    """A copy of `model` after `steps` SGD steps of frozen_loss on (x, y),
    and the losses: (copy, losses)."""
    ref = copy.deepcopy(model)
    opt = torch.optim.SGD(ref.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = frozen_loss(ref(x), y)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return ref, losses


class TwiceNormed(torch.nn.Module):
    """One BatchNorm1d called on two branches of the same batch."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(6, 8), torch.nn.Linear(6, 8)
        self.norm = torch.nn.BatchNorm1d(8)
        self.head = torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.head(torch.relu(self.norm(self.a(x))) + self.norm(self.b(x) * 2 + 1))


class Rotary(torch.nn.Module):
    """A non-persistent float buffer read by the forward, as a rotary
    embedding's inv_freq: in no state dict, so not in the session's."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(6, 6)
        self.register_buffer("inv_freq", torch.linspace(0.5, 2.0, 6), persistent=False)
        self.head = torch.nn.Linear(6, 3)

    def forward(self, x):
        return self.head(torch.tanh(self.proj(x) * self.inv_freq))


class NonPersistentBufferTest(unittest.TestCase):
    def test_state_dict_is_torchs_and_training_equals_torch(self):
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            torch.manual_seed(0)
            model = Rotary()
            x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
            onnx_path = fsdp_mlir.export(model, (x[:2], y[:2]), work / "rot.onnx",
                                         loss_fn=frozen_loss, input_names=["x", "y"])
            plan = fsdp_mlir.compile(onnx_path, batch_size=8,
                                     optimizer={"optimizer": "sgd"}, out=work / "t.plan")
            with fsdp_mlir.Session(plan, threads=1) as session:
                losses = [session.step({"x": x.numpy(), "y": y.numpy()}, lr=0.1)
                          for _ in range(2)]
                state = session.state_dict()
            self.assertEqual(sorted(state), sorted(model.state_dict()))
            ref, want = torch_sgd_steps(model, x, y, 2)
            np.testing.assert_allclose(losses, want, rtol=1e-5, atol=1e-6)
            loaded = Rotary()
            loaded.load_state_dict(state, strict=True)
            for name, tensor in ref.state_dict().items():
                np.testing.assert_allclose(loaded.state_dict()[name].numpy(), tensor.numpy(),
                                           rtol=1e-5, atol=1e-6, err_msg=name)


if __name__ == "__main__":
    unittest.main()


class MaskToken(torch.nn.Module):
    """A parameter the forward never reads (a ViT's mask_token when no
    positions are masked): torch's exporter drops it."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)
        self.mask_token = torch.nn.Parameter(torch.randn(1, 4))

    def forward(self, x):
        return self.fc(x)


class UnusedParameterTest(unittest.TestCase):
    """An unused parameter is in the plan and its state dict, so a strict
    load works and checkpoints keep it. It trains as in torch FSDP's
    FlatParameter: its gradient is zero, so AdamW moves it by weight decay
    alone (torch 1.13 FSDP on this model, one step: 0.6035 -> 0.5975, what
    the plan gives); plain torch, which skips a parameter without .grad,
    would leave it."""

    def test_state_dict_carries_it_and_it_trains_as_in_fsdp(self):
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            torch.manual_seed(0)
            model = MaskToken()
            x, y = torch.randn(2, 4), torch.randint(0, 3, (2,))
            onnx_path = fsdp_mlir.export(model, (x, y), work / "mask.onnx",
                                         loss_fn=frozen_loss, input_names=["x", "y"])
            lr, wd = 0.1, 0.1
            plan = fsdp_mlir.compile(onnx_path, batch_size=2, out=work / "t.plan",
                                     optimizer={"optimizer": "adamw", "weight_decay": wd})
            with fsdp_mlir.Session(plan, threads=1) as session:
                losses = [session.step({"x": x.numpy(), "y": y.numpy()}, lr=lr)
                          for _ in range(2)]
                state = session.state_dict()
            self.assertEqual(sorted(state), sorted(model.state_dict()))
            ref = copy.deepcopy(model)
            opt = torch.optim.AdamW(ref.fc.parameters(), lr=lr, weight_decay=wd)
            want = []
            for _ in range(2):
                opt.zero_grad()
                loss = frozen_loss(ref(x), y)
                loss.backward()
                opt.step()
                want.append(float(loss))
            np.testing.assert_allclose(losses, want, rtol=1e-5, atol=1e-6)
            with torch.no_grad():
                ref.mask_token.mul_((1 - lr * wd) ** 2)  # decay only: a zero gradient
            loaded = MaskToken()
            loaded.load_state_dict(state, strict=True)
            for name, tensor in ref.state_dict().items():
                # Adam's 1/sqrt(v) amplifies a gradient's float32 noise.
                np.testing.assert_allclose(loaded.state_dict()[name].numpy(), tensor.numpy(),
                                           rtol=1e-4, atol=1e-5, err_msg=name)


class AutoPadTrainingTest(unittest.TestCase):
    """A hand-written ONNX model (no export: torch writes explicit pads) with
    auto_pad windows, trained one SGD step at lr 1: the parameters' change
    is their gradient, equal to torch's autograd of the same computation
    with the pads spelled out (SAME_UPPER pads at the end, SAME_LOWER at
    the start; a max pads with -inf, an average leaves pads out of its
    count)."""

    def test_conv_and_pool_gradients_equal_torch(self):
        import onnx
        from onnx import TensorProto, helper, numpy_helper

        import torch.nn.functional as F

        rng = np.random.default_rng(0)
        w = rng.standard_normal((3, 3, 1, 1)).astype(np.float32)
        w2 = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
        c = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
        x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
        node = helper.make_node
        nodes = [
            node("Conv", ["x", "w"], ["h"]),
            node("MaxPool", ["h"], ["p"], auto_pad="SAME_UPPER", kernel_shape=[3, 3],
                 strides=[2, 2]),
            node("AveragePool", ["h"], ["q"], auto_pad="SAME_LOWER", kernel_shape=[3, 3],
                 strides=[2, 2]),
            node("Conv", ["h", "w2"], ["y"], auto_pad="SAME_UPPER", strides=[2, 2]),
            node("Mul", ["p", "c"], ["pc"]), node("Mul", ["q", "c"], ["qc"]),
            node("ReduceSum", ["pc"], ["lp"], keepdims=0),
            node("ReduceSum", ["qc"], ["lq"], keepdims=0),
            node("ReduceSum", ["y"], ["ly"], keepdims=0),
            node("Sum", ["lp", "lq", "ly"], ["loss"])]
        graph = helper.make_graph(
            nodes, "auto_pad",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 8, 8])],
            [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
            initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(w2, "w2"),
                         numpy_helper.from_array(c, "c")])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                  ir_version=8)
        onnx.checker.check_model(model)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "auto_pad.onnx"
            onnx.save(model, str(path))
            plan = fsdp_mlir.compile(path, batch_size=2, optimizer={"optimizer": "sgd"})
            with fsdp_mlir.Session(plan) as session:
                before = {k: v.numpy().copy() for k, v in session.state_dict().items()}
                loss = float(np.asarray(session.step({"x": x}, lr=1.0)))
                after = {k: v.numpy() for k, v in session.state_dict().items()}

        tw, tw2 = torch.tensor(w, requires_grad=True), torch.tensor(w2, requires_grad=True)
        h = F.conv2d(torch.tensor(x), tw)
        p = F.max_pool2d(F.pad(h, (0, 1, 0, 1), value=float("-inf")), 3, 2)
        q = (F.avg_pool2d(F.pad(h, (1, 0, 1, 0)), 3, 2) /
             F.avg_pool2d(F.pad(torch.ones_like(h), (1, 0, 1, 0)), 3, 2))
        y = F.conv2d(F.pad(h, (0, 1, 0, 1)), tw2, stride=2)
        ref = (p * torch.tensor(c)).sum() + (q * torch.tensor(c)).sum() + y.sum()
        ref.backward()
        self.assertAlmostEqual(loss, float(ref), delta=1e-5 * abs(float(ref)))
        for name, param in (("w", tw), ("w2", tw2)):
            grad = param.grad.numpy()
            # The step's change carries float32 rounding of the parameter.
            np.testing.assert_allclose(before[name] - after[name], grad,
                                       atol=1e-5 * np.abs(grad).max() + 1e-5, rtol=1e-4,
                                       err_msg=name)


class RandomDepth(torch.nn.Module):
    """A linear layer whose output is dropped per sample as Hugging Face's
    drop_path computes it, h / keep * floor(keep + rand), with torch.rand in
    the forward (exported as RandomUniformLike; a module named *DropPath
    would be exported as a Dropout instead). `noise`, when set, replaces
    torch.rand (the reference's draws)."""

    def __init__(self, keep=0.6):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)
        self.keep = keep
        self.noise = None

    def forward(self, x):
        h = self.fc(x)
        r = self.noise if self.noise is not None else \
            torch.rand((h.shape[0], 1), dtype=h.dtype)
        return h.div(self.keep) * torch.floor(r + self.keep) + h


def mse_loss(out, target):
    return ((out - target) ** 2).mean()


class RandomUniformLikeTrainingTest(unittest.TestCase):
    """RandomUniformLike on a parameter's path to the loss trains: each step's
    numbers are the runtime's Philox words (op 0, the step, element = sample;
    u = top 24 bits * 2^-24, test/e2e/philox_ref.py), and with them the
    losses and the stepped parameters equal torch's SGD steps, so the
    backward reads the forward's numbers; the same seed gives the same
    losses, another seed other ones."""

    def test_steps_equal_torchs_with_the_runtimes_numbers(self):
        sys.path.insert(0, str(REPO / "test" / "e2e"))
        import onnx
        import philox_ref

        def uniform(seed, step, n):
            key = (seed & 0xFFFFFFFF, seed >> 32)
            words = [philox_ref.philox((e // 4, 0, 0, step), key)[e % 4] for e in range(n)]
            return torch.tensor([[(w >> 8) * 2.0 ** -24] for w in words], dtype=torch.float32)

        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            torch.manual_seed(0)
            model = RandomDepth()
            x, y = torch.randn(8, 4), torch.randn(8, 3)
            onnx_path = fsdp_mlir.export(model, (x, y), work / "rd.onnx",
                                         loss_fn=mse_loss, input_names=["x", "y"])
            ops = {n.op_type for n in onnx.load(str(onnx_path)).graph.node}
            self.assertTrue(ops & {"RandomUniformLike", "RandomUniform"}, ops)
            plan = fsdp_mlir.compile(onnx_path, batch_size=8,
                                     optimizer={"optimizer": "sgd"}, out=work / "t.plan")
            runs = {}
            for seed in (3, 3, 4):
                with fsdp_mlir.Session(plan, threads=1, seed=seed) as session:
                    losses = [session.step({"x": x.numpy(), "y": y.numpy()}, lr=0.1)
                              for _ in range(3)]
                    state = session.state_dict()
                runs.setdefault(seed, []).append((losses, state))
            self.assertEqual(runs[3][0][0], runs[3][1][0])
            self.assertNotEqual(runs[3][0][0], runs[4][0][0])

            ref = copy.deepcopy(model)
            opt = torch.optim.SGD(ref.parameters(), lr=0.1)
            want, dropped = [], 0
            for step in range(3):
                ref.noise = uniform(3, step, 8)
                dropped += int((torch.floor(ref.noise + ref.keep) == 0).sum())
                opt.zero_grad()
                loss = mse_loss(ref(x), y)
                loss.backward()
                opt.step()
                want.append(float(loss))
            self.assertGreater(dropped, 0)  # the check sees a drop
            losses, state = runs[3][0]
            np.testing.assert_allclose(losses, want, rtol=1e-5, atol=1e-6)
            for name, tensor in ref.state_dict().items():
                np.testing.assert_allclose(state[name].numpy(), tensor.numpy(),
                                           rtol=1e-5, atol=1e-6, err_msg=name)


class PackedSegments(torch.nn.Module):
    """Hugging Face's packed-sequence mask (masking_utils): sequence ids from
    position ids by torch.diff with a prepend and a boolean cumsum; tokens
    attend within their sequence only. Also a second-order boolean diff
    (Xor) and an integer cumsum."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x, pos):
        step = torch.diff(pos, prepend=pos[:, :1] - 1, dim=-1)
        seq = (step != 1).cumsum(-1)
        same = (seq[:, :, None] == seq[:, None, :]).float()
        edges = torch.diff(step != 1, n=2, dim=-1).float().sum(-1)[:, None, None]
        ranks = pos.to(torch.int32).cumsum(-1).float()
        return same @ self.fc(x) + edges + ranks[:, :, None] * 0.01


def torchscript_forward(model, inputs, work):
    """`model` on the named `inputs` (batch 2) exported by TorchScript,
    compiled and run by one session, and torch's own output: (plan's,
    torch's) as arrays."""
    onnx_path = fsdp_mlir.export(model, tuple(inputs.values()), work / "model.onnx",
                                 input_names=list(inputs), exporter="torchscript")
    plan = fsdp_mlir.compile(onnx_path, batch_size=2, out=work / "model.plan")
    with fsdp_mlir.Session(plan, threads=1) as session:
        out = session.forward({k: v.numpy() for k, v in inputs.items()})
    with torch.no_grad():
        want = model(*inputs.values())
    return next(iter(out.values())), want.numpy()


class DiffAndCumsumExportTest(unittest.TestCase):
    """torch.diff and a boolean or integer cumsum export through TorchScript
    (the symbolics fsdp_mlir.export registers for the export) and run as
    torch computes them, on position ids that pack sequences of lengths 3,
    2, 1 and 4, 2."""

    def test_packed_sequence_mask_equals_torch(self):
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            torch.manual_seed(0)
            model = PackedSegments().eval()
            x = torch.randn(2, 6, 4)
            pos = torch.tensor([[0, 1, 2, 0, 1, 0], [0, 1, 2, 3, 0, 1]])
            got, want = torchscript_forward(model, {"x": x, "pos": pos}, work)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


class StridedChunks(torch.nn.Module):
    """as_strided over a transposed view, as Longformer's sliding-window
    chunks do: torch reads the storage, not the row-major order."""

    def __init__(self, gapped=False):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.gapped = gapped

    def forward(self, x):
        y = self.fc(x)  # [2, 8, 4], storage order
        h = y[:, ::2] if self.gapped else y.transpose(1, 2)
        return h.as_strided((2, 3, 4, 4), (32, 8, 1, 4)) * 2


class AsStridedExportTest(unittest.TestCase):
    """aten::as_strided of a non-contiguous tensor exports (TorchScript)
    reading the elements torch reads; one whose storage has gaps is
    refused, naming the sizes and strides."""

    def test_transposed_view_equals_torch_and_gaps_are_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            torch.manual_seed(0)
            model = StridedChunks().eval()
            x = torch.randn(2, 8, 4)
            got, want = torchscript_forward(model, {"x": x}, work)
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
            with self.assertRaisesRegex(fsdp_mlir.ExportError,
                                        r"aten::as_strided of a tensor of sizes .* gaps"):
                fsdp_mlir.export(StridedChunks(gapped=True), (x,), work / "gapped.onnx",
                                 exporter="torchscript")


def check_forward_and_step(test, model, x, loss_fn, work, exporter="torchscript"):
    """`model`'s plan on x (batch 2, exported by `exporter`) gives torch's
    output, and one SGD step at lr 1 of `loss_fn(model(x), target)` (a
    random target of the output's shape) gives torch's loss and changes
    every parameter by torch's gradient. Returns the forward's ONNX path."""
    with torch.no_grad():
        want = model(x)
    target = torch.randn(want.shape)
    onnx_path = fsdp_mlir.export(model, x, work / "forward.onnx", input_names=["x"],
                                 exporter=exporter)
    plan = fsdp_mlir.compile(onnx_path, batch_size=2, out=work / "forward.plan")
    with fsdp_mlir.Session(plan, threads=1) as session:
        got = session.forward({"x": x.numpy()})["output_0"]
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-6, atol=1e-6)

    step_path = fsdp_mlir.export(model, (x, target), work / "step.onnx", loss_fn=loss_fn,
                                 input_names=["x", "target"], exporter=exporter)
    plan = fsdp_mlir.compile(step_path, batch_size=2, optimizer={"optimizer": "sgd"},
                             out=work / "step.plan")
    with fsdp_mlir.Session(plan, threads=1) as session:
        before = {k: v.numpy().copy() for k, v in session.state_dict().items()}
        loss = float(np.asarray(session.step({"x": x.numpy(), "target": target.numpy()},
                                             lr=1.0)))
        after = {k: v.numpy() for k, v in session.state_dict().items()}
    model.zero_grad()
    ref = loss_fn(model(x), target)
    ref.backward()
    test.assertAlmostEqual(loss, float(ref), delta=1e-5 * abs(float(ref)))
    for name, param in model.named_parameters():
        grad = param.grad.numpy()
        # The step's change carries float32 rounding of the parameter.
        np.testing.assert_allclose(before[name] - after[name], grad,
                                   atol=1e-5 * np.abs(grad).max() + 1e-6, rtol=1e-4,
                                   err_msg=name)
    return onnx_path


class Folded(torch.nn.Module):
    """F.fold of the columns a linear layer makes from x [N, L, 4], into
    `output_size` or, when it is None, into a size computed from x's (as
    MobileViT v2 folds to its feature map's shape): (L // 4 + 1, L // 3 + 1),
    for L = 12 the 4 x 5 image that a 2x2 kernel at stride 1 covers."""

    def __init__(self, channels, output_size, kernel_size, **window):
        super().__init__()
        k = kernel_size if isinstance(kernel_size, tuple) else (kernel_size, kernel_size)
        self.fc = torch.nn.Linear(4, channels * k[0] * k[1])
        self.output_size, self.kernel_size, self.window = output_size, kernel_size, window

    def forward(self, x):
        size = self.output_size or (x.shape[1] // 4 + 1, x.shape[1] // 3 + 1)
        cols = self.fc(x).transpose(1, 2)[:, :, None]  # [N, C*K, 1, L]
        # Sizes from shapes, as MobileViT v2's: the exported value's are unknown.
        n, c, k, blocks = cols.shape
        cols = cols.reshape(n, c * k, blocks)
        return torch.nn.functional.fold(cols, size, self.kernel_size, **self.window)


def fold_loss(out, target):
    return ((out * target).sum(dim=(1, 2, 3)) ** 2).mean()


class FoldExportTest(unittest.TestCase):
    """torch.nn.functional.fold (aten::col2im, ONNX Col2Im only from opset
    18) exports as a Reshape to the block grid and a grouped ConvTranspose
    by a one-hot weight: through TorchScript (the symbolic export()
    registers) and, under torch 2.x, through dynamo (its Col2Im rewritten
    before the version converter). The plan's forward equals torch's and
    one SGD step at lr 1 changes the parameters by torch's gradients, for
    non-overlapping 2x2 blocks, overlapping 3x3 ones with padding, a 2x3
    kernel with dilation, padding and stride that leave a row past the last
    block, and an output size read from a tensor's shape."""

    CASES = [
        (2, (4, 4), 2, dict(stride=2)),
        (1, (5, 5), 3, dict(padding=1)),
        (3, (5, 6), (2, 3), dict(dilation=(1, 2), padding=(1, 1), stride=(2, 1))),
        (2, None, 2, dict(stride=1)),
    ]

    def test_fold_forward_and_gradients_equal_torch(self):
        from fsdp_mlir.export import _has_dynamo, _has_user_symbolic

        exporters = ["torchscript"] + (["dynamo"] if _has_dynamo() else [])
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            for exporter in exporters:
                for channels, size, kernel, window in self.CASES:
                    with self.subTest(exporter=exporter, size=size, kernel=kernel, **window):
                        self.check(work, exporter, channels, size, kernel, window)
        self.assertFalse(_has_user_symbolic("aten::col2im", 17))  # removed after each export

    def check(self, work, exporter, channels, size, kernel, window):
        import onnx

        torch.manual_seed(0)
        model = Folded(channels, size, kernel, **window)
        blocks = torch.nn.functional.unfold(
            torch.zeros(1, channels, *(size or (4, 5))), kernel, **window).shape[-1]
        x = torch.randn(2, blocks, 4)
        onnx_path = check_forward_and_step(self, model, x, fold_loss, work, exporter)
        ops = [n.op_type for n in onnx.load(str(onnx_path)).graph.node]
        self.assertIn("ConvTranspose", ops)
        self.assertNotIn("Col2Im", ops)


class TorchvisionShapes(torch.nn.Module):
    """What torchvision's models do that torch 1.13's ONNX exporter could not
    write: tensor_split at constant indices (MViT's class token) and into
    sections, adaptive average pooling to sizes that do not divide the
    input's (VGG's and AlexNet's 7x7 and 6x6 of a small image's map), in
    1, 2 and 3 dimensions, and Tensor.zero_ on a slice of a parameter's
    clone (Swin V2's qkv bias)."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 6)

    def forward(self, x):  # [2, 5, 4]
        y = self.fc(x)  # [2, 5, 6]
        first, middle, rest = torch.tensor_split(y, (1, 3), dim=1)
        left, right = torch.tensor_split(y, 2, dim=-1)
        bias = self.fc.bias.clone()
        bias[2:4].zero_()
        pooled = (torch.nn.functional.adaptive_avg_pool1d(y, 4).sum(-1, keepdim=True)
                  + torch.nn.functional.adaptive_avg_pool2d(y[:, None], (3, 7))[:, 0, :, :6]
                  .mean(1, keepdim=True)
                  + torch.nn.functional.adaptive_avg_pool3d(y[:, None, None], (1, 2, 4))
                  .sum((1, 2, 3, 4))[:, None, None])
        return (first * middle.mean(1, keepdim=True) + rest.sum(1, keepdim=True)
                + torch.cat([right, left * left.sum(-1, keepdim=True)], -1) + bias
                + pooled)


class TorchvisionShapesExportTest(unittest.TestCase):
    """The symbolics fsdp_mlir.export registers for TorchvisionShapes' ops:
    the plan's forward and one SGD step equal torch's, the split goes
    through a sequence the importer resolves, and the pools through MatMuls
    by averaging matrices."""

    def test_forward_and_gradients_equal_torch(self):
        import onnx

        with tempfile.TemporaryDirectory() as tmp:
            torch.manual_seed(0)
            model = TorchvisionShapes()
            x = torch.randn(2, 5, 4)
            onnx_path = check_forward_and_step(self, model, x, fold_loss_flat, Path(tmp))
            ops = [n.op_type for n in onnx.load(str(onnx_path)).graph.node]
            self.assertIn("SequenceConstruct", ops)
            self.assertNotIn("Loop", ops)
            self.assertGreaterEqual(ops.count("MatMul"), 4)

    def test_averaging_matrix_is_torchs_windows(self):
        from fsdp_mlir.export import _averaging_matrix

        for size, out in [(1, 7), (5, 7), (10, 3), (7, 7), (13, 4)]:
            x = torch.randn(3, size, dtype=torch.float64)
            want = torch.nn.functional.adaptive_avg_pool1d(x[:, None], out)[:, 0]
            got = x @ torch.from_numpy(_averaging_matrix(size, out)).t()
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12,
                                       err_msg=f"{size} -> {out}")


def fold_loss_flat(out, target):
    return ((out * target).sum() ** 2) / out.numel()
