#!/usr/bin/env python3
"""Hugging Face models, random weights from small configs, against torch 2.x.

    .venv-torch2/bin/python check_hf_models.py BUILD_DIR [--keep DIR] [--only NAME ...]
                                               [--no-distributed]

Run by the interpreter of `.venv-torch2` (transformers, safetensors). For
each model (GPT-2; LLaMA with grouped-query attention, 2 key/value heads for
4 query heads; Mistral; Qwen2; Gemma, whose tied embedding pads with row
0; Falcon; BERT; T5; ViT; Mixtral, top-2 of 4
experts; Whisper; wav2vec2 with a CTC head; BEiT; DINOv2, whose mask_token
the forward never reads; FNet, whose torch.fft.fftn exports as ONNX DFT),
built from a tiny config
with every dropout off and use_cache=False, nothing downloaded:

  1. fsdp_mlir.export(model, ..., exporter="auto") without a loss, compile
     a forward plan, Session.forward: the logits equal the HF model's;
  2. export with a cross-entropy loss, compile an AdamW step (one rank,
     no units), Session.step: the loss, then every parameter, equal torch's
     AdamW step on the same batch; Session.state_dict() loads into a fresh
     HF model with strict=True; Session.save(full=True) loads with
     safetensors.torch.load_file and, with the config saved beside it, with
     from_pretrained(dir), both giving the stepped parameters;
  3. unless --no-distributed: compile the same step at world size 2,
     FULL_SHARD, one unit per HF layer class, run it under
     `python -m fsdp_mlir.launch -n 2` on the global batch (each rank takes
     its half): loss and parameters equal torch's one process step on the
     whole batch.

Then LLaMA's forward at 256 tokens (a mask of 2 x 1 x 256 x 256, folded at
import), and BEiT's AdamW step with stochastic depth (drop_path 0.5) against
torch given the masks test/e2e/philox_ref.py draws. A model the compiler cannot take yet is listed in REFUSED with the text its
error must contain: the check then requires that refusal (so a fix, or a
new failure, is noticed) and the summary names it. Tolerance: |ours -
torch| <= 1e-5 + 1e-4 |torch| (logits, loss) and, for parameters after the
step, + lr x min(1, 1e-5 max|g| / |g|), max|g| the step's largest gradient
element, as check_distributed.py explains (AdamW divides by sqrt(v): a
gradient at float32 noise, as a key bias's, moves by up to lr).
Exit 1 on any failure; 77 (skipped, naming why) without torch 2.x or
transformers.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SKIPPED = 77
ATOL, RTOL = 1e-5, 1e-4
BATCH, SEQ, VOCAB, LR = 2, 8, 96, 1e-2
DROP_PATH = 0.0  # BEiT's drop_path_rate (check_drop_path sets it)
DROP_PATH_SEED = 3  # each of the two masks keeps one sample and drops the other

# What the compiler refuses today, by model: a substring of the error.
REFUSED: dict[str, str] = {}


def lm_config(kind: str):
    """A tiny config of `kind` with dropout off (decoder LMs)."""
    import transformers as tf

    common = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  max_position_embeddings=256, use_cache=False)
    if kind == "llama":
        return tf.LlamaConfig(**common), tf.LlamaForCausalLM, "LlamaDecoderLayer"
    if kind == "mistral":
        return (tf.MistralConfig(**common, sliding_window=None), tf.MistralForCausalLM,
                "MistralDecoderLayer")
    if kind == "qwen2":
        return tf.Qwen2Config(**common), tf.Qwen2ForCausalLM, "Qwen2DecoderLayer"
    if kind == "gemma":
        # Its embedding pads with row 0 and is tied to the head, scaled by
        # sqrt(hidden): the padding row's mask must find the lookup under
        # /model/model/embed_tokens (the base model is `model` too).
        return (tf.GemmaConfig(**common, head_dim=8), tf.GemmaForCausalLM,
                "GemmaDecoderLayer")
    if kind == "mixtral":
        return (tf.MixtralConfig(**common, num_local_experts=4, num_experts_per_tok=2),
                tf.MixtralForCausalLM, "MixtralDecoderLayer")
    raise ValueError(kind)


def make(name: str):
    """(model, config, layer class name, example inputs without the target,
    target) for `name`, with seeded random weights."""
    import torch
    import transformers as tf

    torch.manual_seed(0)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    target = torch.randint(0, VOCAB, (BATCH, SEQ))
    if name == "gpt2":
        config = tf.GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2,
                               n_head=4, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                               use_cache=False)
        cls, block = tf.GPT2LMHeadModel, "GPT2Block"
    elif name in ("llama", "mistral", "qwen2", "gemma"):
        config, cls, block = lm_config(name)
    elif name == "falcon":
        # The fused query/key/value split indexes with x[-2], which torch
        # 2.x exports as a GatherND of constant indices.
        config = tf.FalconConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                                 num_attention_heads=4, hidden_dropout=0.0,
                                 attention_dropout=0.0, use_cache=False)
        cls, block = tf.FalconForCausalLM, "FalconDecoderLayer"
    elif name == "bert":
        config = tf.BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                               num_attention_heads=4, intermediate_size=64,
                               hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                               max_position_embeddings=64)
        cls, block = tf.BertForMaskedLM, "BertLayer"
    elif name == "fnet":
        # torch.fft.fftn over the sequence and hidden dims, which dynamo
        # exports as two ONNX DFTs: MatMuls by constant cosine and sine
        # matrices at import.
        config = tf.FNetConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                               intermediate_size=64, hidden_dropout_prob=0.0,
                               max_position_embeddings=64,
                               use_tpu_fourier_optimizations=False)
        cls, block = tf.FNetForMaskedLM, "FNetLayer"
    elif name == "t5":
        config = tf.T5Config(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2,
                             num_heads=4, dropout_rate=0.0, use_cache=False,
                             decoder_start_token_id=0)
        cls, block = tf.T5ForConditionalGeneration, "T5Block"
    elif name == "mixtral":
        # Its default experts (grouped_mm) loop over the routed experts,
        # which torch.export cannot trace; batched_mm gathers each token's
        # expert weights (GatherND by the router's indices) instead.
        config, cls, block = lm_config(name)
        config._experts_implementation = "batched_mm"
    elif name == "whisper":
        # Log-mel features [B, 8 bins, 32 frames] through two Conv1d; its
        # decoder positions are tiled over the batch (Tile).
        config = tf.WhisperConfig(vocab_size=VOCAB, num_mel_bins=8, encoder_layers=1,
                                  decoder_layers=1, encoder_attention_heads=4,
                                  decoder_attention_heads=4, encoder_ffn_dim=64,
                                  decoder_ffn_dim=64, d_model=32, max_source_positions=16,
                                  max_target_positions=64, use_cache=False, dropout=0.0,
                                  attention_dropout=0.0, activation_dropout=0.0,
                                  decoder_start_token_id=0, pad_token_id=0)
        cls, block = tf.WhisperForConditionalGeneration, "WhisperDecoderLayer"
        ids = torch.randn(BATCH, 8, 32)
    elif name == "wav2vec2":
        # A raw waveform through the convolutional feature encoder to CTC
        # logits [B, 39, V]; the positional convolution is weight-normed
        # (ReduceL2 on a parameter). SpecAugment off: its masks come from
        # numpy's RNG at trace time.
        config = tf.Wav2Vec2Config(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                                   num_attention_heads=4, intermediate_size=64,
                                   conv_dim=(8, 8), conv_stride=(5, 2), conv_kernel=(10, 3),
                                   num_conv_pos_embeddings=4, num_conv_pos_embedding_groups=2,
                                   do_stable_layer_norm=True, feat_extract_norm="layer",
                                   mask_time_prob=0.0, layerdrop=0.0, hidden_dropout=0.0,
                                   attention_dropout=0.0, activation_dropout=0.0,
                                   feat_proj_dropout=0.0, final_dropout=0.0)
        cls, block = tf.Wav2Vec2ForCTC, "Wav2Vec2EncoderLayerStableLayerNorm"
        ids = torch.randn(BATCH, 400)
        target = torch.randint(0, VOCAB, (BATCH, 39))
    elif name == "beit":
        # Its relative position index is built in forward (ScatterND,
        # ReduceSum over constants). drop_path off but in
        # check_drop_path (its masks are random).
        config = tf.BeitConfig(image_size=16, patch_size=8, num_channels=3, hidden_size=32,
                               num_hidden_layers=2, num_attention_heads=4,
                               intermediate_size=64, hidden_dropout_prob=0.0,
                               attention_probs_dropout_prob=0.0, drop_path_rate=DROP_PATH,
                               num_labels=5, use_relative_position_bias=True)
        cls, block = tf.BeitForImageClassification, "BeitLayer"
        ids = torch.randn(BATCH, 3, 16, 16)
        target = torch.randint(0, 5, (BATCH,))
    elif name == "dinov2":
        # Its mask_token is read only with bool_masked_pos: export adds it
        # back (state_dict strict), its gradient zero. The position table
        # is resized bicubically in forward.
        config = tf.Dinov2Config(image_size=16, patch_size=8, num_channels=3, hidden_size=32,
                                 num_hidden_layers=2, num_attention_heads=4, mlp_ratio=2,
                                 hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                 drop_path_rate=0.0, num_labels=5)
        cls, block = tf.Dinov2ForImageClassification, "Dinov2Layer"
        ids = torch.randn(BATCH, 3, 16, 16)
        target = torch.randint(0, 5, (BATCH,))
    elif name == "vit":
        config = tf.ViTConfig(image_size=16, patch_size=8, num_channels=3, hidden_size=32,
                              num_hidden_layers=2, num_attention_heads=4,
                              intermediate_size=64, hidden_dropout_prob=0.0,
                              attention_probs_dropout_prob=0.0, num_labels=5)
        cls, block = tf.ViTForImageClassification, "ViTLayer"
        ids = torch.randn(BATCH, 3, 16, 16)
        target = torch.randint(0, 5, (BATCH,))
    else:
        raise ValueError(name)
    torch.manual_seed(1)
    model = logits_class(cls, name)(config)
    inputs = (ids, target) if name in ("t5", "whisper") else (ids,)
    return model, config, block, inputs, target


def logits_class(cls, name):
    """`cls` whose forward(*inputs) returns the logits tensor: a subclass,
    so parameter FQNs, layer classes and from_pretrained stay the HF
    model's own."""

    def forward(self, *inputs):
        if name in ("vit", "beit", "dinov2"):
            return cls.forward(self, pixel_values=inputs[0]).logits
        if name == "t5":
            return cls.forward(self, input_ids=inputs[0], decoder_input_ids=inputs[1]).logits
        if name == "whisper":
            return cls.forward(self, input_features=inputs[0],
                               decoder_input_ids=inputs[1]).logits
        if name == "wav2vec2":
            return cls.forward(self, input_values=inputs[0]).logits
        return cls.forward(self, input_ids=inputs[0]).logits

    return type(cls.__name__, (cls,), {"forward": forward})


def loss_fn(logits, target):
    import torch.nn.functional as F

    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))


def close(ours, ref, extra=0.0) -> float:
    """The largest excess of |ours - ref| over the tolerance (<= 0: equal)."""
    import numpy as np

    ours, ref = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    if ours.shape != ref.shape:
        return float("inf")
    return float(np.max(np.abs(ours - ref) - (ATOL + RTOL * np.abs(ref) + extra)))


def torch_step(model, inputs, target):
    """One AdamW step of `model` (a Logits wrapper) in torch: the loss and
    the first-step gradients by FQN."""
    import torch

    model.train()
    opt = torch.optim.AdamW(model.parameters(), LR)
    loss = loss_fn(model(*inputs), target)
    loss.backward()
    # A frozen parameter (Whisper's sinusoidal encoder positions) has none.
    grads = {n: (p.grad if p.grad is not None else torch.zeros_like(p)).detach().clone()
             for n, p in model.named_parameters()}
    opt.step()
    return float(loss), grads


def compare_params(session_state, model, grads, what) -> list[str]:
    """Every parameter of `model` against the session's, by FQN."""
    import numpy as np

    bad = []
    # A gradient's float32 noise is relative to the step's largest ones: a
    # key bias (mathematically zero gradient: softmax ignores it) is noise.
    largest = max(float(g.abs().max()) for g in grads.values())
    for fqn, p in model.named_parameters():
        key = fqn
        if key not in session_state:
            bad.append(f"{what}: no '{key}' in the session's state dict")
            continue
        g = np.abs(grads[fqn].numpy())
        noise = LR * np.minimum(1.0, 1e-5 * largest / np.maximum(g, 1e-30))
        excess = close(session_state[key].numpy(), p.detach().numpy(), noise)
        if excess > 0:
            bad.append(f"{what}: parameter '{key}' differs from torch's by "
                       f"{excess:.3g} over the tolerance")
    return bad


def feed(session, inputs, target=None) -> dict:
    """The plan's inputs by name from torch tensors (export names them
    input_0, input_1, ...; the target last)."""
    arrays = [x.numpy() for x in inputs] + ([target.numpy()] if target is not None else [])
    return {f"input_{i}": a for i, a in enumerate(arrays)}


def check_forward(fsdp_mlir, name, work) -> list[str]:
    import torch

    wrapper, _, _, inputs, _ = make(name)
    onnx_path = fsdp_mlir.export(wrapper, inputs, work / f"{name}.fwd{SEQ}.onnx")
    plan = fsdp_mlir.compile(onnx_path, batch_size=BATCH)
    with fsdp_mlir.Session(plan) as session:
        ours = session.forward(feed(session, inputs))["output_0"]
    with torch.no_grad():
        ref = wrapper.eval()(*inputs).numpy()
    excess = close(ours, ref)
    print(f"{name}: forward: logits {tuple(ref.shape)}, max |ours - torch| = "
          f"{abs(ours - ref).max():.3g}")
    return [] if excess <= 0 else [f"{name}: forward logits differ by {excess:.3g} "
                                   "over the tolerance"]


def check_checkpoint(session, model, config, name, work) -> list[str]:
    """state_dict strict load, the full .safetensors and from_pretrained."""
    import torch
    from safetensors.torch import load_file

    bad = []
    state = session.state_dict()
    fresh = type(model).__mro__[1](config)
    # torch's keys exactly: non-persistent buffers (LLaMA's rotary
    # inv_freq) are constants of the plan, in no state dict.
    extra = set(state) - set(fresh.state_dict())
    if extra:
        bad.append(f"{name}: the state dict has keys the model's does not: "
                   f"{sorted(extra)}")
    try:
        fresh.load_state_dict(state, strict=True)
    except RuntimeError as e:
        bad.append(f"{name}: state_dict() does not load with strict=True: {e}")
    ckpt = work / f"{name}.hf"
    ckpt.mkdir(exist_ok=True)
    session.save(ckpt / "model.safetensors", full=True)
    loaded = load_file(str(ckpt / "model.safetensors"))
    for key, value in loaded.items():
        if key not in state or not torch.equal(value, state[key]):
            bad.append(f"{name}: model.safetensors' '{key}' is not the state dict's")
    config.save_pretrained(ckpt)
    try:
        again = type(model).__mro__[1].from_pretrained(ckpt)
        for key, value in again.state_dict().items():
            if key in state and not torch.equal(value, state[key]):
                bad.append(f"{name}: from_pretrained gives another '{key}'")
    except (OSError, RuntimeError, ValueError) as e:
        bad.append(f"{name}: from_pretrained({ckpt}) failed: {e}")
    return bad


def check_step(fsdp_mlir, name, work) -> list[str]:
    wrapper, config, _, inputs, target = make(name)
    onnx_path = fsdp_mlir.export(wrapper, (*inputs, target), work / f"{name}.onnx",
                                 loss_fn=loss_fn)
    plan = fsdp_mlir.compile(onnx_path, batch_size=BATCH,
                             optimizer={"optimizer": "adamw"})
    with fsdp_mlir.Session(plan) as session:
        loss = session.step(feed(session, inputs, target), lr=LR)
        ref_loss, grads = torch_step(wrapper, inputs, target)
        print(f"{name}: AdamW step: loss {loss:.6f}, torch {ref_loss:.6f}")
        bad = [] if close(loss, ref_loss) <= 0 else [
            f"{name}: step loss {loss} != torch's {ref_loss}"]
        bad += compare_params(session.state_dict(), wrapper, grads, f"{name}: AdamW step")
        bad += check_checkpoint(session, wrapper, config, name, work)
    return bad


WORKER = """
import sys, numpy as np, torch, fsdp_mlir
plan, data, out = sys.argv[1:4]
feed = dict(np.load(data))
with fsdp_mlir.Session(plan) as s:
    loss = s.step(feed, lr=float(sys.argv[4]))
    state = s.state_dict()
    if s.rank == 0:
        torch.save({"loss": loss, "state": state}, out)
"""


def check_distributed(fsdp_mlir, name, work, build) -> list[str]:
    import numpy as np
    import torch

    wrapper, _, block, inputs, target = make(name)
    onnx_path = work / f"{name}.onnx"
    # Whisper's sinusoidal encoder positions are frozen: a unit of their own
    # (wrap_frozen), as torch's FSDP needs them out of a trainable unit.
    plan = fsdp_mlir.compile(onnx_path, batch_size=BATCH // 2, world_size=2,
                             policy=fsdp_mlir.transformer_layers([block]),
                             wrap_frozen=True if name == "whisper" else None,
                             optimizer={"optimizer": "adamw"}, out=work / f"{name}.w2.plan")
    data = work / f"{name}.npz"
    np.savez(data, **{f"input_{i}": x.numpy() for i, x in enumerate((*inputs, target))})
    worker = work / "worker.py"
    worker.write_text(WORKER)
    out = work / f"{name}.w2.pt"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python-frontend"))
    proc = subprocess.run([sys.executable, "-m", "fsdp_mlir.launch", "-n", "2", worker,
                           plan, data, out, str(LR)], env=env, capture_output=True,
                          text=True, timeout=600)
    if proc.returncode != 0:
        return [f"{name}: 2-rank FULL_SHARD step failed:\n{proc.stdout[-2000:]}"
                f"{proc.stderr[-3000:]}"]
    result = torch.load(out)
    ref_loss, grads = torch_step(wrapper, inputs, target)
    print(f"{name}: 2-rank FULL_SHARD ({block} units): loss {result['loss']:.6f}, "
          f"torch {ref_loss:.6f}")
    bad = [] if close(result["loss"], ref_loss) <= 0 else [
        f"{name}: 2-rank loss {result['loss']} != torch's {ref_loss}"]
    return bad + compare_params(result["state"], wrapper, grads, f"{name}: 2-rank step")


def check_long_sequence(fsdp_mlir, work) -> list[str]:
    """LLaMA's forward at 256 tokens: its 2 x 1 x 256 x 256 mask (and the
    B x T x T steps that build it) still folds at import."""
    global SEQ
    saved, SEQ = SEQ, 256
    try:
        return check_forward(fsdp_mlir, "llama", work)
    finally:
        SEQ = saved


def check_drop_path(fsdp_mlir, work) -> list[str]:
    """BEiT trained with stochastic depth. drop_path_rate 0.5 over 2 layers
    gives layer 1's BeitDropPath p = 0.5, called after attention and after
    the MLP; export draws it as a Dropout of per-sample ones, so the
    runtime's Philox masks decide. torch's AdamW step with the masks the
    independent philox_ref.py draws for those two random ops (ids 0 and 1,
    step 0, one element per sample) gives the same loss and parameters."""
    import numpy as np
    import onnx
    import torch

    sys.path.insert(0, str(HERE))
    import philox_ref

    global DROP_PATH
    saved, DROP_PATH = DROP_PATH, 0.5
    try:
        wrapper, _, _, inputs, target = make("beit")
    finally:
        DROP_PATH = saved
    onnx_path = fsdp_mlir.export(wrapper, (*inputs, target), work / "beit.drop_path.onnx",
                                 loss_fn=loss_fn)
    props = {p.key: p.value for p in onnx.load(str(onnx_path)).metadata_props}
    swapped = json.loads(props[fsdp_mlir.METADATA_KEY])["stochastic_depth"]
    want = [{"fqn": "beit.layers.1.drop_path", "p": 0.5, "mode": "row"}]
    if swapped != want:
        return [f"beit drop_path: the export's stochastic_depth is {swapped}, not {want}"]
    masks = [philox_ref.keep_mask(DROP_PATH_SEED, 0, op, 0, BATCH, 0.5) for op in (0, 1)]
    if all(m.all() for m in masks) or not any(m.any() for m in masks):
        return [f"beit drop_path: seed {DROP_PATH_SEED} drops no sample or every sample"]
    plan = fsdp_mlir.compile(onnx_path, batch_size=BATCH, optimizer={"optimizer": "adamw"})
    with fsdp_mlir.Session(plan, seed=DROP_PATH_SEED) as session:
        loss = session.step(feed(session, inputs, target), lr=LR)
        state = session.state_dict()
    calls = []
    for _, m in wrapper.named_modules():
        if type(m).__name__ == "BeitDropPath" and m.drop_prob > 0:
            def forward(h, m=m):
                keep = masks[len(calls)]
                calls.append(m)
                noise = torch.from_numpy(keep.astype(np.float32)).reshape(
                    (-1,) + (1,) * (h.ndim - 1))
                return h.div(1 - m.drop_prob) * noise
            m.forward = forward
    ref_loss, grads = torch_step(wrapper, inputs, target)
    print(f"beit drop_path 0.5 (masks {[m.tolist() for m in masks]}): AdamW step: "
          f"loss {loss:.6f}, torch {ref_loss:.6f}")
    bad = [] if len(calls) == 2 else [f"beit drop_path: torch called {len(calls)} DropPaths"]
    if close(loss, ref_loss) > 0:
        bad.append(f"beit drop_path: step loss {loss} != torch's {ref_loss}")
    return bad + compare_params(state, wrapper, grads, "beit drop_path step")


def check_model(fsdp_mlir, name, work, build, distributed) -> tuple[list[str], str]:
    """(failures, status line) of one model; an expected refusal passes."""
    from fsdp_mlir import ToolError
    from fsdp_mlir.runtime import RuntimeError_

    try:
        bad = check_forward(fsdp_mlir, name, work)
        bad += check_step(fsdp_mlir, name, work)
        if distributed and not bad:
            bad += check_distributed(fsdp_mlir, name, work, build)
    except (ToolError, fsdp_mlir.ExportError, RuntimeError_) as e:
        text = str(e)
        if name in REFUSED and REFUSED[name] in text:
            return [], f"refused as documented ({REFUSED[name]})"
        return [f"{name}: {text[-3000:]}"], "FAILED"
    if name in REFUSED:
        bad.append(f"{name}: expected the refusal '{REFUSED[name]}' but it passed: "
                   "update REFUSED and docs/frontend.md")
    return bad, "FAILED" if bad else "passed"


MODELS = ["gpt2", "llama", "mistral", "qwen2", "gemma", "falcon", "bert", "t5", "vit",
          "mixtral", "whisper", "wav2vec2", "beit", "dinov2", "fnet"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", type=Path)
    ap.add_argument("--keep", type=Path, help="keep the exports and plans here")
    ap.add_argument("--only", nargs="+", choices=MODELS, metavar="NAME")
    ap.add_argument("--no-distributed", action="store_true")
    args = ap.parse_args(argv)

    import torch

    if int(torch.__version__.split(".")[0]) < 2:
        print(f"skipped: {sys.executable} has torch {torch.__version__}, not 2.x; "
              "run this with .venv-torch2/bin/python (scripts/setup.sh makes it)")
        return SKIPPED
    try:
        import safetensors  # noqa: F401
        import transformers
    except ImportError as e:
        print(f"skipped: {sys.executable} has no {e.name} (scripts/setup.sh installs it)")
        return SKIPPED
    build = args.build.resolve()
    os.environ.setdefault("FSDP_MLIR_TOOLS_DIR", str(build / "bin"))
    sys.path.insert(0, str(ROOT / "python-frontend"))
    import fsdp_mlir

    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    failed, table = [], []
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for name in args.only or MODELS:
            bad, status = check_model(fsdp_mlir, name, work, build,
                                      not args.no_distributed)
            for line in bad:
                print(f"FAILED: {line}")
            failed += bad
            table.append(f"  {name:8s} {status}")
        if not args.only or "llama" in args.only:
            bad = check_long_sequence(fsdp_mlir, work)
            for line in bad:
                print(f"FAILED: {line}")
            failed += bad
            table.append(f"  llama at 256 tokens: forward {'FAILED' if bad else 'passed'}")
        if not args.only or "beit" in args.only:
            bad = check_drop_path(fsdp_mlir, work)
            for line in bad:
                print(f"FAILED: {line}")
            failed += bad
            table.append(f"  beit with drop_path 0.5: step {'FAILED' if bad else 'passed'}")
    print("summary:\n" + "\n".join(table))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
