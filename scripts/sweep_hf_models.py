#!/usr/bin/env python3
"""A sweep of Hugging Face architectures against torch 2.x, wider than ctest's.

    .venv-torch2/bin/python scripts/sweep_hf_models.py BUILD_DIR [NAME ...] [--no-step]

For each architecture (default: all of SPECS below), a tiny random config
with every dropout off, nothing downloaded: fsdp_mlir.export, compile a
forward plan, Session.forward against the HF model's logits; then, unless
--no-step, export with a cross-entropy loss, compile an SGD step, and
compare the loss and every parameter's gradient (the change of one step at
lr = 1) with torch's autograd. Prints one line per model and exits 1 when
any fails to compile or differs beyond |ours - torch| <= 1e-5 + 1e-4 |torch|
(logits, loss) or 1e-3 of a parameter's largest gradient (a step's float32
rounding). Not a ctest (it takes about 10 minutes on 2 cores):
test/e2e/check_hf_models.py is, for the models docs/python.md lists.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
import transformers as tf

ROOT = Path(__file__).resolve().parents[1]
B, S, V = 2, 8, 96
H = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
LM = dict(vocab_size=V, max_position_embeddings=64, use_cache=False)


def dec(cfg, cls, **kw):
    """A decoder LM's (input kind, config, class) from common sizes."""
    d = dict(H)
    d.update(LM)
    d.update(kw)
    return ("ids", getattr(tf, cfg)(**d), getattr(tf, cls))


SPECS = {
 "gpt_neox": lambda: dec("GPTNeoXConfig", "GPTNeoXForCausalLM"),
 "opt": lambda: ("ids", tf.OPTConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, ffn_dim=64, num_attention_heads=4, word_embed_proj_dim=32, max_position_embeddings=64, dropout=0.0, attention_dropout=0.0, use_cache=False), tf.OPTForCausalLM),
 "bloom": lambda: ("ids", tf.BloomConfig(vocab_size=V, hidden_size=32, n_layer=2, n_head=4, use_cache=False, hidden_dropout=0.0, attention_dropout=0.0), tf.BloomForCausalLM),
 "gptj": lambda: ("ids", tf.GPTJConfig(vocab_size=V, n_positions=64, n_embd=32, n_layer=2, n_head=4, rotary_dim=4, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0, use_cache=False), tf.GPTJForCausalLM),
 "codegen": lambda: ("ids", tf.CodeGenConfig(vocab_size=V, n_positions=64, n_ctx=64, n_embd=32, n_layer=2, n_head=4, rotary_dim=4, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0, use_cache=False), tf.CodeGenForCausalLM),
 "phi": lambda: dec("PhiConfig", "PhiForCausalLM"),
 "phi3": lambda: dec("Phi3Config", "Phi3ForCausalLM", pad_token_id=0),
 "gemma": lambda: dec("GemmaConfig", "GemmaForCausalLM", head_dim=8, num_key_value_heads=2),
 "gemma2": lambda: dec("Gemma2Config", "Gemma2ForCausalLM", head_dim=8, num_key_value_heads=2),
 "gemma3": lambda: dec("Gemma3TextConfig", "Gemma3ForCausalLM", head_dim=8, num_key_value_heads=2),
 "qwen3": lambda: dec("Qwen3Config", "Qwen3ForCausalLM", head_dim=8, num_key_value_heads=2),
 "mixtral": lambda: dec("MixtralConfig", "MixtralForCausalLM", num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2),
 "qwen2_moe": lambda: dec("Qwen2MoeConfig", "Qwen2MoeForCausalLM", num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, shared_expert_intermediate_size=32),
 "olmo": lambda: dec("OlmoConfig", "OlmoForCausalLM"),
 "olmo2": lambda: dec("Olmo2Config", "Olmo2ForCausalLM"),
 "starcoder2": lambda: dec("Starcoder2Config", "Starcoder2ForCausalLM", num_key_value_heads=2),
 "granite": lambda: dec("GraniteConfig", "GraniteForCausalLM"),
 "cohere": lambda: dec("CohereConfig", "CohereForCausalLM"),
 "gpt_bigcode": lambda: ("ids", tf.GPTBigCodeConfig(vocab_size=V, n_positions=64, n_embd=32, n_layer=2, n_head=4, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0, use_cache=False), tf.GPTBigCodeForCausalLM),
 "mpt": lambda: ("ids", tf.MptConfig(vocab_size=V, d_model=32, n_layers=2, n_heads=4, max_seq_len=64, use_cache=False), tf.MptForCausalLM),
 "xglm": lambda: ("ids", tf.XGLMConfig(vocab_size=V, d_model=32, num_layers=2, attention_heads=4, ffn_dim=64, max_position_embeddings=64, dropout=0, attention_dropout=0, activation_dropout=0, use_cache=False), tf.XGLMForCausalLM),
 "biogpt": lambda: dec("BioGptConfig", "BioGptForCausalLM"),
 "smollm3": lambda: dec("SmolLM3Config", "SmolLM3ForCausalLM", num_key_value_heads=2, pad_token_id=0),
 "glm": lambda: dec("GlmConfig", "GlmForCausalLM", num_key_value_heads=2, head_dim=8, pad_token_id=0),
 "helium": lambda: dec("HeliumConfig", "HeliumForCausalLM", num_key_value_heads=2, head_dim=8),
 "roberta": lambda: ("mlm", tf.RobertaConfig(vocab_size=V, max_position_embeddings=64, **H), tf.RobertaForMaskedLM),
 "distilbert": lambda: ("mlm", tf.DistilBertConfig(vocab_size=V, dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=64), tf.DistilBertForMaskedLM),
 "albert": lambda: ("mlm", tf.AlbertConfig(vocab_size=V, embedding_size=16, max_position_embeddings=64, **H), tf.AlbertForMaskedLM),
 "electra": lambda: ("mlm", tf.ElectraConfig(vocab_size=V, embedding_size=16, max_position_embeddings=64, **H), tf.ElectraForMaskedLM),
 "deberta_v2": lambda: ("mlm", tf.DebertaV2Config(vocab_size=V, max_position_embeddings=64, **H), tf.DebertaV2ForMaskedLM),
 "mpnet": lambda: ("mlm", tf.MPNetConfig(vocab_size=V, max_position_embeddings=64, **H), tf.MPNetForMaskedLM),
 "modernbert": lambda: ("mlm", tf.ModernBertConfig(vocab_size=V, max_position_embeddings=64, global_attn_every_n_layers=2, local_attention=4, pad_token_id=0, bos_token_id=1, eos_token_id=2, sep_token_id=2, cls_token_id=1, **H), tf.ModernBertForMaskedLM),
 "bart": lambda: ("s2s", tf.BartConfig(vocab_size=V, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64, use_cache=False), tf.BartForConditionalGeneration),
 "pegasus": lambda: ("s2s", tf.PegasusConfig(vocab_size=V, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64, use_cache=False), tf.PegasusForConditionalGeneration),
 "marian": lambda: ("s2s", tf.MarianConfig(vocab_size=V, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64, use_cache=False, pad_token_id=0, decoder_start_token_id=0), tf.MarianMTModel),
 "swin": lambda: ("img32", tf.SwinConfig(image_size=32, patch_size=4, num_channels=3, embed_dim=16, depths=[1, 1], num_heads=[2, 4], window_size=4, num_labels=5), tf.SwinForImageClassification),
 "convnext": lambda: ("img32", tf.ConvNextConfig(num_channels=3, num_stages=2, hidden_sizes=[8, 16], depths=[1, 1], num_labels=5), tf.ConvNextForImageClassification),
 "deit": lambda: ("img16", tf.DeiTConfig(image_size=16, patch_size=8, num_channels=3, num_labels=5, **H), tf.DeiTForImageClassification),
 "beit": lambda: ("img16", tf.BeitConfig(image_size=16, patch_size=8, num_channels=3, num_labels=5, use_relative_position_bias=True, **H), tf.BeitForImageClassification),
 "dinov2": lambda: ("img16", tf.Dinov2Config(image_size=16, patch_size=8, num_channels=3, num_labels=5, **H), tf.Dinov2ForImageClassification),
 "resnet": lambda: ("img32", tf.ResNetConfig(num_channels=3, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], num_labels=5), tf.ResNetForImageClassification),
 "segformer": lambda: ("img32", tf.SegformerConfig(num_channels=3, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[8, 16], num_attention_heads=[1, 2], decoder_hidden_size=16, num_labels=5), tf.SegformerForImageClassification),
 "mobilevit": lambda: ("img32", tf.MobileViTConfig(image_size=32, patch_size=2, hidden_sizes=[16, 16, 16], neck_hidden_sizes=[8, 8, 8, 8, 8, 8, 16], num_labels=5), tf.MobileViTForImageClassification),
 "clip_vision": lambda: ("clipimg", tf.CLIPVisionConfig(image_size=16, patch_size=8, num_channels=3, **H), tf.CLIPVisionModel),
 "siglip_vision": lambda: ("clipimg", tf.SiglipVisionConfig(image_size=16, patch_size=8, num_channels=3, **H), tf.SiglipVisionModel),
 "levit": lambda: ("img32", tf.LevitConfig(image_size=32, num_channels=3, hidden_sizes=[16, 32, 48], num_attention_heads=[1, 2, 3], depths=[1, 1, 1], key_dim=[8, 8, 8], num_labels=5), tf.LevitForImageClassification),
 "poolformer": lambda: ("img32", tf.PoolFormerConfig(num_channels=3, hidden_sizes=[8, 16, 16, 16], depths=[1, 1, 1, 1], num_labels=5), tf.PoolFormerForImageClassification),
 "whisper": lambda: ("audio", tf.WhisperConfig(vocab_size=V, num_mel_bins=8, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, d_model=32, max_source_positions=16, max_target_positions=64, use_cache=False, decoder_start_token_id=0, pad_token_id=0), tf.WhisperForConditionalGeneration),
 "wav2vec2": lambda: ("wave", tf.Wav2Vec2Config(vocab_size=V, conv_dim=(8, 8), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=4, num_conv_pos_embedding_groups=2, do_stable_layer_norm=True, feat_extract_norm="layer", mask_time_prob=0.0, **H), tf.Wav2Vec2ForCTC),
}


# Models whose training step float32 cannot compare at these sizes: the
# forward is still compared.
ILL_CONDITIONED = {
    "levit": "its head's training-mode BatchNorm1d normalises a batch of 2: "
             "torch's own float32 and float64 losses differ by 8e-5",
}


def zero_dropout(cfg):
    for k, v in list(cfg.to_dict().items()):
        if isinstance(v, float) and any(w in k for w in ("dropout", "pdrop", "drop_path",
                                                          "layerdrop")):
            setattr(cfg, k, 0.0)


def call(model, kind, xs):
    """The HF model's logits (or pooled output) for input kind `kind`."""
    cls = type(model).__mro__[1]
    if kind in ("ids", "mlm"):
        return cls.forward(model, input_ids=xs[0]).logits
    if kind == "s2s":
        return cls.forward(model, input_ids=xs[0], decoder_input_ids=xs[1]).logits
    if kind == "clipimg":
        return cls.forward(model, pixel_values=xs[0]).pooler_output
    if kind.startswith("img"):
        return cls.forward(model, pixel_values=xs[0]).logits
    if kind == "audio":
        return cls.forward(model, input_features=xs[0], decoder_input_ids=xs[1]).logits
    return cls.forward(model, input_values=xs[0]).logits  # wave


def build(name):
    kind, cfg, cls = SPECS[name]()
    zero_dropout(cfg)
    if getattr(cls, "_can_set_experts_implementation", None) and \
            cls._can_set_experts_implementation():
        cfg._experts_implementation = "batched_mm"
    torch.manual_seed(0)
    inputs = {
        "ids": lambda: (torch.randint(3, V, (B, S)),),
        "mlm": lambda: (torch.randint(3, V, (B, S)),),
        "s2s": lambda: (torch.randint(3, V, (B, S)), torch.randint(3, V, (B, S))),
        "img16": lambda: (torch.randn(B, 3, 16, 16),),
        "clipimg": lambda: (torch.randn(B, 3, 16, 16),),
        "img32": lambda: (torch.randn(B, 3, 32, 32),),
        "audio": lambda: (torch.randn(B, 8, 32), torch.randint(3, V, (B, S))),
        "wave": lambda: (torch.randn(B, 400),),
    }[kind]()
    torch.manual_seed(1)
    wrapped = type(cls.__name__, (cls,), {"forward": lambda self, *xs: call(self, kind, xs)})
    return wrapped(cfg), inputs


def loss_fn(logits, target):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))


def excess(ours, ref) -> float:
    ours, ref = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    if ours.shape != ref.shape:
        return float("inf")
    return float(np.max(np.abs(ours - ref) - (1e-5 + 1e-4 * np.abs(ref))))


def run(fsdp_mlir, name, work, step) -> tuple[bool, str]:
    model, inputs = build(name)
    model.eval()
    with torch.no_grad():
        ref = model(*inputs)
    plan = fsdp_mlir.compile(fsdp_mlir.export(model, inputs, work / f"{name}.onnx"),
                             batch_size=B)
    feed = {f"input_{i}": x.numpy() for i, x in enumerate(inputs)}
    with fsdp_mlir.Session(plan) as s:
        ours = s.forward(feed)["output_0"]
    ok = excess(ours, ref.numpy()) <= 0
    line = f"forward max |diff| {np.abs(ours - ref.numpy()).max():.2g}"
    if not step or name in ILL_CONDITIONED:
        return ok, line + (f"; step not compared: {ILL_CONDITIONED[name]}"
                           if step else "")
    target = torch.randint(0, ref.shape[-1], ref.shape[:-1])
    model.train()
    onnx_path = fsdp_mlir.export(model, inputs + (target,), work / f"{name}.step.onnx",
                                 loss_fn=loss_fn)
    plan = fsdp_mlir.compile(onnx_path, batch_size=B, optimizer={"optimizer": "sgd"})
    feed["input_" + str(len(inputs))] = target.numpy()
    with fsdp_mlir.Session(plan) as s:
        before = {k: v.numpy().copy() for k, v in s.state_dict().items()}
        loss = float(np.asarray(s.step(feed, lr=1.0)))
        after = s.state_dict()
    model.zero_grad()
    ref_loss = loss_fn(model(*inputs), target)
    ref_loss.backward()
    ok = ok and excess(loss, float(ref_loss)) <= 0
    # The step's gradient is before - after: its float32 rounding is a few
    # ulps of the parameter, which for a small gradient (a deep LayerNorm's
    # at init) is most of it; a gradient that is mathematically zero (a key
    # bias: softmax ignores it) is float32 noise relative to the step's
    # largest. Allowed: 1e-3 of the parameter's largest gradient, 1e-5 of
    # the step's largest and 4 ulps of the parameter; worst is the largest
    # ratio.
    largest = max(float(p.grad.abs().max()) for p in model.parameters()
                  if p.grad is not None)
    worst, where = 0.0, ""
    for fqn, p in model.named_parameters():
        if p.grad is None:
            continue
        if fqn not in before:
            return False, line + f"; no '{fqn}' in the session's state dict"
        grad = before[fqn] - after[fqn].numpy()
        allowed = (1e-3 * float(p.grad.abs().max()) + 1e-5 * largest +
                   4 * np.spacing(np.abs(before[fqn]).astype(np.float32)))
        ratio = float(np.max(np.abs(grad - p.grad.numpy()) / np.maximum(allowed, 1e-30)))
        if ratio > worst:
            worst, where = ratio, fqn
    ok = ok and worst <= 1
    return ok, line + (f"; loss {loss:.6g} vs torch {float(ref_loss):.6g}; gradients within "
                       f"{worst:.2g} of the tolerance (worst: {where})")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", type=Path)
    ap.add_argument("names", nargs="*", metavar="NAME", help=", ".join(SPECS))
    ap.add_argument("--no-step", action="store_true")
    args = ap.parse_args(argv)
    unknown = [n for n in args.names if n not in SPECS]
    if unknown:
        ap.error(f"unknown models {unknown}; known: {', '.join(SPECS)}")
    os.environ.setdefault("FSDP_MLIR_TOOLS_DIR", str(args.build.resolve() / "bin"))
    sys.path.insert(0, str(ROOT / "python-frontend"))
    import fsdp_mlir

    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.names or list(SPECS):
            start = time.time()
            try:
                ok, line = run(fsdp_mlir, name, Path(tmp), not args.no_step)
            except Exception as e:  # noqa: BLE001 - every failure is reported
                ok, line = False, f"{type(e).__name__}: {str(e).strip()[-600:]}"
            print(f"{name}: {'ok' if ok else 'FAILED'}: {line} [{time.time() - start:.0f} s]",
                  flush=True)
            if not ok:
                failed.append(name)
    print(f"{len(failed)} of {len(args.names or SPECS)} failed" +
          (f": {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
