"""GGUF files written with the gguf package, for the tests that read them."""

from __future__ import annotations

import gguf
import numpy as np


def write_tiny_gguf(path, quant=gguf.GGMLQuantizationType.Q8_0, vocab_words=0, split_max_tensors=0,
                    embedding_rows=256, runnable=False, rope_theta=None):
    """A two-block llama GGUF (quantized matrices, optional tokenizer arrays, typed metadata); returns its
    parameter count. `runnable` (or a `rope_theta`) adds the rope base and norm eps a forward needs (validate)."""
    w = gguf.GGUFWriter(str(path), "llama", split_max_tensors=split_max_tensors)
    w.add_block_count(2)
    w.add_embedding_length(64)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_context_length(512)
    w.add_feed_forward_length(128)
    if runnable or rope_theta is not None:
        w.add_rope_freq_base(10000.0 if rope_theta is None else rope_theta)
        w.add_layer_norm_rms_eps(1e-5)
    if vocab_words:   # a real tokenizer's arrays: the bulk of a GGUF header
        w.add_tokenizer_model("gpt2")
        w.add_token_list([f"tok{i:07d}" for i in range(vocab_words)])
        w.add_token_types([1] * vocab_words)
        w.add_token_scores([0.5] * vocab_words)
        w.add_array("test.nested", [[1, 2], [3]])
        w.add_array("test.strings", ["a", "bé"])
    w.add_bool("test.flag", True)
    w.add_float64("test.f64", 0.25)
    w.add_int64("test.i64", -(1 << 40))
    w.add_string("test.text", "héllo")
    rng = np.random.default_rng(0)
    w.add_tensor("token_embd.weight", rng.standard_normal((embedding_rows, 64)).astype(np.float32))
    w.add_tensor("output_norm.weight", np.ones(64, np.float32))
    w.add_tensor("output.weight", rng.standard_normal((256, 64)).astype(np.float16))
    for i in range(2):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", np.ones(64, np.float32))
        w.add_tensor(p + "ffn_norm.weight", np.ones(64, np.float32))
        for name, shape in (("attn_q", (64, 64)), ("attn_k", (32, 64)), ("attn_v", (32, 64)),
                            ("attn_output", (64, 64)), ("ffn_gate", (128, 64)), ("ffn_up", (128, 64)),
                            ("ffn_down", (64, 128))):
            q = gguf.quants.quantize(rng.standard_normal(shape).astype(np.float32), quant)
            w.add_tensor(p + name + ".weight", q, raw_shape=q.shape, raw_dtype=quant)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    per_layer = 64 * 64 * 2 + 32 * 64 * 2 + 128 * 64 * 3 + 64 * 2
    return (embedding_rows + 256) * 64 + 64 + 2 * per_layer
